"""all-MiniLM-L6-v2 in bf16 on the cpu: rlx's autocast pass against PyTorch's bf16 autocast.

rlx: the traced f32 encoder, ``rlx.quant.amp.autocast(g, "bf16")`` (every linear and matmul
in bf16 with f32 accumulation, softmax / layer norm / pooling in f32), compiled for cpu.
PyTorch: the sentence-transformers module under ``torch.autocast("cpu", torch.bfloat16)``.
Accuracy: cosine of each bf16 embedding to the f32 embedding of the same peer (rlx f32 for
rlx, torch f32 for torch) over ``--sentences`` generated sentences (bench_quant_minilm's),
seq 64, batch 8. Speed: median ms per call at batch 1 and 8, seq 128, the peers interleaved
in one process (common.interleaved), all on the cores this process may use. rlx's bf16 GEMM
takes the highest path the CPU has (rlx_core/targets/cpu/bf16gemm.py: AMX-BF16, AVX512-BF16,
float); each lower path this machine runs is timed as well (``rlx-bf16-<path>``, compiled with
``RLX_BF16_GEMM=<path>``; ``rlx-bf16-float`` is the float loop every bf16 GEMM ran before).
The results name the oneDNN matmul implementation PyTorch's bf16 linear ran (ONEDNN_VERBOSE).

    python benchmarks/bench_amp_minilm.py --sentences 64 --runs 10
    # writes results/amp_minilm-<cpu>.{md,json}
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import (  # noqa: E402
    SETTLE_S,
    command_text,
    cpu_slug,
    end_of_run,
    interleaved,
    isa,
    limit_threads,
    machine,
    markdown_table,
    say,
    stamp,
    torch_threads,
    write_results,
)

SEQ_SPEED = 128
SEQ_ACC = 64
ACC_BATCH = 8


def _cos(a: Any, b: Any) -> Any:
    import numpy as np

    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


@contextlib.contextmanager
def _bf16_path(path: str | None):
    """Compile under ``RLX_BF16_GEMM=path`` (None: the default, the highest path)."""
    before = os.environ.get("RLX_BF16_GEMM")
    if path is not None:
        os.environ["RLX_BF16_GEMM"] = path
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("RLX_BF16_GEMM", None)
        else:
            os.environ["RLX_BF16_GEMM"] = before


def _onednn_matmul(threads: int) -> str:
    """The oneDNN implementation of a bf16 linear under torch's cpu autocast (a subprocess with
    ONEDNN_VERBOSE=1), e.g. ``brg_matmul:avx10_1_512_amx``; "unknown" when none is printed."""
    code = (f"import torch\ntorch.set_num_threads({threads})\nx = torch.randn(128, 384)\n"
            "lin = torch.nn.Linear(384, 1536)\n"
            "with torch.inference_mode(), torch.autocast('cpu', dtype=torch.bfloat16):\n"
            "    lin(x)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, "ONEDNN_VERBOSE": "1"}, timeout=300).stdout
    for line in out.splitlines():
        parts = line.split(",")
        if len(parts) > 6 and parts[2] == "primitive" and parts[3] == "exec" and \
                parts[5] == "matmul":
            return parts[6]
    return "unknown"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sentences", type=int, default=256)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--batches", default="1,8", help="batch sizes timed (comma-separated)")
    ap.add_argument("--seq", type=int, default=SEQ_SPEED, help="sequence length timed")
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()
    threads = len(os.sched_getaffinity(0))
    limit_threads(threads)
    import numpy as np
    import torch
    from sentence_transformers import SentenceTransformer

    import rlx_core as rlx
    from benchmarks.bench_minilm import token_batch, torch_module
    from benchmarks.bench_quant_minilm import _fit, sentences
    from rlx_core.frontend.tracer import spec
    from rlx_core.models.minilm import MiniLM
    from rlx_core.quant import amp
    from rlx_core.targets.cpu import bf16gemm

    torch_threads(torch, threads)
    paths = bf16gemm.native_paths()
    info = {**machine(), "isa": isa(), "threads": threads, "torch": torch.__version__,
            "rlx_bf16_path": paths[0], "rlx_bf16_paths": list(paths),
            "torch_bf16_matmul": _onednn_matmul(threads)}
    model = MiniLM.load()
    st = SentenceTransformer(str(model.folder), device="cpu")
    module = torch_module(torch, st).eval()

    def rlx_pair(batch: int, seq: int, path: str | None = None) -> tuple[Any, Any]:
        g = rlx.trace(model.encode_fn(), *[spec((batch, seq), "i32")] * 3)
        with _bf16_path(path):
            low = rlx.compile(amp.autocast(g, "bf16"), target="cpu")
        return rlx.compile(g, target="cpu"), low

    def torch_run(bf16: bool, ids: Any, mask: Any, types: Any) -> Any:
        t = [torch.from_numpy(a.astype(np.int64)) for a in (ids, mask, types)]
        with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            return module(*t).float().numpy()

    texts = sentences(args.sentences)
    f32, b16 = rlx_pair(ACC_BATCH, SEQ_ACC)
    cos: dict[str, list[float]] = {"rlx bf16 autocast": [], "torch bf16 autocast": [],
                                   "rlx f32 vs torch f32": []}
    t0 = time.perf_counter()
    for i in range(0, len(texts), ACC_BATCH):
        chunk = texts[i:i + ACC_BATCH]
        chunk += [chunk[-1]] * (ACC_BATCH - len(chunk))
        n = min(ACC_BATCH, len(texts) - i)
        ids, mask, types = (_fit(a, SEQ_ACC) for a in model.tokenize(chunk))
        r32, r16 = np.asarray(f32(ids, mask, types)), np.asarray(b16(ids, mask, types))
        t32, t16 = torch_run(False, ids, mask, types), torch_run(True, ids, mask, types)
        cos["rlx bf16 autocast"] += list(_cos(r32, r16)[:n])
        cos["torch bf16 autocast"] += list(_cos(t32, t16)[:n])
        cos["rlx f32 vs torch f32"] += list(_cos(r32, t32)[:n])
    say(f"accuracy pass over {len(texts)} sentences in {time.perf_counter() - t0:.0f} s")
    cos_stats = {k: {"min": float(np.min(v)), "mean": float(np.mean(v)), "n": len(v)}
                 for k, v in cos.items()}

    rows, timing = [], {}
    for batch in [int(b) for b in args.batches.split(",") if b]:
        ids, mask, types = token_batch(model, batch, args.seq)
        e32, e16 = rlx_pair(batch, args.seq)
        a = (ids, mask, types)
        peers = {"rlx-bf16": lambda e=e16, a=a: e(*a),
                 "torch-bf16": lambda a=a: torch_run(True, *a),
                 "rlx-f32": lambda e=e32, a=a: e(*a),
                 "torch-f32": lambda a=a: torch_run(False, *a)}
        for p in paths[1:]:  # the lower bf16 GEMM paths of this machine
            low = rlx_pair(batch, args.seq, p)[1]
            peers[f"rlx-bf16-{p}"] = lambda e=low, a=a: e(*a)
        stats = interleaved(peers, runs=args.runs, warmup=1, block=1, settle_s=SETTLE_S)
        timing[batch] = {k: s.p50 * 1e3 for k, s in stats.items()}
        for k, s in stats.items():
            rows.append([batch, k, f"{s.p50 * 1e3:.1f}",
                         f"{stats['torch-bf16'].p50 / s.p50:.2f}x"])
    end_of_run(info)
    cos_rows = [[k, f"{v['min']:.5f}", f"{v['mean']:.6f}", v["n"]] for k, v in cos_stats.items()]
    md = (f"# all-MiniLM-L6-v2 in bf16 on the cpu: rlx autocast against PyTorch autocast\n\n"
          f"Command: `{command_text('benchmarks/bench_amp_minilm.py', None)}`. "
          f"Machine: {stamp(info)}; {threads} thread(s) per peer; torch {torch.__version__}. "
          f"rlx-bf16's GEMMs took the `{paths[0]}` path (rlx_core/targets/cpu/bf16gemm.py; this "
          f"machine runs {', '.join(paths)}; `float`: bf16 loads widened to float, f32 sums); "
          f"PyTorch's bf16 linear ran oneDNN `{info['torch_bf16_matmul']}`.\n\n"
          f"## Cosine to each peer's own f32 embedding ({len(texts)} generated sentences, "
          f"seq {SEQ_ACC})\n\n"
          + markdown_table(["pair", "min", "mean", "sentences"], cos_rows)
          + f"\n\n## Time per call (seq {args.seq}, median of {args.runs} interleaved calls, ms; "
            f"speed relative to torch bf16)\n\n"
          + markdown_table(["batch", "peer", "ms", "vs torch-bf16"], rows) + "\n")
    print(md)
    if not args.no_write:
        write_results(f"amp_minilm-{cpu_slug(info['cpu'])}",
                      {"machine": info, "cosine": cos_stats, "ms": timing}, md)


if __name__ == "__main__":
    main()
