"""all-MiniLM-L6-v2 with dynamic int8 quantization: rlx against ONNX Runtime's quantize_dynamic.

Accuracy: cosine similarity of each int8 embedding to rlx's f32 embedding of the same sentence,
over ``--sentences`` (default 1,000) varied sentences generated here from templates (lengths
3 to ~60 tokens, questions, lists, numbers, code-ish text), padded to 64 tokens (128 for the
exported ONNX models, whose sequence axis is fixed), batch 8.
ONNX Runtime's int8 model (the sentence-transformers module exported with the TorchScript
exporter, then ``onnxruntime.quantization.quantize_dynamic``, QInt8 weights: the usual int8
path) is scored the same way against its own f32 model.

Speed: rlx int8 (``rlx.quant.ptq.quantize_dynamic``: per-channel i8 weights, per-call i8
activations, ``int_linear`` on the CPU's int8 GEMM) against ORT int8, beside both f32 models,
at batch 1 and 8, sequence 128, interleaved in one process (common.interleaved), each peer
on all the cores this process may use; and rlx's weight-only int4 (groups of 32, Q4_0-like,
``ptq.quantize_int4_weights``). Goals (issue 26): int8 cosine >= 0.99 and >= 1.3x over ORT
int8; int4 cosine >= 0.97.

    python benchmarks/bench_quant_minilm.py     # writes results/quant_minilm.*
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import (  # noqa: E402
    SETTLE_S,
    interleaved,
    limit_threads,
    machine,
    markdown_table,
    say,
    torch_threads,
    write_results,
)

SEQ_SPEED = 128
SEQ_ACC = 64
ACC_BATCH = 8


def sentences(n: int, seed: int = 0) -> list[str]:
    """``n`` varied English sentences from templates (deterministic)."""
    import random

    r = random.Random(seed)
    subj = ["the farmer", "a small child", "our team", "the old compiler", "my neighbour",
            "the committee", "a quantum computer", "the river", "every student", "she", "they",
            "the database", "a red fox", "the orchestra", "this function", "the robot"]
    verb = ["watches", "builds", "forgets", "explains", "paints", "measures", "optimises",
            "crosses", "ignores", "celebrates", "rewrites", "predicts", "carries", "questions"]
    obj = ["the bridge", "a long report", "the weather", "twelve apples", "the last train",
           "an unusual idea", "the matrix product", "her grandmother's recipe", "the mountain",
           "a broken clock", "the results of the experiment", "the blue notebook"]
    adv = ["quietly", "every morning", "without hesitation", "in the rain", "after lunch",
           "for the third time", "with great care", "before the deadline", "at midnight"]
    extra = ["because nobody else would", "although it was expensive", "and then left",
             "while the music played", "so that the test passes", "which surprised everyone"]
    out: list[str] = []
    for i in range(n):
        kind = i % 6
        s = f"{r.choice(subj)} {r.choice(verb)} {r.choice(obj)}"
        if kind == 0:
            s = f"{s.capitalize()} {r.choice(adv)}."
        elif kind == 1:
            s = f"Why does {s}?"
        elif kind == 2:
            s = f"{s.capitalize()} {r.choice(adv)}, {r.choice(extra)}, and {r.choice(subj)} " \
                f"{r.choice(verb)} {r.choice(obj)} {r.choice(adv)}."
        elif kind == 3:
            s = f"{r.randint(2, 999)} {r.choice(['items', 'ms', 'km', 'euros'])}: {s}."
        elif kind == 4:
            s = r.choice(["Yes.", "No way!", "Hello world", "It rains.", "def f(x): return x",
                          "GPU kernels, tiles and caches", "OK"]) + f" {r.choice(adv)}"
        else:
            s = "; ".join(f"{r.choice(subj)} {r.choice(verb)} {r.choice(obj)}"
                          for _ in range(r.randint(2, 4))) + "."
        out.append(s)
    return out


def _fit(a: Any, seq: int) -> Any:
    import numpy as np

    out = np.zeros((a.shape[0], seq), np.int32)
    n = min(seq, a.shape[1])
    out[:, :n] = a[:, :n]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sentences", type=int, default=1000)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--no-speed", action="store_true", help="the cosine table only")
    args = ap.parse_args()
    threads = len(os.sched_getaffinity(0))
    limit_threads(threads)
    import numpy as np
    import onnxruntime as ort
    import torch
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from sentence_transformers import SentenceTransformer

    import rlx_core as rlx
    from benchmarks.bench_minilm import export_onnx, token_batch, torch_module
    from rlx_core.frontend.tracer import spec
    from rlx_core.models.minilm import MiniLM
    from rlx_core.quant import ptq
    from rlx_core.targets.cpu.igemm import isa_here

    torch_threads(torch, threads)
    model = MiniLM.load()
    st = SentenceTransformer(str(model.folder), device="cpu")
    module = torch_module(torch, st)
    tmp = tempfile.mkdtemp(prefix="rlx-quant-minilm-")
    ex = tuple(torch.from_numpy(a.astype(np.int64)) for a in token_batch(model, 2))
    f32_path, why = export_onnx(torch, module, ex, tmp, dynamo=False)
    if f32_path is None:
        raise SystemExit(f"ONNX export failed: {why}")
    q_path = os.path.join(tmp, "minilm-int8.onnx")
    quantize_dynamic(f32_path, q_path, weight_type=QuantType.QInt8)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    sess = {k: ort.InferenceSession(p, opts, providers=["CPUExecutionProvider"])
            for k, p in (("ort-f32", f32_path), ("ort-int8", q_path))}

    def rlx_pair(batch: int, seq: int) -> tuple[Any, Any, Any]:
        """f32, dynamic int8 and int4 weight-only (groups of 32) executables."""
        g = rlx.trace(model.encode_fn(), *[spec((batch, seq), "i32")] * 3)
        q = ptq.quantize_dynamic(g)
        q4 = ptq.quantize_int4_weights(g, group=32)
        return (rlx.compile(g, target="cpu"), rlx.compile(q.graph, target="cpu"),
                rlx.compile(q4.graph, target="cpu"))

    # ---- accuracy: cosine to f32 over the sentences ----------------------------------------
    texts = sentences(args.sentences)
    f32_acc, int8_acc, int4_acc = rlx_pair(ACC_BATCH, SEQ_ACC)
    cos: dict[str, list[float]] = {"rlx-int8": [], "ort-int8": [], "rlx-int4-g32": []}
    t0 = time.perf_counter()
    for i in range(0, len(texts), ACC_BATCH):
        chunk = texts[i:i + ACC_BATCH]
        chunk += [chunk[-1]] * (ACC_BATCH - len(chunk))
        ids, mask, types = (_fit(a, SEQ_ACC) for a in model.tokenize(chunk))
        n = min(ACC_BATCH, len(texts) - i)
        e32, e8 = np.asarray(f32_acc(ids, mask, types)), np.asarray(int8_acc(ids, mask, types))
        e4 = np.asarray(int4_acc(ids, mask, types))
        # the exported models take 128 tokens: padding more changes no masked mean
        feed = {"ids": _fit(ids, SEQ_SPEED).astype(np.int64),
                "mask": _fit(mask, SEQ_SPEED).astype(np.int64),
                "types": _fit(types, SEQ_SPEED).astype(np.int64)}
        o32, o8 = sess["ort-f32"].run(None, feed)[0], sess["ort-int8"].run(None, feed)[0]
        cos["rlx-int8"] += list((e32 * e8).sum(1)[:n] / (np.linalg.norm(e32, axis=1)
                                                        * np.linalg.norm(e8, axis=1))[:n])
        cos["rlx-int4-g32"] += list((e32 * e4).sum(1)[:n] / (np.linalg.norm(e32, axis=1)
                                                            * np.linalg.norm(e4, axis=1))[:n])
        cos["ort-int8"] += list((o32 * o8).sum(1)[:n] / (np.linalg.norm(o32, axis=1)
                                                        * np.linalg.norm(o8, axis=1))[:n])
    say(f"accuracy pass over {len(texts)} sentences in {time.perf_counter() - t0:.0f} s")
    cos_stats = {k: {"min": float(np.min(v)), "mean": float(np.mean(v)),
                     "p01": float(np.percentile(v, 1)), "n": len(v)} for k, v in cos.items()}

    # ---- speed -------------------------------------------------------------------------------
    rows, timing = [], {}
    for batch in () if args.no_speed else (1, 8):
        ids, mask, types = token_batch(model, batch)
        exe32, exe8, exe4 = rlx_pair(batch, SEQ_SPEED)
        feed = {"ids": ids.astype(np.int64), "mask": mask.astype(np.int64),
                "types": types.astype(np.int64)}
        t_in = (ids, mask, types)
        peers = {"rlx-int8": lambda e=exe8, a=t_in: e(*a),
                 "ort-int8": lambda f=feed: sess["ort-int8"].run(None, f),
                 "rlx-int4-g32": lambda e=exe4, a=t_in: e(*a),
                 "rlx-f32": lambda e=exe32, a=t_in: e(*a),
                 "ort-f32": lambda f=feed: sess["ort-f32"].run(None, f)}
        stats = interleaved(peers, runs=args.runs, warmup=3, block=5, settle_s=SETTLE_S)
        timing[batch] = {k: s.p50 * 1e3 for k, s in stats.items()}
        for k, s in stats.items():
            rows.append([batch, k, f"{s.p50 * 1e3:.1f}",
                         f"{stats['ort-int8'].p50 / s.p50:.2f}x"])
    info = {**machine(), "threads": threads, "int8_dot_kernel": isa_here(),
            "onnxruntime": ort.__version__}
    cos_rows = [[k, f"{v['min']:.4f}", f"{v['p01']:.4f}", f"{v['mean']:.5f}", v["n"]]
                for k, v in cos_stats.items()]
    md = (f"# all-MiniLM-L6-v2, dynamic int8: rlx against ONNX Runtime quantize_dynamic\n\n"
          f"Command: `python benchmarks/bench_quant_minilm.py {' '.join(sys.argv[1:])}`. "
          f"Machine: {info['cpu']}, "
          f"{threads} thread(s) per peer, int8 dot kernel here: {info['int8_dot_kernel']}, "
          f"onnxruntime {ort.__version__}.\n\n"
          f"## Cosine to f32 ({len(texts)} generated sentences, seq {SEQ_ACC}, each int8 model "
          f"against its own f32 model)\n\n"
          + markdown_table(["model", "min", "1st percentile", "mean", "sentences"], cos_rows)
          + f"\n\n## Time per call (seq {SEQ_SPEED}, median ms; speed relative to ORT int8)\n\n"
          + markdown_table(["batch", "peer", "ms", "vs ort-int8"], rows) + "\n")
    print(md)
    if not args.no_write:
        write_results("quant_minilm", {"machine": info, "cosine": cos_stats, "ms": timing}, md)


if __name__ == "__main__":
    main()
