"""Where all-MiniLM-L6-v2 spends its time: rlx's kernels against ONNX Runtime's nodes.

rlx side: ``MiniLM.compiled(batch, seq, "cpu")`` compiled in profiling mode
(``RLX_CPU_PROFILE=thread``: each kernel call's thread CPU time), grouped by the kernel's
implementation label and the ops of its nodes. ONNX Runtime side: bench_minilm's TorchScript
export of the same model (sentence-transformers' BertModel + mean pooling + normalisation) with
the session's own per-node profile (``SessionOptions.enable_profiling``), grouped by op type.
1 thread each (``--threads`` for more), the same token ids, ``--runs`` calls after one warm-up
call; each kernel's (node's) fastest call is kept, which leaves most of a loaded machine's
preemptions out. Times are per call, in ms. The GEMMs (rlx ``sgemm`` kernels, ORT ``MatMul`` /
``FusedMatMul`` / ``Gemm``) are summed apart from everything else: the non-GEMM rest is what
the attention, norm and elementwise kernels own.

    python benchmarks/profile_minilm.py --batch 1 --seq 128
    python benchmarks/profile_minilm.py --batch 8 --write

``--write`` also writes results/profile-minilm-b<batch>-s<seq>[-t<threads>]-<cpu> (.md and
.json, CPU model and ISA inside).
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

# (name, group, ms of its fastest call, description)
Row = tuple[str, str, float, str]

# what counts as a matrix product on either side
ORT_GEMMS = ("MatMul", "FusedMatMul", "Gemm", "MatMulNBits")


def _is_gemm_rlx(group: str) -> bool:
    return "sgemm" in group or "gemv" in group or "blas" in group


def _rlx(model: Any, inputs: tuple[Any, ...], runs: int) -> list[Row]:
    """rlx's kernels in execution order."""
    from benchmarks.kernel_profile import rlx_kernel_times

    os.environ["RLX_CPU_PROFILE"] = "thread"  # CPU time per kernel
    b, s = inputs[0].shape
    exe = model.compiled(b, s, "cpu")
    best, impl = rlx_kernel_times(exe, inputs, runs)
    lir = exe.lir
    rows: list[Row] = []
    for k in lir.kernels:
        last = k.nodes[-1]
        ins = [list(lir.type_of(i).shape) for i in k.nodes[0].inputs[:2]]
        rows.append((k.name, f"{impl[k.name]} [{'+'.join(n.op for n in k.nodes)}]",
                     best[k.name] * 1e3, f"{last.op}{list(last.type.shape)} <- {ins}"))
    return rows


def _ort(path: str, feeds: dict[str, Any], runs: int, threads: int) -> list[Row]:
    """ONNX Runtime's nodes in execution order."""
    from benchmarks.kernel_profile import event_shape, ort_node_times

    return [(name, op, ms, f"{op}{event_shape(args)}")
            for name, (op, ms, args) in ort_node_times(path, feeds, runs, threads).items()]


def _show(side: str, rows: list[Row], top: int, what: str, gemm: Any) -> None:
    groups: dict[str, float] = defaultdict(float)
    for r in rows:
        groups[r[1]] += r[2]
    total = sum(groups.values())
    g = sum(v for k, v in groups.items() if gemm(k))
    print(f"== {side}: {total:.2f} ms per call ({what}): GEMMs {g:.2f} ms, the rest "
          f"{total - g:.2f} ms")
    for k, v in sorted(groups.items(), key=lambda kv: -kv[1]):
        print(f"  {v:8.3f} ms  {'G ' if gemm(k) else '  '}{k}")
    print("  -- top")
    for r in sorted(rows, key=lambda r: -r[2])[:top]:
        print(f"  {r[2]:8.3f} ms  {r[0]} {r[3]}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--top", type=int, default=15)
    ap.add_argument("--write", action="store_true",
                    help="also write results/profile-minilm-b<batch>-s<seq>-<cpu>.md/.json")
    args = ap.parse_args(argv)
    from benchmarks.common import limit_threads

    limit_threads(args.threads)
    import numpy as np
    import torch
    from sentence_transformers import SentenceTransformer

    from benchmarks.bench_minilm import export_onnx, token_batch, torch_module
    from rlx_core.models.minilm import MiniLM

    model = MiniLM.load()
    inputs = token_batch(model, args.batch, args.seq)
    st = SentenceTransformer(str(model.folder), device="cpu")
    module = torch_module(torch, st)
    ex = tuple(torch.from_numpy(a.astype(np.int64)) for a in token_batch(model, 2))
    path, why = export_onnx(torch, module, ex, tempfile.mkdtemp(), dynamo=False)
    if path is None:
        raise SystemExit(f"ONNX export failed: {why}")
    feeds = {n: a.astype(np.int64) for n, a in zip(("ids", "mask", "types"), inputs,
                                                     strict=True)}
    what = f"batch {args.batch}, seq {args.seq}, {args.threads} thread(s)"
    mine = _rlx(model, inputs, args.runs)
    theirs = _ort(path, feeds, args.runs, args.threads)
    text = io.StringIO()
    with contextlib.redirect_stdout(text):
        _show("rlx", mine, args.top, what, _is_gemm_rlx)
        _show("onnxruntime", theirs, args.top, what, lambda k: k in ORT_GEMMS)
    print(text.getvalue(), end="")
    if args.write:
        from benchmarks.kernel_profile import write_profile

        write_profile("profile_minilm", f"profile-minilm-b{args.batch}-s{args.seq}" + (
            f"-t{args.threads}" if args.threads != 1 else ""), f"all-MiniLM-L6-v2, {what}",
            "G marks the GEMM groups", args.runs, text.getvalue(),
            {"batch": args.batch, "seq": args.seq, "threads": args.threads, "runs": args.runs,
             "rlx": list(mine), "onnxruntime": list(theirs)}, argv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
