"""all-MiniLM-L6-v2 (real weights) on every GPU target of the shared renderer, side by side.

The GPUs here are software (Mesa lavapipe/llvmpipe, PoCL on the CPU), so these are reports,
not goals: compile time (render + driver builds), per-call time (interleaved turns, p50),
and the largest difference from the numpy target on the same batch. Run:

    python benchmarks/bench_minilm_gpu.py [--targets webgpu,opencl,opengl,vulkan,directx]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import (  # noqa: E402
    fmt_ms,
    interleaved,
    machine,
    markdown_table,
    say,
    write_results,
)

TEXTS = ["The quick brown fox jumps over the lazy dog.",
         "A compiler turns a model into kernels.", "hi",
         "Sentence embeddings map text to vectors; similar meanings land close together."]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--targets", default="webgpu,opencl,opengl,vulkan,directx")
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import numpy as np

    from rlx_core import api
    from rlx_core.models import minilm as ml
    from rlx_core.targets.registry import get_target

    model = ml.MiniLM.load()
    ids, mask, types = model.tokenize(TEXTS)
    want = np.asarray(model.compiled(*ids.shape, target="numpy")(ids, mask, types))
    rows, data, peers = [], {"machine": machine(), "batch": list(ids.shape), "targets": {}}, {}
    for name in args.targets.split(","):
        ok, why = get_target(name).available()
        if not ok:
            say(f"{name}: unavailable ({why})")
            data["targets"][name] = {"unavailable": why}
            continue
        t0 = time.perf_counter()
        exe = api.compile(model.encode_fn(), ids, mask, types, target=name)
        got = np.asarray(exe(ids, mask, types))
        compile_s = time.perf_counter() - t0
        err = float(np.abs(got - want).max())
        say(f"{name}: compile + first call {compile_s:.1f} s, max |diff| vs numpy {err:.2e}")
        data["targets"][name] = {"compile_and_first_call_s": compile_s, "max_abs_diff": err}
        peers[name] = (lambda e=exe: e(ids, mask, types))
    stats = interleaved(peers, runs=args.runs, warmup=1)
    for name, st in stats.items():
        d = data["targets"][name]
        d["call"] = st
        rows.append([name, f"{d['compile_and_first_call_s']:.1f}", fmt_ms(st.p50),
                     fmt_ms(st.p10), fmt_ms(st.p90), f"{d['max_abs_diff']:.1e}"])
    m = data["machine"]
    md = (f"# MiniLM-L6-v2 on the GPU targets (software drivers)\n\n"
          f"Batch {ids.shape[0]} x {ids.shape[1]} tokens, real weights. {m['cpu']}, "
          f"{m['cores']} cores ({m['machine']}), load average {m['load_average_1m']} "
          f"(a shared machine), {m['when']}. Command: `python benchmarks/bench_minilm_gpu.py`."
          f"\n\n" + markdown_table(["target", "compile + first call (s)", "call p50 (ms)",
                                    "p10", "p90", "max abs diff vs numpy"], rows))
    js, mdp = write_results("minilm_gpu", data, md)
    say(md)
    say(f"wrote {js} and {mdp}")


if __name__ == "__main__":
    main()
