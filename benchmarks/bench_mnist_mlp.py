"""MLP training throughput on real MNIST (images/s): rlx on cpu against PyTorch and numpy.

One training step = forward, softmax cross-entropy, backward and a plain SGD update, f32, for
784-128-10 and 784-512-512-10 at batch 128 and 1024. Peers, all in this one process, from the
same initial parameters and on the same batches:

- ``rlx``: ``rlx.optim.compile_step(mlp_loss, SGD(lr), ..., in_place=True)`` on target
  ``cpu`` (forward, backward and update compiled as one graph, one native call per step; the
  step owns its parameters and writes the weight updates over them, as torch.optim.SGD does);
- ``torch``: PyTorch eager (``nn.Linear``/``ReLU``, ``F.cross_entropy``, ``torch.optim.SGD``);
- ``torch.compile``: the same model and loss through ``torch.compile``, optimizer step too;
- ``numpy``: a hand-written numpy forward/backward/update.

Before timing, rlx's parameters after a few steps are checked against the numpy peer's.

    python benchmarks/bench_mnist_mlp.py            # full run, writes results/mnist_mlp.*
    python benchmarks/bench_mnist_mlp.py --quick    # fewer runs, no files written
    python benchmarks/bench_mnist_mlp.py --only 784-128-10/128 --no-write   # one size, printed

Targets (issue 4): >= 1.6x numpy and >= 3x PyTorch eager at 784-128-10 batch 128, ahead of
both at every other size.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import (  # noqa: E402
    Stats,
    add_turn_args,
    end_of_run,
    interleaved,
    limit_threads,
    machine,
    machine_stem,
    markdown_table,
    placement_line,
    placement_text,
    policy,
    say,
    torch_threads,
    turns_text,
    write_results,
)

LR = 0.01
CONFIGS = (((784, 128, 10), 128), ((784, 128, 10), 1024), ((784, 512, 512, 10), 128),
           ((784, 512, 512, 10), 1024))


class Batches:
    """A fixed ring of training batches, shared by every peer (same data, same order).

    ``count`` batches of distinct images when there are enough; with fewer (the 5,000-image
    fallback sample has 4,000 training images, a ring of 8 x 1024 needs 8,192) the images
    are drawn with replacement, and ``note`` says so (printed and written with the results).
    """

    def __init__(self, x: Any, y: Any, batch: int, count: int = 8):
        import numpy as np

        rng = np.random.default_rng(0)
        need = batch * count
        if len(x) >= need:
            idx = rng.permutation(len(x))[:need].reshape(count, batch)
            self.note = ""
        else:
            idx = rng.choice(len(x), size=need, replace=True).reshape(count, batch)
            self.note = (f"{count} batches of {batch} need {need:,} images but only {len(x):,} "
                         f"are present: batches sampled with replacement")
        self.x = [np.ascontiguousarray(x[i]) for i in idx]
        self.y = [np.ascontiguousarray(y[i].astype(np.int32)) for i in idx]
        self.count = count

    def ring(self, key: str) -> Any:
        """A stepping function's batch source: each call returns the next (x, y)."""
        state = {"i": 0}

        def nxt() -> tuple[Any, Any]:
            i = state["i"] = (state["i"] + 1) % self.count
            return self.x[i], self.y[i]

        return nxt


# ---- peers --------------------------------------------------------------------------------


def rlx_peer(params: dict, b: Batches) -> tuple[Any, Any]:
    from rlx_core.models.mlp import mlp_loss
    from rlx_core.optim import SGD, compile_step

    # parameters updated in place, as torch.optim.SGD's (runtime/donation.py)
    step = compile_step(mlp_loss, SGD(LR), params, b.x[0], b.y[0], target="cpu", in_place=True)
    nxt = b.ring("rlx")

    def run() -> None:
        step(*nxt())

    return run, step


class NumpyMLP:
    """Hand-written numpy training step: the same maths as the model, written the usual way."""

    def __init__(self, params: dict):
        import numpy as np

        names = sorted(params, key=lambda k: int(k.removeprefix("fc")))
        self.w = [np.array(params[n]["weight"]) for n in names]  # (out, in)
        self.b = [np.array(params[n]["bias"]) for n in names]

    def step(self, x: Any, y: Any) -> float:
        import numpy as np

        acts, h = [x], x
        for i, (w, b) in enumerate(zip(self.w, self.b, strict=True)):
            h = h @ w.T + b
            if i < len(self.w) - 1:
                h = np.maximum(h, 0.0)
            acts.append(h)
        z = h - h.max(axis=1, keepdims=True)
        e = np.exp(z)
        s = e.sum(axis=1, keepdims=True)
        n = x.shape[0]
        loss = float(np.mean(np.log(s[:, 0]) - z[np.arange(n), y]))
        g = e / s
        g[np.arange(n), y] -= 1.0
        g *= np.float32(1.0 / n)
        for i in range(len(self.w) - 1, -1, -1):
            gw = g.T @ acts[i]
            gb = g.sum(axis=0)
            if i > 0:
                g = (g @ self.w[i]) * (acts[i] > 0)
            self.w[i] -= np.float32(LR) * gw
            self.b[i] -= np.float32(LR) * gb
        return loss


def numpy_peer(params: dict, b: Batches) -> tuple[Any, Any]:
    m = NumpyMLP(params)
    nxt = b.ring("numpy")

    def run() -> None:
        m.step(*nxt())

    return run, m


def torch_model(torch: Any, params: dict) -> Any:
    names = sorted(params, key=lambda k: int(k.removeprefix("fc")))
    layers: list[Any] = []
    for i, n in enumerate(names):
        w = torch.from_numpy(params[n]["weight"].copy())
        lin = torch.nn.Linear(w.shape[1], w.shape[0])
        with torch.no_grad():
            lin.weight.copy_(w)
            lin.bias.copy_(torch.from_numpy(params[n]["bias"].copy()))
        layers.append(lin)
        if i < len(names) - 1:
            layers.append(torch.nn.ReLU())
    return torch.nn.Sequential(*layers)


def torch_peer(torch: Any, params: dict, b: Batches, compiled: bool) -> Any:
    import torch.nn.functional as F

    model = torch_model(torch, params)
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    tx = [torch.from_numpy(x) for x in b.x]
    ty = [torch.from_numpy(y.astype("int64")) for y in b.y]
    state = {"i": 0}

    def loss_fn(x: Any, y: Any) -> Any:
        return F.cross_entropy(model(x), y)

    fwd = torch.compile(loss_fn) if compiled else loss_fn

    def opt_step() -> None:
        opt.step()

    step_fn = torch.compile(opt_step) if compiled else opt_step

    def run() -> None:
        i = state["i"] = (state["i"] + 1) % b.count
        opt.zero_grad(set_to_none=True)
        loss = fwd(tx[i], ty[i])
        loss.backward()
        step_fn()

    return run


# ---- the benchmark ------------------------------------------------------------------------


def step_flops(sizes: tuple[int, ...], batch: int) -> int:
    """GEMM FLOPs of one training step: every layer's forward and weight gradient, and the
    input gradient of every layer but the first (no gradient flows into the images); the
    bias, activation and loss work is a fraction of a percent beside them."""
    layers = list(zip(sizes[:-1], sizes[1:], strict=False))
    return sum(2 * batch * i * o * (2 if n == 0 else 3) for n, (i, o) in enumerate(layers))


def check_against_numpy(params: dict, b: Batches) -> float:
    """Max relative parameter difference between rlx and the numpy step after 3 steps."""
    import numpy as np

    from rlx_core.autodiff.pytree import flatten

    _, step = rlx_peer(params, b)
    ref = NumpyMLP(params)
    for i in range(3):
        step(b.x[i], b.y[i])
        ref.step(b.x[i], b.y[i])
    names = sorted(params, key=lambda k: int(k.removeprefix("fc")))
    worst = 0.0
    for j, n in enumerate(names):
        for got, want in ((step.params[n]["weight"], ref.w[j]), (step.params[n]["bias"],
                                                                  ref.b[j])):
            err = np.max(np.abs(np.asarray(got) - want)) / max(np.max(np.abs(want)), 1e-30)
            worst = max(worst, float(err))
    del flatten
    return worst


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=100, help="timed steps per peer (>= 20)")
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--threads", type=int, default=None,
                    help="threads for every peer (default: the cores available)")
    add_turn_args(ap, block=10)
    ap.add_argument("--quick", action="store_true", help="few runs, do not write results")
    ap.add_argument("--tag", default="",
                    help="suffix of the results files' names, e.g. sched-fifo for a run under "
                         "chrt -f 1 (kept beside the default run's files)")
    ap.add_argument("--no-write", action="store_true",
                    help="print only, write no results files (an --only run would otherwise "
                         "replace the file's other sizes)")
    ap.add_argument("--no-torch", action="store_true", help="skip the PyTorch peers")
    ap.add_argument("--only", default="", help="comma-separated config labels, e.g. 784-128-10/128")
    args = ap.parse_args(argv)
    import os

    threads = args.threads or len(os.sched_getaffinity(0))
    limits = limit_threads(threads)  # before torch/numpy start pools
    say(placement_line())
    import numpy as np

    from rlx_core.data.mnist import load_mnist
    from rlx_core.models.mlp import init_mlp

    torch = None
    if not args.no_torch:
        import torch as _torch

        torch = _torch
        torch_threads(torch, threads)
    from benchmarks.peak import bench_peaks, caption, floor_fields, floor_text, fraction_text

    peaks = bench_peaks(threads)  # measured now, against the store's quiet runs (peak.py)
    peak = peaks.kept.gflops  # GFLOP/s: what bounds every peer
    data = load_mnist()
    x, y = data.flat("train")
    runs = 5 if args.quick else max(20, args.runs)
    warmup = 2 if args.quick else args.warmup
    results: list[dict[str, Any]] = []
    say(f"MNIST MLP training, {len(x)} training images from {data.source}, "
        f"SGD lr={LR}, f32, {threads} thread(s); rlx{' and torch update' if torch else ' updates'} "
        f"parameters in place; peaks: {peaks.summary()}")
    for sizes, batch in CONFIGS:
        label = f"{'-'.join(map(str, sizes))}/{batch}"
        if args.only and label not in args.only.split(","):
            continue
        params = init_mlp(sizes, seed=0)
        b = Batches(x, y, batch)
        if b.note:
            say(f"{label}: {b.note}")
        agree = check_against_numpy(params, b)
        peers: dict[str, Any] = {"rlx": rlx_peer(params, b)[0],
                                 "numpy": numpy_peer(params, b)[0]}
        if torch is not None:
            peers["torch"] = torch_peer(torch, params, b, compiled=False)
            peers["torch.compile"] = torch_peer(torch, params, b, compiled=True)
        stats: dict[str, Stats] = interleaved(peers, runs, warmup, block=args.block, settle_s=args.settle)
        ips = {n: batch / s.p50 for n, s in stats.items()}
        flops = step_flops(sizes, batch)
        row = {"sizes": list(sizes), "batch": batch, "label": label,
               "rlx_vs_numpy_max_rel_param_diff": agree,
               "stats_s": {n: s for n, s in stats.items()},
               "images_per_s": {n: round(v, 1) for n, v in ips.items()},
               "rlx_ratio": {n: round(ips["rlx"] / v, 3) for n, v in ips.items() if n != "rlx"},
               "step_gflop": flops * 1e-9, "batches_note": b.note,
               **floor_fields(flops * 1e-9, peak, stats["rlx"].p50,
                              run_peak=peaks.now.gflops)}
        results.append(row)
        say(f"{label:22s} " + "  ".join(f"{n} {v:,.0f} img/s" for n, v in ips.items()) +
            "   rlx/" + " rlx/".join(f"{n} {r:.2f}x" for n, r in row["rlx_ratio"].items()) +
            f"   (params vs numpy: {agree:.1e}; rlx at {fraction_text(row)} of the stored "
            f"(this run's) FMA peak)")
    data_out = {"benchmark": "mnist_mlp", "machine": end_of_run(machine()), "threads": limits,
                "runs": runs, "warmup": warmup, "lr": LR, "numpy": np.__version__,
                "torch": getattr(torch, "__version__", None), "fma_peak_gflops": round(peak, 1),
                "rlx_step": "compile_step(..., in_place=True): parameters updated in place, as "
                            "torch.optim.SGD's",
                "peaks": peaks.to_json(), "results": results}
    peers_order = ["rlx", "numpy", "torch", "torch.compile"]
    headers = ["MLP / batch"] + [f"{p} img/s" for p in peers_order] + \
        ["rlx / numpy", "rlx / torch", "rlx / torch.compile", "floor ms", "rlx of peak (this run's)"]
    rows = []
    for r in results:
        ips, ratio = r["images_per_s"], r["rlx_ratio"]
        rows.append([r["label"]] + [f"{ips[p]:,.0f}" if p in ips else "-" for p in peers_order] +
                    [f"{ratio[p]:.2f}x" if p in ratio else "-" for p in peers_order[1:]] +
                    [floor_text(r, digits=3), fraction_text(r)])
    counted = "the step's GEMM FLOPs"
    command = " ".join(["python benchmarks/bench_mnist_mlp.py",
                        *(argv if argv is not None else sys.argv[1:])])
    md = (f"# MNIST MLP training throughput\n\n{machine()['cpu']}, {threads} thread(s) per "
          f"peer, load average {data_out['machine']['load_average_1m']} at the end, "
          f"{placement_text(data_out['machine'])}"
          f"{policy()}, p50 of {runs} steps ({turns_text(args.block, args.settle)}) after "
          f"{warmup} warm-up steps (`{command}`). rlx's step updates its parameters in place "
          f"(`compile_step(..., in_place=True)`), as torch.optim.SGD does. "
          f"{caption(peak, threads, counted, peaks)}\n\n"
          + markdown_table(headers, rows))
    if not (args.quick or args.no_write):
        # an explicit --threads run is kept beside the default one (the cores available)
        stem = machine_stem("mnist_mlp", args.threads, args.settle) + \
            (f"-{args.tag}" if args.tag else "")
        js, mdp = write_results(stem, data_out, md)
        say(f"wrote {js} and {mdp}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
