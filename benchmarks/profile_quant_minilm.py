"""Where int8 MiniLM spends its time: rlx's kernels (dynamic and static PTQ) against ONNX
Runtime's int8 nodes.

rlx side: each model compiled in profiling mode (``RLX_CPU_PROFILE=thread``: each kernel
call timed by the calling thread's CPU time), every kernel put in one of a few classes
(the int8 GEMM with its quantize-on-the-fly and store, the f32 attention, layer norm,
elementwise, ...) and listed by implementation label. ONNX Runtime side: the session's own
per-node profile (``enable_profiling``) of ``quantize_dynamic``'s model (the usual
sentence-transformers int8 path), grouped by op type. 1 thread each, seq 128, ``--runs``
calls after a warm-up; each kernel's (node's) fastest call is kept, which leaves most of a
loaded machine's preemptions out. The models are bench_quant_minilm's: rlx-int8 (dynamic,
per-token, ptq.fast_bits codes), rlx-int8-static (MSE calibration on the timed batch, 7-bit
weights, 8-bit activations; -wWaA / a layer list overrides as there).

    python benchmarks/profile_quant_minilm.py --batch 1 --write
    python benchmarks/profile_quant_minilm.py --batch 8 --models rlx-int8-static --write
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import sys
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

SEQ = 128
# (name, class, ms of its fastest call, description)
Row = tuple[str, str, float, str]


def kernel_class(impl: str, ops: list[str]) -> str:
    """The class a kernel's time is counted in (what it mostly does)."""
    if impl.startswith("rlx-igemm"):
        return "int8 GEMM (+ quantize rows, dequantize/requantize store, epilogue)"
    if any(o in ("quantize", "dequantize", "requantize") for o in ops):
        return "quantize / dequantize / requantize"
    if any("attention" in o for o in ops) or "attention" in impl:
        return "f32 attention (scores, softmax, @v)"
    if any(o in ("matmul", "dot_general", "linear", "batch_matmul") for o in ops):
        return "f32 GEMM"
    if "layer_norm" in ops or "norm" in impl:
        return "layer_norm"
    if "softmax" in ops:
        return "softmax"
    if "gather" in ops or "take" in ops:
        return "embedding gather"
    return "other (elementwise, reductions, copies)"


def ort_class(op: str) -> str:
    """ONNX Runtime's op types, in the same classes."""
    if op in ("MatMulInteger", "DynamicQuantizeMatMul", "MatMulIntegerToFloat", "QGemm",
              "QLinearMatMul"):
        return "int8 GEMM (+ quantize rows, dequantize/requantize store, epilogue)"
    if op in ("DynamicQuantizeLinear", "QuantizeLinear", "DequantizeLinear"):
        return "quantize / dequantize / requantize"
    if op in ("Attention", "MultiHeadAttention", "Softmax"):
        return "f32 attention (scores, softmax, @v)"
    if op in ("MatMul", "Gemm", "FusedMatMul"):
        return "f32 GEMM"
    if "LayerNorm" in op:
        return "layer_norm"
    if op == "Gather":
        return "embedding gather"
    return "other (elementwise, reductions, copies)"


def rlx_rows(exe: Any, args: tuple[Any, ...], runs: int) -> list[Row]:
    """rlx's kernels in execution order, each with its fastest call."""
    from benchmarks.kernel_profile import rlx_kernel_times

    best, impl = rlx_kernel_times(exe, args, runs)
    rows: list[Row] = []
    for k in exe.lir.kernels:
        ops = [n.op for n in k.nodes]
        last = k.nodes[-1]
        first = list(exe.lir.type_of(k.nodes[0].inputs[0]).shape) if k.nodes[0].inputs else []
        rows.append((k.name, kernel_class(impl[k.name], ops), best[k.name] * 1e3,
                     f"{impl[k.name]} [{'+'.join(ops)}] {first} -> {list(last.type.shape)}"))
    return rows


def ort_rows(path: str, feed: dict[str, Any], runs: int) -> list[Row]:
    """ONNX Runtime's nodes, each with its fastest call after the first run."""
    from benchmarks.kernel_profile import event_shape, ort_node_times

    return [(name, ort_class(op), ms, f"{op} -> {event_shape(a)}")
            for name, (op, ms, a) in ort_node_times(path, feed, runs).items()]


def show(side: str, rows: list[Row], top: int) -> None:
    """Totals by class, by description (kernels of one shape and kind together), the top."""
    total = sum(r[2] for r in rows)
    cls: dict[str, float] = defaultdict(float)
    kinds: dict[str, list[float]] = defaultdict(list)
    for r in rows:
        cls[r[1]] += r[2]
        kinds[r[3]].append(r[2])
    print(f"== {side}: {total:.2f} ms per call (sum of the kernels' fastest calls)")
    for k, v in sorted(cls.items(), key=lambda kv: -kv[1]):
        print(f"  {v:8.2f} ms {100 * v / max(total, 1e-9):5.1f}%  {k}")
    print("  -- by kernel kind (count x mean)")
    for k, v in sorted(kinds.items(), key=lambda kv: -sum(kv[1]))[:top]:
        print(f"  {sum(v):8.2f} ms  {len(v):3d} x {sum(v) / len(v):7.3f}  {k}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--top", type=int, default=14)
    ap.add_argument("--models", default="rlx-int8,rlx-int8-static",
                    help="rlx models: rlx-int8, rlx-int8-8bit, rlx-int8-static[-wWaA], rlx-f32")
    ap.add_argument("--no-ort", action="store_true")
    ap.add_argument("--write", action="store_true",
                    help="also write results/profile-quant-minilm-b<batch>-<cpu>.md/.json")
    args = ap.parse_args(argv)
    from benchmarks.common import limit_threads

    limit_threads(1)
    os.environ["RLX_CPU_PROFILE"] = "thread"
    import numpy as np

    import rlx_core as rlx
    from benchmarks.bench_minilm import export_onnx, token_batch, torch_module
    from rlx_core.frontend.tracer import spec
    from rlx_core.models.minilm import MiniLM
    from rlx_core.quant import ptq

    model = MiniLM.load()
    ids, mask, types = token_batch(model, args.batch, SEQ)
    g = rlx.trace(model.encode_fn(), *[spec((args.batch, SEQ), "i32")] * 3)
    text = io.StringIO()
    data: dict[str, Any] = {}
    for kind in [m for m in args.models.split(",") if m]:
        if kind == "rlx-f32":
            q = g
        elif kind == "rlx-int8":
            q = ptq.quantize_dynamic(g, granularity="token").graph
        elif kind == "rlx-int8-8bit":
            q = ptq.quantize_dynamic(g, granularity="token", weight_bits=8,
                                     activation_bits=8).graph
        else:
            assert kind.startswith("rlx-int8-static"), kind
            tail = kind[len("rlx-int8-static"):].strip("-")
            wb, ab = (int(tail[1]), int(tail[3])) if tail else (ptq.fast_bits("token"), 8)
            q = ptq.quantize_static(g, data=[(ids, mask, types)], method="mse",
                                    weight_bits=wb, activation_bits=ab).graph
        exe = rlx.compile(q, target="cpu")
        rows = rlx_rows(exe, (ids, mask, types), args.runs)
        data[kind] = [list(r) for r in rows]
        with contextlib.redirect_stdout(text):
            show(kind, rows, args.top)
    if not args.no_ort:
        import torch
        from onnxruntime.quantization import QuantType, quantize_dynamic
        from sentence_transformers import SentenceTransformer

        torch.set_num_threads(1)
        st = SentenceTransformer(str(model.folder), device="cpu")
        tmp = tempfile.mkdtemp(prefix="rlx-prof-qminilm-")
        ex = tuple(torch.from_numpy(a.astype(np.int64)) for a in token_batch(model, 2))
        f32_path, why = export_onnx(torch, torch_module(torch, st), ex, tmp, dynamo=False)
        if f32_path is None:
            raise SystemExit(f"ONNX export failed: {why}")
        q_path = os.path.join(tmp, "minilm-int8.onnx")
        quantize_dynamic(f32_path, q_path, weight_type=QuantType.QInt8)
        feed = {"ids": ids.astype(np.int64), "mask": mask.astype(np.int64),
                "types": types.astype(np.int64)}
        rows = ort_rows(q_path, feed, args.runs)
        data["ort-int8"] = [list(r) for r in rows]
        with contextlib.redirect_stdout(text):
            show("onnxruntime int8 (quantize_dynamic)", rows, args.top)
    print(text.getvalue(), end="")
    if args.write:
        from benchmarks.kernel_profile import write_profile

        write_profile("profile_quant_minilm", f"profile-quant-minilm-b{args.batch}",
                      f"int8 MiniLM, batch {args.batch}, seq {SEQ}",
                      "1 thread (a shared machine: the 1-minute load is given)", args.runs,
                      text.getvalue(), {"batch": args.batch, "seq": SEQ, "runs": args.runs,
                                        "kernels": data}, argv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
