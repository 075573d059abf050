"""A bench_cnn network in several builds side by side: one worker process per variant, turns
rotating among them in one driver, each call timed by its worker thread's CPU time.

A variant is a source tree (this one, or a worktree of another commit) with environment
settings, or ONNX Runtime. rlx's compiled kernels and its modules are per process, so builds
of two commits cannot share one; a worker each, driven in turns (ABAB...) from one driver,
still lets load that drifts reach every variant alike. All on one thread.

    python benchmarks/ab_cnn.py --net mobilenet_v2 --batch 8 \\
        --variants new,ort,old=/work/wt-old,inpl0=.:RLX_ARENA_INPLACE=0

``NAME[=TREE[:VAR=VALUE...]]``: TREE defaults to this tree (``.``); a NAME starting with
``ort`` is ONNX Runtime. ``RLX_CB_PFN=0`` and ``RLX_CB_WHOLEZ=0`` (C defines in
conv_blocked.SOURCE, not read from the environment) are handled here: the worker compiles
with the far filter prefetch off, or the AVX-512 tile's accumulators through memory and its
epilogue in C (conv_tilez_asm.py). Every worker compiles
first, outside the timing; then each round runs ``--settle`` s of untimed calls and
``--block`` timed calls per variant. ``--fifo LOCK`` times the rounds under SCHED_FIFO
priority 1 while holding LOCK (flock), after the compiles. Prints each round's fastest call
per variant, the p50 of all calls, ratios to the first variant and ONNX Runtime's time over
each variant's. Outputs are checked against ONNX Runtime's first (relative max difference).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the driver's own benchmarks.common (a worker puts its tree first)
DEFINES = ("RLX_CB_PFN", "RLX_CB_WHOLEZ")  # defines in conv_blocked.SOURCE: =0 rewrites them


def parse_variant(spec: str) -> tuple[str, str, dict[str, str]]:
    """``NAME[=TREE[:VAR=VALUE...]]`` -> (name, tree, env)."""
    name, _, rest = spec.partition("=")
    tree, *pairs = rest.split(":") if rest else ["."]
    tree = str(ROOT) if tree in ("", ".") else str(Path(tree).resolve())
    env = dict(p.split("=", 1) for p in pairs)
    return name, tree, env


def worker(net_name: str, batch: int, size: int, kind: str, out: str) -> None:
    """Build the network, compile it (or open an ORT session), save the output, then obey
    ``settle S`` / ``time N`` / ``quit`` lines on stdin."""
    sys.path.insert(0, os.environ["AB_TREE"])
    from benchmarks.common import limit_threads, torch_threads

    limit_threads(1)
    import numpy as np
    import torch

    from benchmarks.cnn_nets import build, export

    torch_threads(torch, 1)
    x = np.random.default_rng(0).standard_normal((batch, 3, size, size)).astype(np.float32)
    data = export(build(net_name), torch.from_numpy(x), 17)
    if kind == "ort":
        from benchmarks.bench_cnn import ort_session

        sess = ort_session(data, 1, True)  # bench_cnn's session, on one thread

        def call() -> Any:
            return sess.run(None, {"x": x})[0]
    else:
        import rlx_core as rlx

        for name in DEFINES:
            if os.environ.get(name) == "0":
                from rlx_core.targets.cpu import conv_blocked

                on = f"#define {name} 1"
                assert on in conv_blocked.SOURCE, f"this tree has no {name}"
                conv_blocked.SOURCE = conv_blocked.SOURCE.replace(on, f"#define {name} 0")
        exe = rlx.compile(rlx.from_onnx(data), x, target="cpu", record=False)

        def call() -> Any:
            return exe(x)
    np.save(out, np.asarray(call()))
    print("ready", flush=True)
    for line in sys.stdin:
        cmd, arg = (line.split() + ["0"])[:2]
        if cmd == "settle":
            end = time.perf_counter() + float(arg)
            while time.perf_counter() < end:
                call()
            print("ok", flush=True)
        elif cmd == "time":
            times = []
            for _ in range(int(arg)):
                t0 = time.thread_time()
                call()
                times.append(time.thread_time() - t0)
            print(json.dumps(times), flush=True)
        else:
            break


def _ask(p: subprocess.Popen, msg: str) -> str:
    assert p.stdin is not None and p.stdout is not None
    p.stdin.write(msg + "\n")
    p.stdin.flush()
    return p.stdout.readline()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--net", default="mobilenet_v2")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--size", type=int, default=112)
    ap.add_argument("--variants", default="new,ort")
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--block", type=int, default=3)
    ap.add_argument("--settle", type=float, default=0.3)
    ap.add_argument("--budget", type=float, default=120.0, help="seconds of rounds at most")
    ap.add_argument("--fifo", default="", help="lock file: time the rounds under SCHED_FIFO")
    ap.add_argument("--worker", nargs=2, metavar=("KIND", "OUT"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        worker(args.net, args.batch, args.size, *args.worker)
        return 0
    times, _ = run(args)
    return 0 if all(times.values()) else 1


def run(args: argparse.Namespace) -> tuple[dict[str, list[float]], list[dict[str, float]]]:
    """Start the workers, time the rounds and print them; every timed call's seconds per
    variant, and each round's fastest call per variant."""
    import numpy as np

    variants = [parse_variant(s) for s in args.variants.split(",")]
    tmp = Path(tempfile.mkdtemp(prefix="ab_cnn-"))
    procs: dict[str, subprocess.Popen] = {}
    t0 = time.time()
    for name, tree, env in variants:
        kind = "ort" if name.startswith("ort") else "rlx"
        penv = {**os.environ, "AB_TREE": tree, "PYTHONPATH": tree, **env}
        procs[name] = subprocess.Popen(
            [sys.executable, __file__, "--net", args.net, "--batch", str(args.batch),
             "--size", str(args.size), "--worker", kind, str(tmp / f"{name}.npy")],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=penv)
        assert procs[name].stdout is not None
        if procs[name].stdout.readline().strip() != "ready":
            raise SystemExit(f"{name}: the worker failed")
    names = list(procs)
    print(f"# {args.net} b{args.batch} {args.size}x{args.size}: workers ready in "
          f"{time.time() - t0:.0f} s, load {os.getloadavg()[0]:.1f}", flush=True)
    ort_name = next((n for n in names if n.startswith("ort")), None)
    if ort_name:
        want = np.load(tmp / f"{ort_name}.npy")
        for n in names:
            got = np.load(tmp / f"{n}.npy")
            print(f"#   {n}: max rel diff vs {ort_name} "
                  f"{np.abs(got - want).max() / np.abs(want).max():.1e}")
    from benchmarks.common import fifo_held

    pids = [os.getpid(), *(p.pid for p in procs.values())]
    times: dict[str, list[float]] = {n: [] for n in names}
    rounds: list[dict[str, float]] = []
    try:
        with fifo_held(args.fifo, pids):
            start = time.time()
            for r in range(args.rounds):
                best = {}
                for n in names[r % len(names):] + names[:r % len(names)]:
                    _ask(procs[n], f"settle {args.settle}")
                    ts = json.loads(_ask(procs[n], f"time {args.block}"))
                    times[n] += ts
                    best[n] = min(ts)
                rounds.append(best)
                print(f"r{r}: " + "  ".join(f"{n} {best[n] * 1e3:.2f}" for n in names),
                      flush=True)
                if time.time() - start > args.budget:
                    break
    finally:
        for p in procs.values():
            assert p.stdin is not None
            p.stdin.write("quit\n")
            p.stdin.flush()
    base = names[0]
    p50 = {n: statistics.median(ts) for n, ts in times.items()}
    print(f"# load {os.getloadavg()[0]:.1f}; {len(rounds)} rounds of {args.block} calls"
          + (" under SCHED_FIFO" if args.fifo else ""))
    for n in names:
        vs_ort = f"  ORT/{n} {p50[ort_name] / p50[n]:.3f}x" if ort_name and n != ort_name else ""
        print(f"{n:>12}: p50 {p50[n] * 1e3:8.2f} ms  min {min(times[n]) * 1e3:8.2f}  "
              f"{n}/{base} {p50[n] / p50[base]:.3f}{vs_ort}")
    for n in names[1:]:
        print(f"per-round fastest {n}/{base}: "
              + " ".join(f"{rd[n] / rd[base]:.3f}" for rd in rounds))
    return times, rounds


if __name__ == "__main__":
    sys.exit(main())
