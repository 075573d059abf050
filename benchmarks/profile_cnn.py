"""Where a bench_cnn network spends its time: rlx's kernels against ONNX Runtime's nodes, by
layer class, on the same clock.

Both sides run in one process on one thread, their calls alternating (which goes first swaps
each round), each on the same wall clock: rlx's program compiled with ``RLX_CPU_PROFILE=1``
(each kernel call timed, ``CLOCK_MONOTONIC``), ONNX Runtime's session with its own per-node
profile (wall time; it has no CPU-time clock). Each kernel's (node's) fastest call of
``--runs`` is kept. ``--fifo LOCK`` times the calls under SCHED_FIFO priority 1 while holding
LOCK (after the compile), so the machine's other jobs cannot preempt either side; without
it a loaded machine's preemptions land on whichever side was running.

ONNX Runtime's convolutions are matched to rlx's kernels by (input shape, weight shape,
output shape) in execution order, a pair kernel (``conv2d_pair``: the block's last 1x1 and
its projection shortcut) taking both of its nodes; each matched node takes its kernel's
class (``layer_class``: stem, 1x1 / 3x3 by output size, Winograd or direct, strided, pools,
FC, ...), so a class compares the same layers on both sides.

    python benchmarks/profile_cnn.py --net resnet50 --batch 8 --fifo /tmp/fifo.lock
    python benchmarks/profile_cnn.py --net inception --batch 1 --top 25

Prints the whole calls, the classes (rlx ms, ORT ms, ORT/rlx, each side's share of its
kernels' sum) and the layers rlx loses most on; ``--write`` also writes them to
results/profile-cnn-<net>-b<batch>-<cpu> (.md and .json, CPU model and ISA inside).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import statistics
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

CONV_OPS = ("conv2d", "conv2d_fused", "conv2d_pair")
ORT_CONVS = ("Conv", "FusedConv", "NchwcConv")
ORT_CLASSES = {"MaxPool": "max pool", "AveragePool": "avg pool",
               "GlobalAveragePool": "global avg pool", "Gemm": "FC", "FusedGemm": "FC",
               "MatMul": "FC", "FusedMatMul": "FC", "Concat": "concat",
               "Flatten": "reshape / reorder", "Reshape": "reshape / reorder",
               "ReorderInput": "reshape / reorder", "ReorderOutput": "reshape / reorder"}
# (input shape, weight shape, output shape) of one convolution
ConvKey = tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]


@dataclass
class Layer:
    """One rlx kernel or ONNX Runtime node: its fastest call, its class, and for an rlx
    kernel the ORT nodes matched to it."""

    name: str
    cls: str
    ms: float
    desc: str
    keys: tuple[ConvKey, ...] = ()
    peers: list[Layer] = field(default_factory=list)


def layer_class(x: tuple[int, ...], w: tuple[int, ...], out: tuple[int, ...], stride: int,
                impl: str = "", pair_stride: int = 0) -> str:
    """A convolution's class from its input, weight (OIHW) and output shapes: ``stem``
    (an image input of <= 4 channels), ``dw`` (depthwise), ``KxK[/s]`` by output size, a
    3x3 marked ``winograd`` or ``direct`` by rlx's implementation label, a pair kernel as
    ``1x1 + 1x1/s pair``."""
    kh, kw = w[2], w[3]
    groups = x[1] // max(w[1], 1)
    size = f"{kh}x{kw}" + (f"/{stride}" if stride > 1 else "")
    at = f" @{out[2]}" if out[2] == out[3] else f" @{out[2]}x{out[3]}"
    if x[1] <= 4 and groups == 1:
        return f"stem {size}"
    if pair_stride:
        return f"{size} + 1x1" + (f"/{pair_stride}" if pair_stride > 1 else "") + " pair" + at
    if groups > 1:
        return ("dw " if groups == x[1] == out[1] else f"grouped({groups}) ") + size + at
    how = ""
    if kh * kw > 1 and impl:
        how = " winograd" if "winograd" in impl else " direct"
    return size + how + at


def _shape(v: Any) -> tuple[int, ...]:
    return tuple(int(d) for d in v)


def rlx_layers(lir: Any, best: dict[str, float], impl: dict[str, str]) -> list[Layer]:
    """rlx's kernels in execution order, classed."""
    layers: list[Layer] = []
    for k in lir.kernels:
        ops = [n.op for n in k.nodes]
        main = next((n for n in k.nodes if n.op in CONV_OPS), k.nodes[-1])
        ins = [_shape(lir.type_of(i).shape) for i in main.inputs]
        out = _shape(main.type.shape)
        label = impl.get(k.name, "?")
        prev = next((r.cls for r in reversed(layers) if r.cls != "reshape / reorder"), "")
        keys: tuple[ConvKey, ...] = ()
        if main.op in CONV_OPS:
            keys = ((ins[0], ins[1], out),)
            pair = int(main.attr("stride2")[0]) if main.op == "conv2d_pair" else 0
            if pair:
                keys += ((ins[3], ins[4], out),)
            cls = layer_class(ins[0], ins[1], out, int(main.attr("stride")[0]), label, pair)
        elif "max_pool2d" in ops or "avg_pool2d" in ops:
            cls = f"{'max' if 'max_pool2d' in ops else 'avg'} pool @{out[2]}"
        elif main.op.startswith("reduce_") and len(ins[0]) == 4 and \
                tuple(main.attr("axes", ())) == (2, 3):
            cls = "global avg pool"
        elif "dot_general" in ops:
            cls = "FC"
        elif ops == ["reshape"]:
            cls = "reshape / reorder"
        elif "concat" in ops:
            cls = "concat"
        elif prev == "global avg pool" and len(out) == 4 and out[2] * out[3] == 1:
            cls = "global avg pool"  # the mean's divide, a kernel of its own after the sum
        else:
            cls = f"other ({'+'.join(ops)})"
        src = f" <- {list(ins[0])}" if ins else ""
        layers.append(Layer(k.name, cls, best.get(k.name, 0.0) * 1e3,
                            f"{label} {main.op}{list(out)}{src}", keys))
    return layers


def ort_layers(per: dict[str, tuple[str, float, dict[str, Any]]]) -> list[Layer]:
    """ONNX Runtime's nodes in execution order, each classed from its own shapes (a matched
    convolution later takes its rlx kernel's class)."""
    from benchmarks.kernel_profile import event_shape

    layers: list[Layer] = []
    for name, (op, ms, args) in per.items():
        out = _shape(event_shape(args))
        ins = [_shape(next(iter(v.values()), [])) for v in args.get("input_type_shape", [])]
        keys: tuple[ConvKey, ...] = ()
        if op in ORT_CONVS and len(ins) >= 2 and len(out) == 4:
            x, w = ins[0], ins[1]
            # the stride from the sizes: a valid window's shrink is not a stride
            stride = 1 if out[2] >= x[2] - w[2] + 1 else round(x[2] / out[2])
            keys = ((x, w, out),)
            cls = layer_class(x, w, out, stride)
        elif op in ("MaxPool", "AveragePool"):
            cls = f"{ORT_CLASSES[op]} @{out[2]}"
        else:
            cls = ORT_CLASSES.get(op, f"other ({op})")
        layers.append(Layer(name, cls, ms, f"{op}{list(out)}", keys))
    return layers


def _padded(key: ConvKey) -> ConvKey:
    """``key`` with its channel counts over 4 rounded up to 16: ONNX Runtime's NCHWc pads a
    tensor's channels to its block (8 or 16; MobileNetV2's 24 read as 32)."""
    def up(c: int) -> int:
        return c if c <= 4 else -(-c // 16) * 16

    x, w, out = key
    return ((x[0], up(x[1]), *x[2:]), (up(w[0]), up(w[1]), *w[2:]), (out[0], up(out[1]), *out[2:]))


def match(mine: list[Layer], theirs: list[Layer]) -> list[Layer]:
    """Give each rlx convolution the ORT convolutions of its keys (channels padded as
    ``_padded``; in execution order within each key: an inception block's branches run in
    another order in ONNX Runtime), and each of those its class; the ORT layers left
    unmatched are returned."""
    queue: dict[ConvKey, list[Layer]] = defaultdict(list)
    for o in theirs:
        for key in o.keys:
            queue[_padded(key)].append(o)
    taken: set[int] = set()
    for r in mine:
        for key in map(_padded, r.keys):
            if queue.get(key):
                o = queue[key].pop(0)
                o.cls = r.cls
                r.peers.append(o)
                taken.add(id(o))
    return [o for o in theirs if o.keys and id(o) not in taken]


def classes(mine: list[Layer], theirs: list[Layer]) -> list[tuple[str, int, float, float]]:
    """(class, rlx kernels in it, rlx ms, ORT ms) in the order the classes first run."""
    order: dict[str, None] = dict.fromkeys([r.cls for r in mine] + [o.cls for o in theirs])
    n: dict[str, int] = defaultdict(int)
    ms: dict[tuple[str, str], float] = defaultdict(float)
    for r in mine:
        n[r.cls] += 1
        ms["rlx", r.cls] += r.ms
    for o in theirs:
        ms["ort", o.cls] += o.ms
    return [(c, n[c], ms["rlx", c], ms["ort", c]) for c in order]


def report(mine: list[Layer], theirs: list[Layer], calls: dict[str, list[float]],
           unmatched: list[Layer], top: int) -> None:
    """Print the calls, the class table and the layers rlx loses most on."""
    p50 = {s: statistics.median(t) * 1e3 for s, t in calls.items()}
    low = {s: min(t) * 1e3 for s, t in calls.items()}
    tr, to = sum(r.ms for r in mine), sum(o.ms for o in theirs)
    print(f"whole call (profiled, {len(calls['rlx'])} each): rlx p50 {p50['rlx']:.2f} ms "
          f"(min {low['rlx']:.2f}), ORT p50 {p50['onnxruntime']:.2f} ms (min "
          f"{low['onnxruntime']:.2f}): ORT/rlx {p50['onnxruntime'] / p50['rlx']:.3f}x")
    print(f"sum of each kernel's fastest call: rlx {tr:.2f} ms, ORT {to:.2f} ms: ORT/rlx "
          f"{to / max(tr, 1e-9):.3f}x")
    print("== layer classes (ratio = ORT ms / rlx ms; share: of that side's sum; "
          "loss = rlx ms - ORT ms)")
    print(f"  {'class':<30} {'n':>3} {'rlx ms':>8} {'ORT ms':>8} {'ratio':>6} {'rlx %':>6} "
          f"{'ORT %':>6} {'loss':>7}")
    for c, n, a, b in classes(mine, theirs):
        ratio = f"{b / a:6.2f}" if a >= 1e-3 and b >= 1e-3 else f"{'-':>6}"
        print(f"  {c:<30} {n:>3} {a:8.3f} {b:8.3f} {ratio} {100 * a / max(tr, 1e-9):6.1f} "
              f"{100 * b / max(to, 1e-9):6.1f} {a - b:+7.3f}")
    if unmatched:
        print(f"  ({len(unmatched)} ORT convolutions matched no rlx kernel, "
              f"{sum(o.ms for o in unmatched):.3f} ms: in their own classes)")
    paired = [r for r in mine if r.peers]
    paired.sort(key=lambda r: sum(o.ms for o in r.peers) - r.ms)
    print(f"== layers rlx loses most on ({len(paired)} matched)")
    for r in paired[:top]:
        b = sum(o.ms for o in r.peers)
        print(f"  {r.ms:7.3f} vs {b:7.3f} ms  {b / max(r.ms, 1e-9):5.2f}x  {r.name} "
              f"[{r.cls}] {r.desc}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--net", default="mobilenet_v2")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--size", type=int, default=112)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--top", type=int, default=15)
    ap.add_argument("--fifo", default="", help="lock file: time the calls under SCHED_FIFO")
    ap.add_argument("--write", action="store_true",
                    help="also write results/profile-cnn-<net>-b<batch>-<cpu>.md/.json")
    args = ap.parse_args(argv)
    from benchmarks.common import fifo_held, limit_threads, load_now

    limit_threads(1)
    import os

    import numpy as np
    import torch

    import rlx_core as rlx
    from benchmarks.cnn_nets import build, export
    from benchmarks.kernel_profile import ort_profiled_session, side_by_side_times

    x = np.random.default_rng(0).standard_normal(
        (args.batch, 3, args.size, args.size)).astype(np.float32)
    data = export(build(args.net), torch.from_numpy(x), 17)
    os.environ["RLX_CPU_PROFILE"] = "1"  # wall clock per kernel, as ORT's profile
    exe = rlx.compile(rlx.from_onnx(data), x, target="cpu", record=False)
    sess = ort_profiled_session(data, 1)
    load = load_now()
    with fifo_held(args.fifo) as fifo:
        got = side_by_side_times(exe, (x,), sess, {"x": x}, args.runs)
    mine = rlx_layers(exe.lir, got["rlx"], got["impl"])
    theirs = ort_layers(got["ort"])
    unmatched = match(mine, theirs)
    what = f"{args.net}, batch {args.batch}, {args.size}x{args.size}"
    how = (f"one process, 1 thread, {args.runs} calls each in alternating turns, wall clock, "
           f"load {load} before{', under SCHED_FIFO' if fifo else ''}")
    text = io.StringIO()
    with contextlib.redirect_stdout(text):
        print(f"== {what}: {how}")
        report(mine, theirs, got["calls"], unmatched, args.top)
    print(text.getvalue(), end="")
    if args.write:
        from benchmarks.kernel_profile import write_profile

        write_profile(
            "profile_cnn", f"profile-cnn-{args.net}-b{args.batch}", what, "1 thread", args.runs,
            text.getvalue(),
            {"net": args.net, "batch": args.batch, "size": args.size, "runs": args.runs,
             "fifo": fifo, "calls_s": got["calls"],
             "classes": [dict(zip(("class", "n", "rlx_ms", "ort_ms"), c, strict=True))
                         for c in classes(mine, theirs)],
             "rlx": [{"kernel": r.name, "class": r.cls, "ms": r.ms, "desc": r.desc,
                      "ort": [o.name for o in r.peers]} for r in mine],
             "onnxruntime": [{"node": o.name, "class": o.cls, "ms": o.ms, "desc": o.desc}
                             for o in theirs]},
            argv, clocks="both sides' wall clock in one process, calls alternating"
            + (", under SCHED_FIFO" if fifo else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
