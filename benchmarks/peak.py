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
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

# the probes live in the package (the explorer's cost overlay measures with them too)
from rlx_core.targets.cpu.peaks import SOURCE, fma_peak, read_bandwidth  # noqa: E402,F401


def floor_fields(gflop: float, peak: float, rlx_s: float, gbytes: float = 0.0,
                 bandwidth: float = 0.0) -> dict[str, float]:
    """A result row's floor and the fraction of the peak that rlx, taking ``rlx_s`` seconds,
    reached. The floor is ``gflop`` at ``peak`` GFLOP/s, or, with ``gbytes`` and a measured
    ``bandwidth`` (GB/s, read_bandwidth), the larger of that and the bytes streamed once at
    the bandwidth (a small batch: the weights dominate); ``rlx_over_floor`` is rlx's time
    over it."""
    out = {"floor_s": gflop / peak, "rlx_fraction_of_peak": round(gflop / peak / rlx_s, 3)}
    if gbytes and bandwidth:
        out["bandwidth_floor_s"] = gbytes / bandwidth
        out["floor_s"] = max(out["floor_s"], out["bandwidth_floor_s"])
        out["rlx_over_floor"] = round(rlx_s / out["floor_s"], 3)
    return out


def caption(peak: float, threads: int, flops: str) -> str:
    """The sentence a results table's caption gives the peak and its floor column."""
    return (f"f32 FMA peak at {threads} thread(s): {peak:.0f} GFLOP/s (`benchmarks/peak.py`); "
            f"*floor*: {flops} at that peak, a time no implementation beats here.")


def main(argv: list[str] | None = None) -> int:
    import os

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    args = ap.parse_args(argv)
    one, all_ = fma_peak(1), fma_peak(args.threads)
    print(f"f32 FMA peak: {one:.1f} GFLOP/s on 1 thread, {all_:.1f} on {args.threads}")
    bw1, bw = read_bandwidth(1), read_bandwidth(args.threads)
    print(f"memory read bandwidth: {bw1:.1f} GB/s on 1 thread, {bw:.1f} on {args.threads}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
