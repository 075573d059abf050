"""The goal benchmarks of issue 22 run one after another (``cpu_goals.py --run``): peak.py
first (is the host as fast as when its peaks were measured?), then each benchmark with the
command that wrote its committed results, with progress lines and elapsed times."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import ROOT, say  # noqa: E402
from benchmarks.peak import HOST_TAG, parse_host_lines  # noqa: E402

HOST_SLOW = 0.9  # warn when peak.py finds the host below this fraction of its stored FMA peak


@dataclass(frozen=True)
class Step:
    name: str
    args: tuple[str, ...]  # the script and its arguments, from the repository root


# the commands that wrote the committed results files (gemm2 with the --runs its .md leaves out)
PEAK = Step("peak", ("benchmarks/peak.py",))
STEPS: tuple[Step, ...] = (
    Step("gemm1", ("benchmarks/bench_gemm.py",)),
    Step("gemm2", ("benchmarks/bench_gemm.py", "--threads", "2", "--runs", "80")),
    Step("minilm", ("benchmarks/bench_minilm.py", "--batches", "1,8,32")),
    Step("mlp", ("benchmarks/bench_mnist_mlp.py",)),
    Step("dispatch", ("benchmarks/bench_dispatch.py",)),
    Step("decode1", ("benchmarks/bench_decode.py",)),
    Step("decode2", ("benchmarks/bench_decode.py", "--threads", "2")),
    Step("contention", ("benchmarks/bench_contention.py", "--runs", "40")),
)

# a runner takes a command (argv) and returns its exit status and its output
Runner = Callable[[Sequence[str]], tuple[int, str]]


def subprocess_runner(argv: Sequence[str]) -> tuple[int, str]:
    """Run ``argv`` from the repository root, its output echoed as it comes."""
    proc = subprocess.Popen(list(argv), cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, bufsize=1)
    lines = []
    assert proc.stdout is not None  # PIPE asked for above
    for line in proc.stdout:
        sys.stdout.write(line)
        sys.stdout.flush()
        lines.append(line)
    return proc.wait(), "".join(lines)


def select_steps(only: str) -> list[Step]:
    """peak.py first, then the goal benchmarks (``only``: a comma list of their names)."""
    names = [n for n in only.split(",") if n] if only else [s.name for s in STEPS]
    known = {s.name for s in STEPS}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ValueError(f"unknown step(s) {', '.join(unknown)}: choose from "
                         + ", ".join(s.name for s in STEPS))
    return [PEAK] + [s for s in STEPS if s.name in names]


def host_lines(peak_output: str) -> list[str]:
    """peak.py's host fractions (its ``host_line``s: this run's FMA peak and bandwidth over the
    stored ones), one line a thread count, with a warning where the FMA figure is below
    HOST_SLOW (the goals' ratios hold, but figures against the stored peak read low: a slowed
    host)."""
    out = []
    for host in parse_host_lines(peak_output):
        line = (f"host at {host.fma:.2f} of its stored FMA peak and {host.bandwidth:.2f} of its "
                f"stored bandwidth on {host.threads} thread(s)")
        if host.fma < HOST_SLOW:
            line += (f"  WARNING: below {HOST_SLOW:g}: this host runs slower than when its "
                     f"peaks were measured; fractions of the peak and floors will read low")
        out.append(line)
    return out or [f"peak.py printed no '{HOST_TAG}' line"]


def _clock(seconds: float) -> str:
    m, s = divmod(int(round(seconds)), 60)
    return f"{m}m{s:02d}s"


def run_steps(steps: Sequence[Step], runner: Runner, python: str = sys.executable,
              clock: Callable[[], float] = time.monotonic,
              out: Callable[[str], None] = say) -> list[tuple[str, int]]:
    """Each step in turn with progress lines and elapsed times; returns (name, exit status)."""
    start = clock()
    done: list[tuple[str, int]] = []
    for i, step in enumerate(steps, 1):
        argv = [python, *step.args]
        out(f"[{i}/{len(steps)}] {step.name}: {' '.join(['python', *step.args])} "
            f"(at {time.strftime('%H:%M:%S')}, {_clock(clock() - start)} in)")
        t0 = clock()
        rc, text = runner(argv)
        out(f"[{i}/{len(steps)}] {step.name}: exit {rc} after {_clock(clock() - t0)}")
        if step is PEAK:
            for line in host_lines(text):
                out(f"[{i}/{len(steps)}] {line}")
        done.append((step.name, rc))
    out(f"all {len(steps)} step(s) in {_clock(clock() - start)}"
        + "".join(f"; {n} FAILED (exit {rc})" for n, rc in done if rc))
    return done
