"""Distributed: rlx's all-reduce against a bare mpi4py ``Allreduce`` of the same buffers, and
the pipeline bubble against (p-1)/(m+p-1).

    python benchmarks/bench_distributed.py                 # 2 ranks (mpiexec), all parts
    python benchmarks/bench_distributed.py --ranks 4 --skip-pipeline
    python benchmarks/bench_distributed.py --quick         # smaller sizes, fewer runs (smoke run)
    python benchmarks/bench_distributed.py --skip-pipeline --iallreduce-algorithm 1
                                                           # libnbc's ring for Iallreduce

All-reduce peers, per float32 buffer of 1 to 64 MB (and a 16-byte one, which shows the fixed
per-call cost), every rank running the same sequence of calls:

- ``mpi4py Allreduce``: ``MPI.COMM_WORLD.Allreduce(x, out, op=SUM)``, blocking, no deadline
  (the issue's peer);
- ``mpi4py Iallreduce+Wait``: the bare non-blocking call on the same buffers, completed by
  MPI's own blocking ``Wait``: the MPI algorithm rlx uses, with no Python in the wait;
  timed a second time as a peer of its own (``A/A``): the ratio of two identical peers is the
  run's noise floor;
- ``rlx Communicator``: ``comm.all_reduce(x, "sum", out=out)``: ``Iallreduce`` on the same
  buffers (checked once, then reused), completed against the deadline (distributed/deadline.py);
- ``rlx IR all_reduce, out=``: a compiled program ``all_reduce(x)`` on the numpy target,
  called as ``exe(x, out=out)``: ``x`` and ``out`` go to ``Iallreduce`` as they are (no copy,
  no pickling, no arena), the same buffers as the bare call;
- ``rlx IR all_reduce``: the same program called as ``exe(x)``: the result is a new array
  each call (its pages are touched for the first time by MPI).

Timing: repetition r runs every peer once, in an order rotated by r (load that drifts reaches
all peers alike), each call after an untimed barrier so that all ranks start it together. A
call's time is the slowest rank's (the collective is done when the last rank has it); a
figure is the median over repetitions, and each ratio (``rlx / bare``) is the ratio of the
medians with a bootstrap 5-95% interval over the repetitions. "best bare" is the faster of the
two bare peers at that size. The ranks run with Open MPI's ``mpi_yield_when_idle=1``
(``launch_env``; Open MPI's own choice for oversubscribed ranks), so a blocking MPI wait
gives its core to the peer rank it waits for, as rlx's wait does.

Per-call cost breakdown: each rank alone (a one-rank communicator split from the world, so
every collective completes at once and nothing waits on a peer), the thread CPU time per call
of a 16-byte all-reduce through each layer, bare MPI first; the difference of two rows is what
that layer adds per call, whatever the buffer size. Next to the 1 MB bare ``Allreduce`` it is
the share of that call rlx's Python costs.

``--iallreduce-algorithm N`` sets Open MPI's ``coll_libnbc_iallreduce_algorithm`` (0 auto,
1 ring, 2 binomial, 3 rabenseifner, 4 recursive doubling) for the run: the algorithm of the
non-blocking call rlx (and the ``Iallreduce+Wait`` peers) use; the blocking ``Allreduce`` is
coll/tuned's and does not change. Results go to a file named after it.

Data-parallel step: the MNIST MLP's training step with its gradient all-reduce inside
(``data_parallel_step``), the buckets issued as soon as their gradients exist against the same
step with every bucket after the backward pass (``overlap=False``).

Pipeline: the MLP of 4 layers (1024 wide) trained pipeline-parallel on the ranks as stages
with 1F1B and GPipe, batch 256 in m = 2, 4, 8 micro-batches; the measured bubble is each
rank's idle fraction of a step (1 - busy / step time), averaged over ranks and steps, next to
the ideal (p-1)/(m+p-1).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from common import (  # noqa: E402
    cpu_slug,
    end_of_run,
    limit_threads,
    machine,
    markdown_table,
    placement_text,
    say,
    write_results,
)

READING = """
## Reading these numbers

rlx's collectives are non-blocking MPI calls completed against a deadline (a dead or hung
rank becomes a typed error, never a hang), so rlx's overhead over bare MPI is (a) Python per
call: the argument checks (made once per pair of arrays), the program call, the wait loop;
(b) the wait: rlx tests the request back to back for 50 ms, as ``MPI_Wait`` does (with
``mpi_yield_when_idle`` each test yields the core inside MPI), then sleeps 1/64 of the time
waited so far (at most ~1.6% added); (c) ``Iallreduce``'s algorithm against the blocking
``Allreduce``'s (Open MPI's libnbc against coll/tuned), which is why both bare peers are
shown. The 16-byte row is (a) alone, and the per-call breakdown measures (a) without any
peer: rlx's layers add microseconds per call, a fraction of a percent of a 1 MB call. So where
rlx is slower than the blocking ``Allreduce`` at 1 MB but level with the bare
``Iallreduce+Wait``, the difference is (c): libnbc's algorithm (binomial reduce + broadcast
below 4 ranks unless ``coll_libnbc_iallreduce_algorithm`` says otherwise; compare runs with
``--iallreduce-algorithm 1`` and ``4``), which any deadline-bounded (non-blocking) all-reduce
on Open MPI inherits.
The IR program called with ``out=`` hands ``x`` and ``out`` straight to ``Iallreduce``; without
``out=`` the result is a new array each call, whose pages MPI touches first (page faults), so
it is slower at large sizes by the first touch of the result, not by rlx. With more ranks than
cores, and other processes on the machine, a call's time is mostly the OS scheduler's: compare
ratios, read their intervals, and compare with the load average above.

The pipeline's backward action recomputes the stage's forward before its backward (about 3x a
forward), so the measured idle fraction differs from the equal-time ideal (p-1)/(m+p-1).
"""


PEERS = ("mpi4py Allreduce", "mpi4py Iallreduce+Wait", "mpi4py Iallreduce+Wait (A/A)",
         "rlx Communicator", "rlx IR all_reduce, out=", "rlx IR all_reduce")
BARE = PEERS[:2]
CONTROL = PEERS[2]  # the same call as PEERS[1], timed as a peer of its own: the noise floor
RLX = PEERS[3:]


def _parse(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--quick", action="store_true", help="1 and 4 MB, m = 4 only")
    ap.add_argument("--skip-pipeline", action="store_true", help="the all-reduce part only")
    ap.add_argument("--no-write", action="store_true", help="print only")
    ap.add_argument("--iallreduce-algorithm", type=int, choices=range(5), default=None,
                    help="Open MPI coll_libnbc_iallreduce_algorithm for the run")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    args.argv = [a for a in argv if a != "--worker"]
    return args


def _launch(args: argparse.Namespace, argv: list[str]) -> int:
    import subprocess

    from rlx_core.distributed.launch import launch_command, launch_env

    cmd = launch_command(args.ranks, __file__, [*argv, "--worker"])
    say("$ " + " ".join(cmd))
    extra = ({} if args.iallreduce_algorithm is None else
             {"OMPI_MCA_coll_libnbc_iallreduce_algorithm": str(args.iallreduce_algorithm)})
    return subprocess.call(cmd, env=launch_env(extra))


def _timed(comm, peers: dict, runs: int, warmup: int) -> dict[str, list[float]]:
    """Per repetition, every peer once (rotated order), each after an untimed barrier; the
    slowest rank's seconds per call."""
    import numpy as np

    world, names = comm.comm, list(peers)
    for name in names:
        for _ in range(warmup):
            peers[name]()
    mine = np.zeros((len(names), runs))
    clock = time.perf_counter
    for r in range(runs):
        for k in range(len(names)):
            i = (k + r) % len(names)
            world.Barrier()
            t0 = clock()
            peers[names[i]]()
            mine[i, r] = clock() - t0
    slowest = comm.all_reduce(mine, "max")
    return {name: slowest[i].tolist() for i, name in enumerate(names)}


def _ratio(rlx: list[float], bare: list[float], rng) -> dict[str, float]:
    """median(rlx) / median(bare), with a bootstrap 5-95% interval over the repetitions."""
    import numpy as np

    a, b = np.asarray(rlx), np.asarray(bare)
    pick = rng.integers(0, len(a), (1000, len(a)))
    boot = np.median(a[pick], axis=1) / np.median(b[pick], axis=1)
    return {"ratio": float(np.median(a) / np.median(b)), "lo": float(np.quantile(boot, 0.05)),
            "hi": float(np.quantile(boot, 0.95))}


def _all_reduce(comm, sizes: list[int], quick: bool) -> list[dict]:
    import numpy as np

    import rlx_core as rlx
    from rlx_core.distributed import all_reduce

    world, mpi = comm.comm, comm.mpi
    rng = np.random.default_rng(0)
    rows = []
    for nbytes in sizes:
        n = nbytes // 4
        x = np.full(n, comm.rank + 1.0, np.float32)
        out = np.empty_like(x)
        exe = rlx.compile(lambda a: all_reduce(a, "sum", ranks=comm.size), x, target="numpy")
        peers = {
            "mpi4py Allreduce": lambda x=x, out=out: world.Allreduce(x, out, op=mpi.SUM),
            "mpi4py Iallreduce+Wait":
                lambda x=x, out=out: world.Iallreduce(x, out, op=mpi.SUM).Wait(),
            "mpi4py Iallreduce+Wait (A/A)":
                lambda x=x, out=out: world.Iallreduce(x, out, op=mpi.SUM).Wait(),
            "rlx Communicator": lambda x=x, out=out: comm.all_reduce(x, "sum", out=out),
            "rlx IR all_reduce, out=": lambda x=x, exe=exe, out=out: exe(x, out=out),
            "rlx IR all_reduce": lambda x=x, exe=exe: exe(x),
        }
        mb = nbytes / (1 << 20)
        runs = (200 if nbytes < 1 << 20 else 80 if mb <= 1 else 50 if mb <= 4
                else 16 if mb <= 16 else 8)
        if quick:
            runs = max(6, runs // 4)
        times = _timed(comm, peers, runs, warmup=2)
        want = comm.size * (comm.size + 1) / 2
        assert float(exe(x)[0]) == want and float(out[0]) == want
        assert exe(x, out=out) is out and float(out[-1]) == want
        med = {k: float(np.median(v)) for k, v in times.items()}
        best = min(BARE, key=lambda k: med[k])
        row = {"bytes": nbytes, "runs": runs, "median_s": med, "best_bare": best,
               "vs_allreduce": {k: _ratio(times[k], times["mpi4py Allreduce"], rng)
                                for k in RLX},
               "vs_best_bare": {k: _ratio(times[k], times[best], rng) for k in RLX},
               "control": _ratio(times[CONTROL], times["mpi4py Iallreduce+Wait"], rng),
               "overhead_us": {k: (med[k] - med[best]) * 1e6 for k in RLX}}
        rows.append(row)
        if comm.rank == 0:
            say(f"{_size(nbytes):>6}: " + ", ".join(f"{k} {v * 1e3:.3f} ms" for k, v in med.items())
                + "; vs best bare (" + best + "): "
                + ", ".join(f"{k} {_fmt(row['vs_best_bare'][k])}" for k in RLX))
    return rows


BREAKDOWN = ("mpi4py Allreduce", "mpi4py Iallreduce+Wait", "rlx plan lookup (checked pair)",
             "rlx Communicator.all_reduce", "rlx IR exe(x, out=)")


def _breakdown(comm, calls: int = 20000) -> dict[str, float]:
    """Thread CPU microseconds per call of a 16-byte all-reduce on a one-rank communicator
    (this rank alone: no waiting on a peer), through each layer; best of 3 rounds."""
    import numpy as np

    import rlx_core as rlx
    from rlx_core.distributed import Communicator, all_reduce
    from rlx_core.distributed.collective_exec import use_communicator

    alone = comm.comm.Split(comm.rank, 0)
    solo, mpi = Communicator(alone, timeout=comm.timeout), comm.mpi
    x = np.ones(4, np.float32)
    out = np.empty_like(x)
    with use_communicator(solo):
        exe = rlx.compile(lambda a: all_reduce(a, "sum", ranks=1), x, target="numpy")
        exe(x, out=out)
        exe(x, out=out)  # the whole-call path is armed after a first checked call
        solo.all_reduce(x, "sum", out=out)
        key = (id(x), id(out), "sum", solo.deterministic)

        def lookup() -> None:
            solo._plans[key].holds(x, out)

        layers = {
            "mpi4py Allreduce": lambda: alone.Allreduce(x, out, op=mpi.SUM),
            "mpi4py Iallreduce+Wait": lambda: alone.Iallreduce(x, out, op=mpi.SUM).Wait(),
            "rlx plan lookup (checked pair)": lookup,
            "rlx Communicator.all_reduce": lambda: solo.all_reduce(x, "sum", out=out),
            "rlx IR exe(x, out=)": lambda: exe(x, out=out),
        }
        best = {name: float("inf") for name in layers}
        for _ in range(3):
            for name, call in layers.items():
                t0 = time.thread_time()
                for _ in range(calls):
                    call()
                best[name] = min(best[name], (time.thread_time() - t0) / calls * 1e6)
    alone.Free()
    return best


def _dp_step(comm, quick: bool) -> dict:
    """The data-parallel MNIST MLP step (784-512-512-10, 64 rows per rank, 1 MB buckets) with
    the buckets issued early (overlapping the rest of the backward pass) and with them all
    after the backward pass; interleaved steps, the slowest rank's median ms per step."""
    import numpy as np

    import rlx_core as rlx
    from rlx_core.distributed import data_parallel_step
    from rlx_core.models.mlp import init_mlp, mlp_loss

    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 784)).astype(np.float32)
    y = rng.integers(0, 10, 64).astype(np.int32)
    steps = {name: data_parallel_step(mlp_loss, rlx.optim.SGD(0.01), init_mlp(), x, y,
                                      comm=comm, bucket_bytes=1 << 20, overlap=overlap)
             for name, overlap in (("buckets issued early", True),
                                   ("buckets after the backward pass", False))}
    runs = 6 if quick else 30
    times = _timed(comm, {k: (lambda s=s: s(x, y)) for k, s in steps.items()}, runs, warmup=2)
    a, b = steps.values()
    same = all(np.array_equal(a.params[k][w], b.params[k][w]) for k in a.params
               for w in ("weight", "bias"))
    first = a.executable.program.info["deferred_collectives"]
    return {"runs": runs, "buckets": len(a.buckets), "same_params": same,
            "median_ms": {k: float(np.median(v)) * 1e3 for k, v in times.items()},
            "in_flight_kernels": [w - s - 1 for s, w in first],
            "ratio": _ratio(times["buckets issued early"],
                            times["buckets after the backward pass"], rng)}


def _size(nbytes: int) -> str:
    return f"{nbytes >> 20} MB" if nbytes >= 1 << 20 else f"{nbytes} B"


def _fmt(r: dict[str, float]) -> str:
    return f"{r['ratio']:.3f}x [{r['lo']:.3f}, {r['hi']:.3f}]"


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
    import numpy as np

    start = machine()  # the load average before the run
    from rlx_core.distributed import init

    comm = init(timeout=300)
    sizes = [16, *((1 << 20) * m for m in ((1, 4) if args.quick else (1, 4, 16, 64)))]
    reduce_rows = _all_reduce(comm, sizes, args.quick)
    cost = _breakdown(comm)
    dp = _dp_step(comm, args.quick)
    cost = {k: float(comm.all_reduce(np.array([v]), "max")[0]) for k, v in cost.items()}
    bubble_rows = [] if args.skip_pipeline else _bubble(comm, args.quick)
    if comm.rank != 0:
        return 0
    from rlx_core.targets.cpu.isa import detect

    info = {**end_of_run(start), "ranks": comm.size, "threads_per_rank": threads,
            "isa": detect().describe(), "load_average_1m_end": round(os.getloadavg()[0], 2),
            "command": "python benchmarks/bench_distributed.py " + " ".join(args.argv),
            "mpi": comm.mpi.Get_library_version().split(",")[0].strip(),
            "yield": "OMPI_MCA_mpi_yield_when_idle="
                     + os.environ.get("OMPI_MCA_mpi_yield_when_idle", "(unset)"),
            "iallreduce_algorithm": os.environ.get(
                "OMPI_MCA_coll_libnbc_iallreduce_algorithm", "(Open MPI's choice)")}
    md = [f"# bench_distributed ({comm.size} ranks, one machine)\n",
          f"CPU: {info['cpu']} ({info['cores']} cores, {info['machine']}; ISA {info['isa']}), "
          f"load average {info['load_average_1m']} at the start, "
          f"{info['load_average_1m_end']} at the end ({info['when']}), {placement_text(info)}; "
          f"{info['mpi']}; "
          f"{comm.size} ranks on shared memory, 1 thread each"
          + (f", {comm.size} ranks on {info['cores']} cores: oversubscribed"
             if comm.size > info["cores"] else "") + f"; {info['yield']}; "
          f"libnbc Iallreduce algorithm: {info['iallreduce_algorithm']}.\n",
          f"`{info['command']}`\n",
          "## All-reduce (sum, float32): rlx against bare mpi4py on the same buffers\n",
          "Medians over the repetitions of the slowest rank's time per call, in ms.\n",
          markdown_table(["size", "runs", *PEERS],
                         [[_size(r["bytes"]), r["runs"],
                           *(f"{r['median_s'][p] * 1e3:.3f}" for p in PEERS)]
                          for r in reduce_rows]),
          "\nrlx / bare: ratio of the medians [bootstrap 5-95%], against the blocking "
          "`Allreduce` (the issue's peer) and against the faster bare peer at that size "
          "(overhead in us: the difference of the medians). A/A: the bare `Iallreduce+Wait` "
          "timed twice as two peers; its ratio is this run's noise floor (1.000x on a quiet "
          "machine): an rlx ratio inside it is no measured overhead.\n",
          markdown_table(["size", "A/A (noise)", "best bare",
                          *(f"{p} / Allreduce" for p in RLX),
                          *(f"{p} / best bare (us)" for p in RLX)],
                         [[_size(r["bytes"]), _fmt(r["control"]), r["best_bare"],
                           *(_fmt(r["vs_allreduce"][p]) for p in RLX),
                           *(f"{_fmt(r['vs_best_bare'][p])} ({r['overhead_us'][p]:+.0f})"
                             for p in RLX)]
                          for r in reduce_rows])]
    mb1 = next((r for r in reduce_rows if r["bytes"] == 1 << 20), None)
    bare_1mb = mb1["median_s"]["mpi4py Allreduce"] * 1e6 if mb1 else None
    md += ["\n## Per-call cost breakdown (one rank alone, 16 B, thread CPU us per call)\n",
           "Each rank on a one-rank communicator (nothing waits on a peer): what each layer "
           "costs per call, the slowest rank's best of 3 rounds of 20,000 calls; 'adds' is the "
           "difference to the bare `Iallreduce+Wait` rlx is built on"
           + (f", and '% of 1 MB' that difference over the 1 MB bare `Allreduce` above "
              f"({bare_1mb:.0f} us)" if bare_1mb else "") + ".\n",
           markdown_table(["layer", "us per call", "adds (us)", "% of 1 MB"],
                          [[name, f"{cost[name]:.2f}",
                            f"{cost[name] - cost['mpi4py Iallreduce+Wait']:+.2f}"
                            if name.startswith("rlx") and "lookup" not in name else "",
                            f"{(cost[name] - cost['mpi4py Iallreduce+Wait']) / bare_1mb:.2%}"
                            if bare_1mb and name.startswith("rlx") and "lookup" not in name
                            else ""]
                           for name in BREAKDOWN])]
    md += ["\n## Data-parallel step: gradient all-reduce inside the step\n",
           f"MNIST MLP 784-512-512-10, 64 rows per rank, SGD, {dp['buckets']} buckets of "
           "about 1 MB (one `all_reduce(mean)` each, inside the compiled step on the numpy "
           "target), median ms per step of the slowest rank over "
           f"{dp['runs']} interleaved steps; kernels each bucket is in flight across when "
           f"issued early: {dp['in_flight_kernels']}; both variants end with the same "
           f"parameters: {dp['same_params']}.\n",
           markdown_table(["variant", "step ms"],
                          [[k, f"{v:.2f}"] for k, v in dp["median_ms"].items()]),
           f"\nissued early / after the backward pass: {_fmt(dp['ratio'])}\n"]
    if bubble_rows:
        md += [f"\n## Pipeline bubble (MLP 4 x 1024, batch 256, {comm.size} stages)\n",
               markdown_table(["schedule", "micro-batches", "bubble measured",
                               "(p-1)/(m+p-1)", "step ms"],
                              [[r["kind"], r["micro"], f"{r['bubble_measured']:.3f}",
                                f"{r['bubble_ideal']:.3f}", f"{r['step_s'] * 1e3:.1f}"]
                               for r in bubble_rows])]
    md.append(READING)
    text = "\n".join(md)
    say(text)
    if not args.no_write:
        stem = f"distributed-{cpu_slug(info['cpu'])}" + \
            (f"-{comm.size}ranks" if comm.size != 2 else "") + ("-quick" if args.quick else "") \
            + (f"-libnbc{args.iallreduce_algorithm}" if args.iallreduce_algorithm is not None
               else "")
        js, mdp = write_results(stem,
                                {"machine": info, "all_reduce": reduce_rows,
                                 "per_call_cpu_us": cost, "dp_step": dp,
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
