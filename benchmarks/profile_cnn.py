"""Where a bench_cnn network spends its time: rlx's kernels against ONNX Runtime's nodes.

rlx side: the cpu program compiled in profiling mode (``RLX_CPU_PROFILE=1``: each kernel call
timed), grouped by the kernel's implementation label and the op of its node. ONNX Runtime
side: the session's own per-node profile (``SessionOptions.enable_profiling``), grouped by
op type (its fused nodes keep ORT's names, e.g. ``FusedConv``). 1 thread each, the same
input, ``--runs`` calls after one warm-up call; times are per call, in ms. Both profiles time
wall clock inside the call; each kernel's (node's) fastest call of the runs is kept, which
leaves most of a loaded machine's preemptions out.

    python benchmarks/profile_cnn.py --net mobilenet_v2 --batch 8 --size 112
    python benchmarks/profile_cnn.py --net inception --batch 1 --top 25

Prints the totals, the groups, the top kernels with their shapes and the convolutions paired
with ONNX Runtime's; ``--write`` also writes them to results/profile-cnn-<net>-b<batch>-<cpu>
(.md and .json, CPU model and ISA inside).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


# (name, group, ms of its fastest call, description, "input shape -> output shape")
Row = tuple[str, str, float, str, str]


def _rlx(net: Any, x: Any, runs: int) -> list[Row]:
    """rlx's kernels in execution order."""
    import torch

    import rlx_core as rlx
    from benchmarks.cnn_nets import export
    from benchmarks.kernel_profile import rlx_kernel_times

    os.environ["RLX_CPU_PROFILE"] = "thread"  # CPU time per kernel
    graph = rlx.from_onnx(export(net, torch.from_numpy(x), 17))
    exe = rlx.compile(graph, x, target="cpu", record=False)
    best, impl = rlx_kernel_times(exe, (x,), runs)
    lir = exe.lir
    blocked = set(exe.program.info.get("nchw8c") or ())
    rows: list[Row] = []
    for k in lir.kernels:
        last = k.nodes[-1]
        src = (f" <- {list(lir.type_of(k.nodes[0].inputs[0]).shape)}"
               if k.nodes[0].inputs else "")
        lay = "".join(t for v, t in ((k.nodes[0].inputs[0] if k.nodes[0].inputs else "", "i8c"),
                                     (last.name, "o8c")) if v in blocked)
        first = list(lir.type_of(k.nodes[0].inputs[0]).shape) if k.nodes[0].inputs else []
        rows.append((k.name, f"{impl[k.name]} [{'+'.join(n.op for n in k.nodes)}]",
                     best[k.name] * 1e3, f"{impl[k.name]} {last.op}{list(last.type.shape)}{src} "
                     f"{lay}", f"{first} -> {list(last.type.shape)}"))
    return rows


def _ort(net: Any, x: Any, runs: int) -> list[Row]:
    """ONNX Runtime's nodes in execution order."""
    import torch

    from benchmarks.cnn_nets import export
    from benchmarks.kernel_profile import event_shape, ort_node_times

    per = ort_node_times(export(net, torch.from_numpy(x), 17), {"x": x}, runs)
    rows: list[Row] = []
    for name, (op, ms, args) in per.items():
        shape, src = event_shape(args), event_shape(args, "input_type_shape")
        rows.append((name, op, ms, f"{op}{shape} {name}", f"{src} -> {shape}"))
    return rows


def _show(side: str, rows: list[Row], top: int, what: str) -> None:
    groups: dict[str, float] = defaultdict(float)
    for r in rows:
        groups[r[1]] += r[2]
    print(f"== {side}: {sum(groups.values()):.2f} ms per call ({what})")
    for k, v in sorted(groups.items(), key=lambda kv: -kv[1]):
        print(f"  {v:8.2f} ms  {k}")
    print("  -- top")
    for r in sorted(rows, key=lambda r: -r[2])[:top]:
        print(f"  {r[2]:8.3f} ms  {r[0]} {r[3]}")


def _pair(mine: list[Row], theirs: list[Row], top: int) -> None:
    """The convolutions side by side, matched by (input shape, output shape) in execution
    order within each shape (the branches of an inception block run in another order in
    ONNX Runtime), sorted by what rlx loses."""
    a: dict[str, list[Row]] = defaultdict(list)
    b: dict[str, list[Row]] = defaultdict(list)
    for r in mine:
        if "conv" in r[1]:
            a[r[4]].append(r)
    for r in theirs:
        if r[1] == "Conv" or r[1] == "FusedConv":
            b[r[4]].append(r)
    pairs = [(r, o) for k in a for r, o in zip(a[k], b.get(k, []), strict=False)]
    lost = sum(len(v) for v in a.values()) - len(pairs)
    pairs.sort(key=lambda p: p[1][2] - p[0][2])
    print(f"== convolutions, rlx vs ORT (ratio = ORT ms / rlx ms): {len(pairs)} pairs, rlx "
          f"{sum(r[2] for r, _ in pairs):.2f} ms vs ORT {sum(o[2] for _, o in pairs):.2f} ms"
          f"{f' ({lost} unpaired)' if lost else ''}; biggest losses:")
    for r, o in pairs[:top]:
        print(f"  {r[2]:7.3f} vs {o[2]:7.3f} ms  {o[2] / max(r[2], 1e-9):5.2f}x  {r[0]} {r[3]}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--net", default="mobilenet_v2")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--size", type=int, default=112)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--top", type=int, default=20)
    ap.add_argument("--write", action="store_true",
                    help="also write results/profile-cnn-<net>-b<batch>-<cpu>.md/.json")
    args = ap.parse_args(argv)
    from benchmarks.common import limit_threads

    limit_threads(1)
    import numpy as np

    from benchmarks.cnn_nets import build

    net = build(args.net)
    x = np.random.default_rng(0).standard_normal(
        (args.batch, 3, args.size, args.size)).astype(np.float32)
    what = f"{args.net}, batch {args.batch}, {args.size}x{args.size}"
    mine, theirs = _rlx(net, x, args.runs), _ort(net, x, args.runs)
    text = io.StringIO()
    with contextlib.redirect_stdout(text):
        _show("rlx", mine, args.top, what)
        _show("onnxruntime", theirs, args.top, what)
        _pair(mine, theirs, args.top)
    print(text.getvalue(), end="")
    if args.write:
        from benchmarks.kernel_profile import write_profile

        write_profile("profile_cnn", f"profile-cnn-{args.net}-b{args.batch}", what,
                      "1 thread", args.runs, text.getvalue(),
                      {"net": args.net, "batch": args.batch, "size": args.size,
                       "runs": args.runs, "rlx": [r[:4] for r in mine],
                       "onnxruntime": [r[:4] for r in theirs]}, argv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
