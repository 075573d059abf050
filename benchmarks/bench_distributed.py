"""Distributed: rlx's all-reduce against a bare mpi4py ``Allreduce`` of the same buffers, and
the pipeline bubble against (p-1)/(m+p-1).

    python benchmarks/bench_distributed.py            # launches itself on 2 ranks (mpiexec)
    python benchmarks/bench_distributed.py --quick    # smaller sizes, fewer runs (smoke run)

All-reduce peers, per float32 buffer of 1 to 64 MB, timed interleaved in lockstep on every
rank (``common.interleaved``; every rank runs the same sequence of calls):

- ``mpi4py Allreduce``: ``MPI.COMM_WORLD.Allreduce(x, out, op=SUM)``, blocking, no deadline;
- ``mpi4py Iallreduce+Test``: the bare non-blocking call on the same buffers, polled with
  ``Test`` and ``time.sleep(0)`` (yields the core): the baseline for rlx's own overhead, since
  rlx's paths are non-blocking too (a blocking ``Allreduce`` spins in MPI's progress loop,
  which on oversubscribed cores starves the peer rank it waits for);
- ``rlx Communicator``: ``comm.all_reduce(x, "sum", out=out)``: ``Iallreduce`` on the same
  buffers, completed by polling ``Testall`` against the deadline (no hang on a dead peer);
- ``rlx IR all_reduce, out=``: a compiled program ``all_reduce(x)`` on the numpy target,
  called as ``exe(x, out=out)``: the arena runner hands ``x`` and ``out`` to ``Iallreduce``
  as they are (no copy, no pickling), the same buffers as the bare call;
- ``rlx IR all_reduce``: the same program called as ``exe(x)``: the result is a new array
  each call (its pages are touched for the first time by MPI).

A figure is the slowest rank's median. Pipeline: the MLP of 4 layers (1024 wide) trained
pipeline-parallel on 2 stages with 1F1B and GPipe, batch 256 in m = 2, 4, 8 micro-batches;
the measured bubble is each rank's idle fraction of a step (1 - busy / step time), averaged
over ranks and steps, next to the ideal (p-1)/(m+p-1).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from common import interleaved, limit_threads, machine, markdown_table, say, write_results  # noqa: E402

READING = """
## Reading these numbers

The IR all-reduce runs through the numpy reference's arena runner, which hands the op's
input and its result buffer (the caller's ``out=``, an arena slot, or a new output array)
straight to ``Iallreduce``: no copy, no pickling. Without ``out=`` the result is a new array
each call, whose pages MPI touches first (page faults). A blocking ``Allreduce`` spins in
MPI's progress loop; on a loaded machine with as many ranks as cores that spin starves the
peer rank, so the non-blocking paths (rlx's, and the polled bare call) can be faster than it:
the polled bare ``Iallreduce`` is the baseline for rlx's own overhead. The pipeline's backward
action recomputes the stage's forward before its backward (about 3x a forward), so the
measured idle fraction differs from the equal-time ideal (p-1)/(m+p-1). On a shared machine
compare the ratios with the load average above.
"""


PEERS = ("mpi4py Iallreduce+Test", "rlx Communicator", "rlx IR all_reduce, out=",
         "rlx IR all_reduce")


def _parse(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--quick", action="store_true", help="1 and 4 MB, m = 4 only")
    ap.add_argument("--no-write", action="store_true", help="print only")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    args.argv = [a for a in argv if a != "--worker"]
    return args


def _launch(args: argparse.Namespace, argv: list[str]) -> int:
    import subprocess

    from rlx_core.distributed.launch import launch_command, launch_env

    cmd = launch_command(args.ranks, __file__, [*argv, "--worker"])
    say("$ " + " ".join(cmd))
    return subprocess.call(cmd, env=launch_env())


def _all_reduce(comm, sizes_mb: list[int], quick: bool) -> list[dict]:
    import numpy as np

    import rlx_core as rlx
    from rlx_core.distributed import all_reduce

    world = comm.comm
    rows = []
    for mb in sizes_mb:
        n = mb * (1 << 20) // 4
        x = np.full(n, comm.rank + 1.0, np.float32)
        out = np.empty_like(x)
        exe = rlx.compile(lambda a: all_reduce(a, "sum", ranks=comm.size), x, target="numpy")
        def polled(x=x, out=out) -> None:
            request = world.Iallreduce(x, out, op=comm.mpi.SUM)
            while not request.Test():
                time.sleep(0)  # yield the core to a peer rank that shares it

        peers = {
            "mpi4py Allreduce": lambda x=x, out=out: world.Allreduce(x, out, op=comm.mpi.SUM),
            "mpi4py Iallreduce+Test": polled,
            "rlx Communicator": lambda x=x, out=out: comm.all_reduce(x, "sum", out=out),
            "rlx IR all_reduce, out=": lambda x=x, exe=exe, out=out: exe(x, out=out),
            "rlx IR all_reduce": lambda x=x, exe=exe: exe(x),
        }
        runs = (8 if quick else 30) if mb <= 4 else (4 if quick else 10)
        stats = interleaved(peers, runs=runs, warmup=2)
        want = comm.size * (comm.size + 1) / 2
        assert float(exe(x)[0]) == want and float(out[0]) == want
        assert exe(x, out=out) is out and float(out[-1]) == want
        med = {k: s.p50 for k, s in stats.items()}
        worst = {k: float(comm.all_reduce(np.array([v]), "max")[0]) for k, v in med.items()}
        base, polled_s = worst["mpi4py Allreduce"], worst["mpi4py Iallreduce+Test"]
        rows.append({"mb": mb, "runs": runs, "median_s": worst,
                     "ratio": {k: v / base for k, v in worst.items()},
                     "ratio_vs_polled": {k: v / polled_s for k, v in worst.items()}})
        if comm.rank == 0:
            say(f"{mb:>3} MB: " + ", ".join(f"{k} {v * 1e3:.2f} ms ({v / base:.3f}x, "
                                           f"{v / polled_s:.3f}x polled)"
                                           for k, v in worst.items()))
    return rows


def _bubble(comm, quick: bool) -> list[dict]:
    import numpy as np

    import rlx_core.frontend.nn as nn
    from rlx_core.distributed.pipeline import PipelineStep, ideal_bubble, split_layers
    from rlx_core.models.mlp import cross_entropy, init_mlp

    sizes, batch = (1024, 1024, 1024, 1024, 1024), 256
    params = init_mlp(sizes, seed=0)
    names = sorted(params, key=lambda k: int(k.removeprefix("fc")))
    ranges = split_layers([a * b for a, b in zip(sizes[:-1], sizes[1:], strict=True)],
                          comm.size, by="cost")
    stages = [[names[i] for i in rg] for rg in ranges]

    def stage_fn(layers):
        def run(p, h):
            for name in layers:
                h = nn.linear(h, p[name]["weight"], p[name]["bias"])
                if name != names[-1]:
                    h = nn.relu(h)
            return h
        return run

    rng = np.random.default_rng(0)
    x = rng.standard_normal((batch, sizes[0])).astype(np.float32)
    y = rng.integers(0, sizes[-1], batch).astype(np.int32)
    rows = []
    for micro in ((4,) if quick else (2, 4, 8)):
        for kind in ("1f1b", "gpipe"):
            step = PipelineStep([stage_fn(s) for s in stages],
                                [{k: params[k] for k in s} for s in stages], cross_entropy, x, y,
                                lr=1e-3, micro=micro, kind=kind, comm=comm)
            step(x, y)  # warm-up
            measured, times = [], []
            for _ in range(2 if quick else 4):
                step(x, y)
                measured.append(float(comm.all_reduce(np.array([step.bubble()]), "mean")[0]))
                times.append(float(comm.all_reduce(np.array([step.step_time]), "max")[0]))
            row = {"kind": kind, "micro": micro, "stages": comm.size,
                   "bubble_measured": float(np.median(measured)),
                   "bubble_ideal": ideal_bubble(comm.size, micro),
                   "step_s": float(np.median(times)),
                   "timeline": [vars(e) for e in step.timeline]}
            rows.append(row)
            if comm.rank == 0:
                say(f"PP={comm.size} {kind} m={micro}: bubble {row['bubble_measured']:.3f} "
                    f"(ideal {row['bubble_ideal']:.3f}), step {row['step_s'] * 1e3:.1f} ms")
    return rows


def _worker(args: argparse.Namespace) -> int:
    threads = limit_threads(1)  # one core per rank: ranks share the machine's cores
    start = machine()  # the load average before the run
    from rlx_core.distributed import init

    comm = init(timeout=300)
    sizes = [1, 4] if args.quick else [1, 4, 16, 64]
    reduce_rows = _all_reduce(comm, sizes, args.quick)
    bubble_rows = _bubble(comm, args.quick)
    if comm.rank != 0:
        return 0
    from rlx_core.targets.cpu.isa import detect

    info = {**start, "ranks": comm.size, "threads_per_rank": threads,
            "isa": detect().describe(), "load_average_1m_end": round(os.getloadavg()[0], 2),
            "command": "python benchmarks/bench_distributed.py " + " ".join(args.argv),
            "mpi": comm.mpi.Get_library_version().split(",")[0].strip()}
    md = [f"# bench_distributed ({comm.size} ranks, one machine)\n",
          f"CPU: {info['cpu']} ({info['cores']} cores, {info['machine']}; ISA {info['isa']}), "
          f"load average {info['load_average_1m']} at the start, "
          f"{info['load_average_1m_end']} at the end ({info['when']}); {info['mpi']}; ranks on "
          "shared memory, 1 thread each; the slowest rank's median.\n",
          f"`{info['command']}`\n",
          "## All-reduce (sum, float32), against a bare mpi4py Allreduce\n",
          "Each cell: the median in ms (ratio to the blocking `Allreduce`; ratio to the "
          "polled `Iallreduce`).\n",
          markdown_table(["MB", "mpi4py Allreduce ms", *PEERS],
                         [[r["mb"], f"{r['median_s']['mpi4py Allreduce'] * 1e3:.2f}",
                           *(f"{r['median_s'][p] * 1e3:.2f} ({r['ratio'][p]:.3f}x; "
                             f"{r['ratio_vs_polled'][p]:.3f}x)" for p in PEERS)]
                          for r in reduce_rows]),
          "\n## Pipeline bubble (MLP 4 x 1024, batch 256, 2 stages)\n",
          markdown_table(["schedule", "micro-batches", "bubble measured", "(p-1)/(m+p-1)",
                          "step ms"],
                         [[r["kind"], r["micro"], f"{r['bubble_measured']:.3f}",
                           f"{r['bubble_ideal']:.3f}", f"{r['step_s'] * 1e3:.1f}"]
                          for r in bubble_rows])]
    md.append(READING)
    text = "\n".join(md)
    say(text)
    if not args.no_write:
        slug = re.sub(r"[^a-z0-9]+", "-", info["cpu"].lower()).strip("-") or "cpu"
        js, mdp = write_results(f"distributed-{slug}" + ("-quick" if args.quick else ""),
                                {"machine": info, "all_reduce": reduce_rows,
                                 "pipeline": bubble_rows}, text)
        say(f"wrote {js} and {mdp}")
    return 0


def main(argv: list[str]) -> int:
    args = _parse(argv)
    if args.worker:
        return _worker(args)
    return _launch(args, argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
