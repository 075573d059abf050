"""The machine's f32 multiply-add ceiling: what no implementation of a benchmark can beat.

``fma_peak(threads)`` compiles a loop of independent fused multiply-adds on register-resident
vectors (no loads, no stores) with the CPU target's compiler, runs it on ``threads`` OpenMP
threads at once and returns the summed GFLOP/s (the best of a few rounds). A benchmark's FLOP
count divided by it is the least time any code can take on this machine, so a ratio target
can be checked against arithmetic before anyone profiles: at 784-128-10/128 the MLP training
step is 52.4 MFLOP, which at 2 x 116 GFLOP/s (this 2-core Zen 4 VM) is 0.226 ms.

``read_bandwidth(threads)`` is the memory-side ceiling beside it: GB/s of streaming reads of a
buffer far larger than the caches. A small batch's floor is the larger of its FLOPs at the
FMA peak and its weights read once at that bandwidth (``floor_fields``).

    python benchmarks/peak.py [--threads N]
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

# the probes live in the package (the explorer's cost overlay measures with them too)
from rlx_core.targets.cpu.peaks import (  # noqa: E402,F401
    SOURCE,
    PeakRun,
    Peaks,
    fma_peak,
    fma_ports,
    measure_peak_run,
    read_bandwidth,
)
from rlx_core.targets.cpu.placement import measure_placement  # noqa: E402

UNCALIBRATED = "uncalibrated"
# the first word of the line peak.py prints per thread count for scripts (host_line)
HOST_TAG = "host-fraction"


@dataclass(frozen=True)
class HostFraction:
    """This run's probes over the stored ceilings at ``threads`` threads (PeakRun's ratios)."""

    threads: int
    fma: float
    bandwidth: float


def host_line(threads: int, run: PeakRun) -> str:
    """The line peak.py prints for scripts (goal_runs reads it back with parse_host_lines):
    ``host-fraction threads=2 fma=0.987 bandwidth=0.512``; the prose line beside it may change
    its wording freely."""
    return (f"{HOST_TAG} threads={threads} fma={run.host_fraction:.3f} "
            f"bandwidth={run.bandwidth_fraction:.3f}")


def parse_host_lines(text: str) -> list[HostFraction]:
    """Every ``host_line`` in ``text`` (peak.py's output), in order; other lines are skipped."""
    out = []
    for line in text.splitlines():
        words = line.split()
        if not words or words[0] != HOST_TAG:
            continue
        fields = dict(w.split("=", 1) for w in words[1:] if "=" in w)
        out.append(HostFraction(int(fields["threads"]), float(fields["fma"]),
                                float(fields["bandwidth"])))
    return out


def bench_peaks(threads: int) -> PeakRun:
    """The ceilings a benchmark's floors use (``.kept``: measured now, against the store's; the
    higher FMA peak of quiet runs wins, and the second-highest bandwidth; a run on a loaded
    machine never replaces a quiet one: peaks.merge) beside this run's own measurement
    (``.now``). On a slowed or shared host the kept ceiling is above what the host gives now,
    so a benchmark prints both and rlx's fraction of each (``floor_fields``' ``run_peak``)."""
    return measure_peak_run(threads)


def _floor(gflop: float, peak: float, gbytes: float, bandwidth: float) -> tuple[float, float]:
    """(floor seconds, the bandwidth floor or 0): ``gflop`` at ``peak``, or the larger of that
    and ``gbytes`` at ``bandwidth`` where both are given."""
    flops_s = gflop / peak
    bytes_s = gbytes / bandwidth if gbytes and bandwidth else 0.0
    return max(flops_s, bytes_s), bytes_s


def floor_fields(gflop: float, peak: float, rlx_s: float, gbytes: float = 0.0,
                 bandwidth: float = 0.0, run_peak: float = 0.0,
                 run_bandwidth: float = 0.0) -> dict[str, float]:
    """A result row's floor and the fraction of the peak that rlx, taking ``rlx_s`` seconds,
    reached. The floor is ``gflop`` at ``peak`` GFLOP/s, or, with ``gbytes`` and a measured
    ``bandwidth`` (GB/s, read_bandwidth), the larger of that and the bytes streamed once at
    the bandwidth (a small batch: the weights dominate); ``rlx_over_floor`` is rlx's time
    over it. With ``run_peak`` (and ``run_bandwidth``), this run's own measurement
    (PeakRun.now), the same against it: ``run_floor_s``, ``rlx_fraction_of_run_peak`` and
    ``rlx_over_run_floor`` (a slowed host's floor, where the stored one reads low)."""
    out: dict[str, Any] = {"floor_s": gflop / peak,
                           "rlx_fraction_of_peak": round(gflop / peak / rlx_s, 3)}
    if gbytes and bandwidth:
        out["floor_s"], out["bandwidth_floor_s"] = _floor(gflop, peak, gbytes, bandwidth)
        out["rlx_over_floor"] = round(rlx_s / out["floor_s"], 3)
    if run_peak:
        out["rlx_fraction_of_run_peak"] = round(gflop / run_peak / rlx_s, 3)
        out["run_floor_s"], _ = _floor(gflop, run_peak, gbytes, run_bandwidth)
        if gbytes and run_bandwidth:
            out["rlx_over_run_floor"] = round(rlx_s / out["run_floor_s"], 3)
    # a floor above a measured time means the peaks are wrong (measured on a busy machine, or
    # by a broken probe), not that rlx beat physics: say so instead of printing the number
    out["floor_status"] = UNCALIBRATED if out["floor_s"] > rlx_s else "ok"
    return out


def fraction_text(row: dict[str, Any]) -> str:
    """rlx's fraction of the stored peak, and of this run's where the row has it: "38% (84%)"."""
    run = row.get("rlx_fraction_of_run_peak")
    return f"{row['rlx_fraction_of_peak']:.0%}" + (f" ({run:.0%})" if run is not None else "")


def floor_text(row: dict[str, Any], scale: float = 1e3, digits: int = 2) -> str:
    """A row's floor for a table (milliseconds by default), or ``uncalibrated``."""
    if row.get("floor_status") == UNCALIBRATED:
        return UNCALIBRATED
    return f"{row['floor_s'] * scale:.{digits}f}"


def caption(peak: float, threads: int, flops: str, peaks: Peaks | PeakRun | None = None) -> str:
    """The sentence a results table's caption gives the peak and its floor column (with how
    busy the machine was when the peak was measured, given ``peaks``; given a PeakRun, also
    this run's own measurement and rlx's fraction of it, in brackets)."""
    how = f", measured {peaks.describe()}" if peaks is not None else ""
    run = (" *rlx of peak*: of the stored peak, and in brackets of this run's own."
           if isinstance(peaks, PeakRun) else "")
    return (f"f32 FMA peak at {threads} thread(s): {peak:.0f} GFLOP/s (`benchmarks/peak.py`"
            f"{how}); *floor*: {flops} at that peak, a time no implementation beats here "
            f"(`{UNCALIBRATED}` where a measured time beat it: the peak was measured low).{run}")


def main(argv: list[str] | None = None) -> int:
    import os

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    args = ap.parse_args(argv)
    # where the first two CPUs sit moves the two-thread bandwidth (the Zen 4 VM: 35-37 GB/s
    # on one L3, 60-65 on two): said before and after the probes, so a switch shows
    print(f"placement at the start: {measure_placement().describe()}")
    for n in sorted({1, args.threads}):
        run = bench_peaks(n)
        p = run.kept
        print(f"{n} thread(s): f32 FMA peak {p.gflops:.1f} GFLOP/s, memory read bandwidth "
              f"{p.gbps:.1f} GB/s; kept: {p.describe()}; {run.summary()}")
        print(host_line(n, run))
    # the peak's sanity check: ports x lanes x 2 FLOP x clock is what one core can issue
    print(f"per core: {fma_ports().describe()}")
    print(f"placement at the end: {measure_placement().describe()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
