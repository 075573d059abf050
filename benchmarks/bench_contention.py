"""Behaviour on a busy machine: rlx's thread team against rlx on one thread and its peers, under
the same competing load, side by side in one process.

Workloads: all-MiniLM-L6-v2 at batch 1 x 128 tokens and batch 2 x 8 tokens (a short
sentence), and the MNIST MLP training step (784-128-10, batch 128). Peers, all in this
process on the same inputs:

- ``rlx team``: the CPU target with its default team (the cores available);
- ``rlx 1 thread``: the same compiled programs with ``set_num_threads(1)``;
- ``torch``: PyTorch eager on the same cores (``torch.set_num_threads``);
- ``onnxruntime``: MiniLM exported with the TorchScript exporter, ORT's default (spinning)
  intra-op pool (the MLP step has no ORT peer: ORT does not train).

Loads, each started as separate processes (ended by this script when the condition is done):
``quiet`` (none started; the load average says what else ran), ``busy1`` / ``busy2`` (one or
two ``while True: pass`` processes), ``bursty2`` (two processes alternating 4 ms of spinning
with 4 ms of sleep), and ``after-torch``: no other process, but every timed call comes right
after a PyTorch matmul on its own thread pool in this process (a notebook mixing libraries),
so torch's workers are still spinning when the peer starts; ``after-ort``: the same after an
ONNX Runtime run (its default, spinning intra-op pool: its worker spins ~50 ms of CPU after
each run, so it holds a core through the whole timed call).

Goal (issue 22): the team is never slower than 1.1x rlx's own one-thread time under the same
load, and ahead of every peer under load. "The same load" is read from turns the two rlx peers
share (``paired``): with busy or bursty loads the scheduler re-places them at each pause, and a
peer's turns of its own compare placements as much as programs. Results: ``results/contention-<cpu slug>.json`` and
``.md`` (``contention.md`` is an earlier run on the Zen 1 VM, before the slug).

    python benchmarks/bench_contention.py              # full run (about 5-10 minutes)
    python benchmarks/bench_contention.py --quick      # MLP only, few calls, nothing written
    python benchmarks/bench_contention.py --aa --conditions busy2,bursty2 --runs 20 --tag aa
        # the one-thread peer timed twice: 'team / 1 thread' beside the run's own noise floor
    chrt -f 1 python benchmarks/bench_contention.py --conditions quiet --tag sched-fifo
        # quiet for this process alone on a shared machine (real-time: never with busy loads,
        # which would inherit it and hold the cores)
    flock /tmp/fifo.lock setsid sh -c 'echo -20 > /proc/self/autogroup;
        exec python benchmarks/bench_contention.py --tag autogroup-nice-20'
        # every condition on a shared machine: with autogroups (Linux's default for desktop
        # sessions) the new session's group, the busy loads it starts included, weighs 87
        # times another session's, so the loads compete with the benchmark as on an idle
        # machine while other jobs get ~1% each (the results say the group's nice value)
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import (  # noqa: E402
    Stats,
    command_text,
    cpu_slug,
    end_of_run,
    interleaved,
    limit_threads,
    machine,
    markdown_table,
    placement_line,
    say,
    stamp,
    torch_threads,
    write_results,
)

BUSY = "while True:\n    pass\n"
BURSTY = ("import time\nwhile True:\n    t = time.perf_counter()\n"
          "    while time.perf_counter() - t < 0.004:\n        pass\n    time.sleep(0.004)\n")
CONDITIONS: dict[str, tuple[str, int]] = {  # name -> (load program, processes)
    "quiet": ("", 0), "busy1": (BUSY, 1), "busy2": (BUSY, 2), "bursty2": (BURSTY, 2),
    "after-torch": ("", 0), "after-ort": ("", 0),
}
TEAM, ONE = "rlx team", "rlx 1 thread"
PEERS = (TEAM, ONE, "torch", "onnxruntime")
AGAIN = "rlx 1 thread again"  # --aa: the one-thread peer timed a second time, as its own peer


def autogroup() -> str:
    """This process's scheduling autogroup and its nice value (``/proc/self/autogroup``:
    ``/autogroup-12 nice -20``), or "" where there is none."""
    try:
        return Path("/proc/self/autogroup").read_text().strip()
    except OSError:
        return ""


def start_load(program: str, count: int) -> list[subprocess.Popen]:
    procs = [subprocess.Popen([sys.executable, "-c", program]) for _ in range(count)]
    time.sleep(0.5 if procs else 0.0)  # let them reach their loops
    return procs


def stop_load(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        p.terminate()
    for p in procs:
        try:
            p.wait(timeout=5)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def timed(peers: dict[str, Callable[[], Any]], runs: int, block: int, settle_s: float,
          gap_s: float, pre: Callable[[], Any] | None) -> dict[str, Stats]:
    """common.interleaved's fair turns (a pause, then settle calls, before each turn; odd
    turns in reverse order), with an optional untimed ``pre`` call before every timed call
    (the after-torch / after-ort conditions). A peer with a ``setup`` attribute (the rlx
    thread count) runs it at the start of each of its turns."""
    def setup(name: str) -> None:
        getattr(peers[name], "setup", lambda: None)()

    return interleaved(peers, runs, 0, block=block, settle_s=settle_s, gap_s=gap_s,
                       vary_order=True, setup=setup, pre=pre)


def paired(team: Callable[[], Any], one: Callable[[], Any], runs: int, block: int,
           settle_s: float, gap_s: float, pre: Callable[[], Any] | None
           ) -> tuple[Stats, Stats, list[float]]:
    """The team and the one-thread peer timed in the same turns: each turn (after a ``gap_s``
    pause and ``settle_s`` of untimed calls of the first) times ``block`` calls of one, then,
    after one untimed call, ``block`` of the other, with no pause between them; odd turns
    start with the other. Both halves of a turn see the same placement of the competing
    processes, which the scheduler picks again after each pause and keeps for the turn (Zen 4,
    busy2: one thread's MiniLM b1 call took 26-30 ms when both busy processes shared the other
    core and 46-55 ms when they were split), so their ratio compares the team with one thread
    under the same load. Turns of their own (``timed``) compare placements as much as
    programs: the one-thread peer against itself read 0.64-1.79x there. Returns both peers'
    Stats and each turn's ratio of p50s (team / one thread)."""
    names = (TEAM, ONE)
    fns = {TEAM: team, ONE: one}
    times: dict[str, list[float]] = {TEAM: [], ONE: []}
    ratios: list[float] = []
    clock = time.perf_counter
    for r in range(-(-runs // max(1, block))):
        order = names if r % 2 == 0 else names[::-1]
        if gap_s > 0:
            time.sleep(gap_s)
        turn: dict[str, list[float]] = {}
        for i, name in enumerate(order):
            fn = fns[name]
            getattr(fn, "setup", lambda: None)()
            t_in = clock()
            fn()  # untimed: the second half's first call wakes the team's sleeping worker
            while i == 0 and clock() - t_in < settle_s:
                fn()
            turn[name] = []
            for _ in range(max(1, block)):
                if pre is not None:
                    pre()
                t0 = clock()
                fn()
                turn[name].append(clock() - t0)
            times[name] += turn[name]
        ratios.append(statistics.median(turn[TEAM]) / statistics.median(turn[ONE]))
    return Stats.of(times[TEAM]), Stats.of(times[ONE]), ratios


def with_threads(set_threads: Callable[[int], None], n: int,
                 fn: Callable[[], Any]) -> Callable[[], Any]:
    """``fn`` whose turns run with ``n`` rlx threads (set once per turn, by ``timed``)."""
    def run() -> Any:
        return fn()

    run.setup = lambda: set_threads(n)  # type: ignore[attr-defined]
    return run


def with_again(peers: dict[str, Callable[[], Any]]) -> dict[str, Callable[[], Any]]:
    """``peers`` and the one-thread peer once more under the name AGAIN (the same program and
    thread count in turns of its own): the ratio of the two, same code and same load, is how
    far apart two turns' p50s fall by chance, the floor under which team / 1 thread says
    nothing (with --runs 20 under two bursty processes it was 1.35x on MiniLM b1 s128 and
    1.79x on b2 s8, Zen 4: one thread's turns are fast or slow as the scheduler places the
    loads at each turn's start)."""
    one = peers["rlx 1 thread"]

    def again() -> Any:
        return one()

    again.setup = getattr(one, "setup", lambda: None)  # type: ignore[attr-defined]
    return {**peers, AGAIN: again}


def minilm_workloads(torch: Any, threads: int, batches: tuple[tuple[int, int], ...],
                     tmp: str) -> dict[str, dict[str, Callable[[], Any]]]:
    import numpy as np
    import onnxruntime as ort
    from sentence_transformers import SentenceTransformer

    from benchmarks.bench_minilm import TEXTS, torch_module
    from rlx_core.models.minilm import MiniLM
    from rlx_core.targets.cpu.threads import set_num_threads

    model = MiniLM.load()
    st = SentenceTransformer(str(model.folder), device="cpu")
    module = torch_module(torch, st)
    names = ["ids", "mask", "types"]
    ex = tuple(torch.ones((2, 8), dtype=torch.int64) for _ in names)
    path = os.path.join(tmp, "minilm.onnx")
    torch.onnx.export(module, ex, path, input_names=names, output_names=["emb"], dynamo=False,
                      opset_version=17, dynamic_axes={n: {0: "batch", 1: "seq"} for n in names})
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
    out: dict[str, dict[str, Callable[[], Any]]] = {}
    for batch, seq in batches:
        texts = [" ".join([TEXTS[i % len(TEXTS)]] * (1 + i % 5)) for i in range(batch)]
        arrays = []
        for a in model.tokenize(texts):
            fit = np.zeros((batch, seq), np.int32)
            n = min(seq, a.shape[1])
            fit[:, :n] = a[:, :n]
            arrays.append(fit)
        exe = model.compiled(batch, seq, "cpu")
        t_in = tuple(torch.from_numpy(a.astype(np.int64)) for a in arrays)
        feed = {n: t.numpy() for n, t in zip(names, t_in, strict=True)}

        def run_torch(t_in: tuple[Any, ...] = t_in) -> Any:
            with torch.inference_mode():
                return module(*t_in).numpy()

        want = run_torch()
        rlx_call = (lambda exe=exe, a=tuple(arrays): exe(*a))
        peers = {"rlx team": with_threads(set_num_threads, threads, rlx_call),
                 "rlx 1 thread": with_threads(set_num_threads, 1, rlx_call),
                 "torch": run_torch,
                 "onnxruntime": lambda s=sess, f=feed: s.run(None, f)[0]}
        for name, fn in peers.items():
            getattr(fn, "setup", lambda: None)()
            err = float(np.max(np.abs(np.asarray(fn()) - want)))
            if not err <= 1e-4:
                raise AssertionError(f"MiniLM b{batch} s{seq}: {name} is {err:.1e} from torch")
        out[f"MiniLM b{batch} s{seq}"] = peers
    return out


def mlp_workload(torch: Any, threads: int) -> dict[str, Callable[[], Any]]:
    import numpy as np

    from benchmarks.bench_mnist_mlp import Batches, rlx_peer, torch_peer
    from rlx_core.models.mlp import init_mlp
    from rlx_core.targets.cpu.threads import set_num_threads

    rng = np.random.default_rng(0)
    x = rng.random((2048, 784), np.float32)  # the step's speed does not depend on the pixels
    y = rng.integers(0, 10, 2048)
    params = init_mlp((784, 128, 10), seed=0)
    b = Batches(x, y, 128)
    step = rlx_peer(params, b)[0]
    return {"rlx team": with_threads(set_num_threads, threads, step),
            "rlx 1 thread": with_threads(set_num_threads, 1, step),
            "torch": torch_peer(torch, params, b, compiled=False)}


def ort_pool(torch: Any, threads: int, tmp: str) -> Callable[[], Any]:
    """A call that runs ONNX Runtime's default intra-op pool (spinning, ``threads`` threads)
    on a 64 x 384 x 384 matmul, then returns while that pool's worker spins on."""
    import onnxruntime as ort

    path = os.path.join(tmp, "matmul.onnx")
    x = torch.randn(64, 384)
    torch.onnx.export(torch.nn.Linear(384, 384), (x,), path, input_names=["x"],
                      output_names=["y"], dynamo=False, opset_version=17)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
    feed = {"x": x.numpy()}
    return lambda: sess.run(None, feed)


def team_stats(workloads: dict[str, dict[str, Callable[[], Any]]]) -> dict[str, Any]:
    """Sum of the team counters of every loaded CPU program (team_runtime.team_functions): calls,
    late arrivals, shrunk calls, spells, the claimed chunks thread 0 and the worker ran, and
    the judge's reasons (late waits, calls with no worker, starved calls, bad calls, sleeps
    inside calls, ns thread 0 and the other threads waited at phases' ends). Totals since each
    program loaded: take differences around the calls of interest, and mind that one long wait
    (a descheduled worker) can make most of a sum (docs/architecture.md)."""
    import ctypes

    from rlx_core.targets.cpu import threads

    names = ("team_calls", "late_arrivals", "calls_shrunk", "shrink_spells", "chunks_thread0",
             "chunks_worker", "late_waits", "calls_no_worker", "calls_starved", "bad_calls",
             "sleeps_in_calls", "thread0_wait_ns", "workers_wait_ns")
    total = [0] * len(names)
    for lib, sym in threads._LOADED:
        prefix = sym.removesuffix("_threads")
        fn = getattr(lib, prefix + "_team_stats", None)
        if fn is None:
            continue
        out = (ctypes.c_longlong * len(names))()
        fn(out)
        for at, size, name in ((4, 2, "_team_chunks"), (6, 7, "_team_why")):
            got = getattr(lib, prefix + name, None)
            if got is not None:
                part = (ctypes.c_longlong * size)()
                got(part)
                out[at:at + size] = list(part)
        total = [a + b for a, b in zip(total, out, strict=True)]
    return dict(zip(names, total, strict=True))


def _share(counters: dict[str, int]) -> str:
    """The worker's share of the claimed chunks the team ran."""
    total = counters["chunks_thread0"] + counters["chunks_worker"]
    return f"{counters['chunks_worker'] / total:.0%}" if total else "-"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=12, help="timed calls per peer and condition")
    ap.add_argument("--block", type=int, default=3)
    ap.add_argument("--settle", type=float, default=0.05,
                    help="seconds of untimed calls before each turn")
    ap.add_argument("--gap", type=float, default=0.1,
                    help="seconds of pause before each turn (common.interleaved's gap_s): "
                         "ONNX Runtime's and torch's pools stop spinning before the next peer")
    ap.add_argument("--conditions", default=",".join(CONDITIONS))
    ap.add_argument("--quick", action="store_true", help="MLP only, few calls, write nothing")
    ap.add_argument("--aa", action="store_true",
                    help="time the one-thread peer twice (AGAIN): the run's own noise floor")
    ap.add_argument("--tag", default="",
                    help="results file suffix, kept beside the default run's (e.g. sched-fifo "
                         "for a run under chrt -f 1: a quiet machine for this process alone)")
    args = ap.parse_args(argv)
    threads = len(os.sched_getaffinity(0))
    limits = limit_threads(threads)
    import torch

    torch_threads(torch, threads)
    from rlx_core.targets.cpu.isa import detect

    tmp = tempfile.mkdtemp(prefix="rlx-contention-")
    workloads: dict[str, dict[str, Callable[[], Any]]] = {}
    if not args.quick:
        workloads.update(minilm_workloads(torch, threads, ((1, 128), (2, 8)), tmp))
    workloads["MLP step 784-128-10/128"] = mlp_workload(torch, threads)
    runs = 3 if args.quick else args.runs
    if args.aa:
        workloads = {wl: with_again(peers) for wl, peers in workloads.items()}
    a = torch.randn(384, 384)

    def torch_pool() -> None:  # torch's intra-op pool runs, then this process moves on
        torch.mm(a, a)

    pres: dict[str, Callable[[], Any]] = {"after-torch": torch_pool}
    if "after-ort" in args.conditions.split(","):
        pres["after-ort"] = ort_pool(torch, threads, tmp)
    say(f"{machine()['cpu']} ({detect().describe()}), {threads} cores; rlx team = "
        f"{threads} threads; {placement_line()}")
    results: list[dict[str, Any]] = []
    for cond in args.conditions.split(","):
        program, count = CONDITIONS[cond]
        load_before = os.getloadavg()[0]
        procs = start_load(program, count)
        try:
            for wl, peers in workloads.items():
                before = team_stats(workloads)
                stats = timed(peers, runs, args.block, args.settle, args.gap, pres.get(cond))
                team_s, one_s, ratios = paired(peers[TEAM], peers[ONE], runs, args.block,
                                               args.settle, args.gap, pres.get(cond))
                after = team_stats(workloads)
                p50 = {n: s.p50 for n, s in stats.items()}
                others = {n: v for n, v in p50.items() if not n.startswith("rlx")}
                row = {"workload": wl, "condition": cond, "stats_s": stats,
                       "team_over_1thread": round(p50["rlx team"] / p50["rlx 1 thread"], 3),
                       "paired_s": {TEAM: team_s, ONE: one_s},
                       "team_over_1thread_paired": round(team_s.p50 / one_s.p50, 3),
                       "paired_turn_ratios": [round(x, 3) for x in ratios],
                       "best_rlx_over_best_peer": round(
                           min(p50["rlx team"], p50["rlx 1 thread"]) / min(others.values()), 3),
                       "team_over_best_peer": round(p50["rlx team"] / min(others.values()), 3),
                       "team_counters": {k: after[k] - before[k] for k in after},
                       **({"again_over_1thread": round(p50[AGAIN] / p50["rlx 1 thread"], 3)}
                          if AGAIN in p50 else {}),
                       "load_average_before": round(load_before, 2)}
                results.append(row)
                say(f"{cond:12s} {wl:24s} " + "  ".join(f"{n} {v * 1e3:.2f} ms"
                                                         for n, v in p50.items())
                    + f"  | team / 1 thread {row['team_over_1thread_paired']:.2f}x same turns"
                    + f" ({row['team_over_1thread']:.2f}x own turns)"
                    + f"  | team counters {row['team_counters']}")
        finally:
            stop_load(procs)
    data = {"benchmark": "contention", "machine": machine(), "isa": detect().describe(),
            "threads": limits, "runs": runs, "block": args.block, "settle_s": args.settle,
            "gap_s": args.gap,
            "torch": torch.__version__, "results": results}
    end_of_run(data["machine"])
    data["autogroup"] = autogroup()
    headers = ["condition", "workload", *(f"{p} ms" for p in PEERS),
               "team / 1 thread, same turns (ms / ms)", "team / 1 thread, own turns",
               "team / best peer", "late arrivals", "bad calls", "calls shrunk", "worker's chunks",
               "load avg before", *(["1 thread again / 1 thread"] if args.aa else [])]
    rows = []
    for r in results:
        s = r["stats_s"]
        rows.append([r["condition"], r["workload"],
                     *(f"{s[p].p50 * 1e3:.2f}" if p in s else "-" for p in PEERS),
                     f"{r['team_over_1thread_paired']:.2f}x"
                     + (" (goal <= 1.1x: met)" if r["team_over_1thread_paired"] <= 1.1 else
                        " (goal <= 1.1x: NOT met)")
                     + f" ({r['paired_s'][TEAM].p50 * 1e3:.2f} / "
                       f"{r['paired_s'][ONE].p50 * 1e3:.2f})",
                     f"{r['team_over_1thread']:.2f}x",
                     f"{r['team_over_best_peer']:.2f}x",
                     r["team_counters"]["late_arrivals"], r["team_counters"]["bad_calls"],
                     r["team_counters"]["calls_shrunk"],
                     _share(r["team_counters"]), r["load_average_before"],
                     *([f"{r['again_over_1thread']:.2f}x"] if args.aa else [])])
    md = (f"# Behaviour under competing load\n\n{stamp({**data['machine'], 'isa': data['isa']})}"
          f" (the machine is shared: 'quiet' means no load started by this script"
          + (f"; scheduling autogroup {data['autogroup']!r}, the loads it starts in it too"
             if data["autogroup"] else "")
          + "). p50 of "
          f"{runs} calls per peer in interleaved turns of {args.block} (each after a "
          f"{args.gap:g} s pause and {args.settle:g} s of untimed calls; odd rounds in reverse "
          f"order, so the rlx peers do not always follow the same peer); then the rlx team "
          f"and rlx 1 thread again, {runs} calls each, in shared turns: {args.block} calls of "
          f"one right after {args.block} of the other, no pause between, odd turns the other "
          f"way round (bench_contention.paired). The goal reads the shared turns, where both "
          f"see the same placement of the loads; 'own turns' is the same ratio from the "
          f"first part, where the scheduler places the loads anew before each peer's turn "
          f"(the one-thread peer against itself read 0.64-1.79x that way) "
          f"(`{command_text('benchmarks/bench_contention.py', argv)}`). "
          f"'late arrivals', 'bad calls' (team_runtime.py's judge: over a quarter of the call lost "
          f"to late waits, no worker, or thread 0 starved), 'calls shrunk' and the worker's "
          f"share of the claimed chunks are the team's own counters over the rlx team peer's calls (team_runtime.py).\n\n"
          + markdown_table(headers, rows))
    print(md)
    if not args.quick:
        tag = f"-{args.tag}" if args.tag else ""
        js, mdp = write_results(f"contention-{cpu_slug(data['machine']['cpu'])}{tag}", data, md)
        say(f"wrote {js} and {mdp}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
