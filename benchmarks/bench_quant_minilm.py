"""all-MiniLM-L6-v2 quantized: rlx int8 / int4 against ONNX Runtime's quantize_dynamic.

Accuracy: cosine similarity of each quantized embedding to rlx's f32 embedding of the same
sentence, over ``--sentences`` (default 1,000) varied sentences generated here from templates
(questions, lists, numbers, code-ish text; 3 to ~40 tokens). The accuracy pass is batched:
``--acc-batch`` (default 100) sentences a call, all padded to the longest sentence rounded up
to 8 tokens (padding changes no masked mean), so 1,000 sentences are 10 calls per model.
ONNX Runtime's int8 model (the sentence-transformers module exported with the TorchScript
exporter, then ``onnxruntime.quantization.quantize_dynamic``, QInt8 weights: the usual int8
path) is scored the same way against its own f32 model.

rlx int8 is ``rlx.quant.ptq.quantize_dynamic(granularity="token")``: per-channel i8 weights,
one i8 scale per token (row) per call, ``int_linear`` on the CPU's packed int8 GEMM; softmax,
layer norm, GELU and attention (scores and @v) stay f32. rlx int4 is
``ptq.quantize_int4_weights`` (groups of 32 with zero points, searched ranges), dequantized
inside the matmul.
The ablation table (``--ablation`` sentences, default 100) shows what each choice does:
which layers carry the per-tensor error (only one kind of linear quantized at a time), q/k/v
kept f32, per-tensor weight scales, and the int4 group size, zero points and range search.

Speed: rlx int8, ORT int8, rlx int4, rlx f32 and ORT f32 at batch 1 and 8, sequence 128,
interleaved in one process (common.interleaved), each peer on all the cores this process may
use. Goals (issue 26): int8 cosine >= 0.99 and >= 1.3x over ORT int8; int4 cosine >= 0.97.

    python benchmarks/bench_quant_minilm.py     # writes results/quant_minilm-<cpu>.*
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
    cpu_slug,
    end_of_run,
    interleaved,
    isa,
    limit_threads,
    machine,
    markdown_table,
    placement_text,
    say,
    torch_threads,
    write_results,
)

SEQ_SPEED = 128
INT4_GROUP = 32
# the ablation: each kind of linear quantized alone (weight-name substrings)
# per-layer code widths (ptq.layer_bits: {weight-name substring: bits}, first match wins) of
# the -mixed models: (weight bits, activation bits)
QKV, ATT_OUT, FFN_IN, FFN_OUT = "attention.self.", "attention.output.", "intermediate.", "output."
# (6-bit FFN-out weights: the w77 pairing with static's 8-bit activations, w66 with dynamic's
# 7-bit ones; the largest linears (k = 1536) and, with 6 bits, the cheapest in cosine)
MIXED_STATIC = ({ATT_OUT: 7, FFN_OUT: 6, "*": 7}, 8)
MIXED_DYNAMIC = ({ATT_OUT: 7, FFN_OUT: 6, "*": 7}, 7)
KINDS = {"q, k, v": ("attention.self.",), "attention output": ("attention.output.dense",),
         "FFN in (before GELU)": ("intermediate.dense",),
         "FFN out (after GELU)": tuple(f"layer.{i}.output.dense" for i in range(12))}


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


def _cos(a: Any, b: Any) -> Any:
    import numpy as np

    return (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sentences", type=int, default=1000)
    ap.add_argument("--acc-batch", type=int, default=100)
    ap.add_argument("--ablation", type=int, default=100,
                    help="sentences for the ablation table (0: none)")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--tag", default="",
                    help="appended to the results file's name (runs of parts side by side)")
    ap.add_argument("--no-speed", action="store_true", help="the cosine tables only")
    ap.add_argument("--models", default="rlx-int8,rlx-int8-8bit,rlx-int8-static,rlx-int8-tensor,"
                    f"rlx-int4-g{INT4_GROUP}",
                    help="the rlx models the accuracy pass scores (comma-separated; 'none': no "
                         "accuracy pass at all, ONNX Runtime's included)")
    ap.add_argument("--speed-peers", default="rlx-int8,rlx-int8-8bit,ort-int8,rlx-int8-static,"
                    f"rlx-int4-g{INT4_GROUP},rlx-f32,ort-f32",
                    help="the peers timed (comma-separated; rlx-int8, ort-int8 and rlx-f32 "
                         "always: the ratios are to them)")
    ap.add_argument("--static-method", default="mse",
                    help="calibration of the static PTQ model (minmax, percentile, mse, entropy; "
                         "a model named rlx-int8-static-METHOD uses METHOD)")
    ap.add_argument("--calibration", type=int, default=200,
                    help="sentences (generated apart from the scored ones) static PTQ observes")
    ap.add_argument("--clock", choices=("wall", "thread"), default="wall",
                    help="thread: every peer on one thread (the calling one), timed by that "
                         "thread's CPU time, which time slices taken by other processes do "
                         "not inflate (a loaded machine still compares the kernels)")
    args = ap.parse_args()
    threads = 1 if args.clock == "thread" else len(os.sched_getaffinity(0))
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

    t_start = time.perf_counter()
    load0 = machine()["load_average_1m"]
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

    # static PTQ's code widths (weights, activations): 7-bit weights where the cpu's AVX2 tile
    # pays (ptq.fast_bits; u8 x 7-bit w needs no sign trick), 8-bit activations: 7-bit ones
    # with one fixed scale per tensor cost too much (mean cosine 0.978 on 200 sentences,
    # against 0.992 for w7a8); -wWaA in a model name overrides them
    static_bits = (ptq.fast_bits("token"), 8)

    def graphs(batch: int, seq: int) -> Any:
        return rlx.trace(model.encode_fn(), *[spec((batch, seq), "i32")] * 3)

    def quantized(g: Any, kind: str, cal: Any = None) -> Any:
        """``cal``: the batches (shaped like ``g``'s inputs) static PTQ observes."""
        if kind == "rlx-f32":
            return g
        if kind.startswith("rlx-int8-static"):  # rlx-int8-static[-METHOD][-wWaA|-mixed]
            parts = kind[len("rlx-int8-static"):].strip("-").split("-")
            bits: tuple[Any, Any] = static_bits
            if parts[-1] == "mixed":
                bits, parts = MIXED_STATIC, parts[:-1]
            if parts and len(parts[-1]) == 4 and parts[-1][0] == "w" and parts[-1][2] == "a":
                bits = (int(parts[-1][1]), int(parts[-1][3]))
                parts = parts[:-1]
            method = "-".join(p for p in parts if p) or args.static_method
            return ptq.quantize_static(g, data=cal, method=method, weight_bits=bits[0],
                                       activation_bits=bits[1]).graph
        if kind == "rlx-int8":  # the default code width here (ptq.fast_bits)
            return ptq.quantize_dynamic(g, granularity="token").graph
        if kind == "rlx-int8-mixed":
            return ptq.quantize_dynamic(g, granularity="token", weight_bits=MIXED_DYNAMIC[0],
                                        activation_bits=MIXED_DYNAMIC[1]).graph
        if kind.startswith("rlx-int8-w") and len(kind) == len("rlx-int8-wWaA"):
            return ptq.quantize_dynamic(g, granularity="token", weight_bits=int(kind[-3]),
                                        activation_bits=int(kind[-1])).graph
        if kind == "rlx-int8-8bit":  # exact 8-bit codes whatever the CPU
            return ptq.quantize_dynamic(g, granularity="token", weight_bits=8,
                                        activation_bits=8).graph
        if kind == "rlx-int8-tensor":
            return ptq.quantize_dynamic(g, granularity="tensor").graph
        assert kind == f"rlx-int4-g{INT4_GROUP}", kind
        return ptq.quantize_int4_weights(g, group=INT4_GROUP, zero_point=True).graph

    # ---- accuracy: cosine to f32 over the sentences, 100 a call ------------------------------
    texts = sentences(args.sentences)
    ids_all, mask_all, types_all = model.tokenize(texts)
    seq_acc = -(-int(mask_all.sum(1).max()) // 8) * 8
    bsz = args.acc_batch

    def batches(tok: tuple[Any, ...]) -> list[tuple[list[Any], int]]:
        out = []
        for i in range(0, len(tok[0]), bsz):
            parts = [_fit(a[i:i + bsz], seq_acc) for a in tok]
            n = parts[0].shape[0]
            if n < bsz:  # the last chunk repeats its last sentence (not scored)
                parts = [np.concatenate([p, np.repeat(p[-1:], bsz - n, 0)]) for p in parts]
            out.append((parts, n))
        return out

    chunks = batches((ids_all, mask_all, types_all))
    # static PTQ's calibration set: other sentences (another seed), never the scored ones
    cal_acc = [tuple(p) for p, _ in batches(model.tokenize(sentences(args.calibration, 1)))]
    g_acc = graphs(bsz, seq_acc)

    def embed(exe: Any, subset: int | None = None) -> Any:
        out, seen = [], 0
        for parts, n in chunks:
            if subset is not None and seen >= subset:
                break
            out.append(np.asarray(exe(*parts))[:n])
            seen += n
        return np.concatenate(out)[:subset]

    t0 = time.perf_counter()
    cos: dict[str, Any] = {}
    if args.models != "none":
        ref = embed(rlx.compile(g_acc, target="cpu"))
        for kind in [m for m in args.models.split(",") if m]:
            exe_k = rlx.compile(quantized(g_acc, kind, cal_acc), target="cpu")
            cos[kind] = _cos(embed(exe_k), ref)
            say(f"{kind}: mean {cos[kind].mean():.5f} min {cos[kind].min():.4f}")
        o32, o8 = [], []
        for parts, n in chunks:
            feed = dict(zip(("ids", "mask", "types"), (p.astype(np.int64) for p in parts),
                            strict=True))
            o32.append(sess["ort-f32"].run(None, feed)[0][:n])
            o8.append(sess["ort-int8"].run(None, feed)[0][:n])
        cos["ort-int8"] = _cos(np.concatenate(o8), np.concatenate(o32))
    acc_s = time.perf_counter() - t0
    say(f"accuracy pass over {len(texts)} sentences in {acc_s:.0f} s")
    cos_stats = {k: {"min": float(np.min(v)), "mean": float(np.mean(v)),
                     "p01": float(np.percentile(v, 1)), "n": len(v)} for k, v in cos.items()}

    # ---- ablation: what each choice does ------------------------------------------------------
    abl: list[list[Any]] = []
    n_abl = min(args.ablation, len(texts))
    if n_abl:
        ref_a = ref[:n_abl]
        every = tuple(s for subs in KINDS.values() for s in subs)

        def row(label: str, graph: Any) -> None:
            c = _cos(embed(rlx.compile(graph, target="cpu"), n_abl), ref_a)
            abl.append([label, f"{c.min():.4f}", f"{c.mean():.5f}"])
            say(f"ablation {label}: mean {c.mean():.5f} min {c.min():.4f}")

        for kind, subs in KINDS.items():  # per tensor, where the error is large
            others = tuple(s for s in every if s not in subs)
            row(f"int8 per-tensor, only {kind} quantized",
                ptq.quantize_dynamic(g_acc, granularity="tensor", keep_f32=others).graph)
        row("int8 per-token, q/k/v kept f32",
            ptq.quantize_dynamic(g_acc, granularity="token", keep_f32=KINDS["q, k, v"]).graph)
        row("int8 per-token, per-tensor weight scales",
            ptq.quantize_dynamic(g_acc, granularity="token", per_channel=False).graph)
        for group, zp, search in ((32, False, False), (32, False, True), (32, True, False),
                                  (128, False, True), (128, True, True)):
            row(f"int4 g{group}{' zero points' if zp else ''}"
                f"{', searched ranges' if search else ', min-max ranges'}",
                ptq.quantize_int4_weights(g_acc, group=group, zero_point=zp,
                                          search=search).graph)

    def report(rows: list[list[Any]], timing: dict[int, Any], note: str) -> None:
        info = {**end_of_run(machine()), "isa": isa(), "threads": threads, "clock": args.clock,
                "int8_dot_kernel": isa_here(),
                "onnxruntime": ort.__version__, "load_average_1m_start": load0,
                "accuracy_pass_s": round(acc_s, 1),
                "total_s": round(time.perf_counter() - t_start)}
        cos_rows = [[k, f"{v['min']:.4f}", f"{v['p01']:.4f}", f"{v['mean']:.5f}", v["n"]]
                    for k, v in cos_stats.items()]
        md = (f"# all-MiniLM-L6-v2 quantized: rlx int8 / int4 against ONNX Runtime "
              f"quantize_dynamic\n\n"
              f"Command: `python benchmarks/bench_quant_minilm.py {' '.join(sys.argv[1:])}`. "
              f"Machine: {info['cpu']} (ISA: {info['isa']}; {info['cores']} cores), "
              f"{threads} thread(s) per peer, "
              + ("p50 CPU time of the calling thread per call (every peer computes on it "
                 "alone), " if args.clock == "thread" else "p50 wall time per call, ")
              + f"int8 micro-kernel here: {info['int8_dot_kernel']}, onnxruntime "
              f"{ort.__version__}; 1-minute load average {load0} at the start and "
              f"{info['load_average_1m']} at the end (a shared machine: timings are "
              f"contended); {placement_text(info)}; accuracy pass {acc_s:.0f} s, whole run "
              f"{info['total_s']} s.\n\n"
              f"## Cosine to f32 ({len(texts)} generated sentences, {bsz} a call padded to "
              f"{seq_acc} tokens, each quantized model against its own f32 model)\n\n"
              f"rlx-int8: per-channel i8 weights, per-token dynamic i8 activations, "
              f"{ptq.fast_bits('token')}-bit codes (ptq.fast_bits: 7 on AVX2 without VNNI); "
              "rlx-int8-8bit: the same with 8-bit codes; "
              f"rlx-int8-static: static PTQ, per-channel i8 weights ({static_bits[0]}-bit "
              f"codes), u8 asymmetric activations ({static_bits[1]}-bit) "
              f"with fixed per-tensor parameters from {args.static_method} calibration over "
              f"{args.calibration} other sentences, folded into static_int_linear (one kernel "
              "a linear) (rlx-int8-static-METHOD: the same with METHOD "
              "calibration; -wWaA: W-bit weights, A-bit activations; -mixed: widths per "
              f"layer, weights {MIXED_STATIC[0]}, activations {MIXED_STATIC[1]}); "
              f"rlx-int8-mixed: dynamic with weights {MIXED_DYNAMIC[0]}, activations "
              f"{MIXED_DYNAMIC[1]} bits (ptq.layer_bits: the first key in the weight's name); "
              "rlx-int8-tensor: one activation scale per call (as ONNX Runtime's "
              f"DynamicQuantizeLinear); rlx-int4-g{INT4_GROUP}: weight-only int4, groups of "
              f"{INT4_GROUP} with zero points, searched ranges.\n\n"
              + (markdown_table(["model", "min", "1st percentile", "mean", "sentences"],
                                cos_rows) if cos_rows else "(not run here: --models none)\n")
              + (f"\n## Ablation (first {n_abl} sentences): where the error enters, what "
                 f"each choice does\n\n"
                 + markdown_table(["variant", "min cosine", "mean cosine"], abl) if abl
                 else "")
              + f"\n## Time per call (seq {SEQ_SPEED}, median ms, {args.clock} clock) {note}\n\n"
              + markdown_table(["batch", "peer", "ms", "speed vs ort-int8",
                                "speed vs rlx-f32"], rows) + "\n")
        print(md)
        if not args.no_write:
            stem = f"quant_minilm-{cpu_slug(info['cpu'])}" + (
                "-threadcpu" if args.clock == "thread" else "") + (
                f"-{args.tag}" if args.tag else "")
            write_results(stem, {"machine": info, "cosine": cos_stats,
                                                   "ablation": abl, "ms": timing}, md)

    # ---- speed -------------------------------------------------------------------------------
    rows: list[list[Any]] = []
    timing: dict[int, Any] = {}
    report(rows, timing, "(not measured yet)" if not args.no_speed else "(not run: --no-speed)")
    for batch in () if args.no_speed else (1, 8):
        ids, mask, types = token_batch(model, batch)
        g = graphs(batch, SEQ_SPEED)
        # static PTQ observes the timed batch itself here (its speed, not its accuracy)
        timed = set(args.speed_peers.split(",")) | {"rlx-int8", "ort-int8", "rlx-f32"}
        exe = {k: rlx.compile(quantized(g, k, [(ids, mask, types)]), target="cpu")
               for k in ("rlx-int8", "rlx-int8-8bit", "rlx-int8-static", f"rlx-int4-g{INT4_GROUP}",
                         "rlx-f32", *sorted(t for t in timed if t.endswith("mixed")))
               if k in timed}
        feed = {"ids": ids.astype(np.int64), "mask": mask.astype(np.int64),
                "types": types.astype(np.int64)}
        t_in = (ids, mask, types)
        peers: dict[str, Any] = {k: (lambda e=e, a=t_in: e(*a)) for k, e in exe.items()}
        for k in ("ort-int8", "ort-f32"):
            if k in timed:
                peers[k] = lambda f=feed, k=k: sess[k].run(None, f)
        cpu: dict[str, Any] = {}
        stats = interleaved(peers, runs=args.runs, warmup=3, block=5, settle_s=SETTLE_S,
                            thread_cpu=cpu)
        stats = cpu if args.clock == "thread" else stats
        timing[batch] = {k: s.p50 * 1e3 for k, s in stats.items()}
        for k, s in stats.items():
            rows.append([batch, k, f"{s.p50 * 1e3:.1f}",
                         f"{stats['ort-int8'].p50 / s.p50:.2f}x",
                         f"{stats['rlx-f32'].p50 / s.p50:.2f}x"])
        if batch == 1 and not args.no_write:  # what is measured so far, if the run is cut
            report(rows, timing, "(batch 8 still running)")
    report(rows, timing, "")


if __name__ == "__main__":
    main()
