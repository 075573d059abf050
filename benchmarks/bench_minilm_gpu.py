"""all-MiniLM-L6-v2 (real weights) on every GPU target of the shared renderer, side by side.

The GPUs here are software (Mesa lavapipe/llvmpipe, PoCL on the CPU), so these are reports,
not goals: compile time (render + driver builds), per-call time (interleaved turns, p50),
the largest difference from the numpy target on the same batch, and each target's driver
(device name and API version as the live device reports them). For OpenCL the results say
whether the device offers doubles (``cl_khr_fp64``): the OpenCL target claims f64 (as
``double``) only where it does, else refuses it (RLX-L002). Run:

    python benchmarks/bench_minilm_gpu.py [--targets webgpu,opencl,opengl,vulkan,directx]
    python benchmarks/bench_minilm_gpu.py --targets vulkan,directx --merge  # keep other rows

``--merge`` keeps the rows of targets not run this time from the committed results (the
table says which run, and under what load, each row came from), so a loaded machine can
measure the targets in parts of under ten minutes each.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import (  # noqa: E402
    RESULTS,
    end_of_run,
    fmt_ms,
    interleaved,
    machine,
    markdown_table,
    placement_text,
    say,
    write_results,
)

TEXTS = ["The quick brown fox jumps over the lazy dog.",
         "A compiler turns a model into kernels.", "hi",
         "Sentence embeddings map text to vectors; similar meanings land close together."]


def driver(exe: Any) -> dict[str, Any]:
    """The device and API version the target's runtime opened (what the numbers ran on)."""
    info = exe.program.info
    out = {"device": str(info.get("device") or info.get("adapter") or ""),
           "backend": str(info.get("backend", ""))}
    dev = getattr(info.get("runtime"), "dev", None)
    feats = getattr(getattr(dev, "info", None), "features", ())
    if "cl_khr_fp64" in feats or exe.target == "opencl":
        out["cl_khr_fp64"] = "cl_khr_fp64" in feats
    return out


def _previous() -> dict[str, Any]:
    path = RESULTS / "minilm_gpu.json"
    return json.loads(path.read_text()) if path.exists() else {}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--targets", default="webgpu,opencl,opengl,vulkan,directx")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--merge", action="store_true",
                    help="keep the committed rows of targets not run this time")
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import numpy as np

    from rlx_core import api
    from rlx_core.models import minilm as ml
    from rlx_core.targets.registry import get_target

    model = ml.MiniLM.load()
    ids, mask, types = model.tokenize(TEXTS)
    want = np.asarray(model.compiled(*ids.shape, target="numpy")(ids, mask, types))
    run_machine = machine()
    data: dict[str, Any] = {"machine": run_machine, "batch": list(ids.shape), "targets": {}}
    peers = {}
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
        drv = driver(exe)
        say(f"{name}: compile + first call {compile_s:.1f} s, max |diff| vs numpy {err:.2e}, "
            f"{drv}")
        data["targets"][name] = {"compile_and_first_call_s": compile_s, "max_abs_diff": err,
                                 "driver": drv}
        peers[name] = (lambda e=exe: e(ids, mask, types))
    # the first call above compiled and warmed every program: no further warm-up calls
    stats = interleaved(peers, runs=args.runs, warmup=0)
    end_of_run(run_machine)  # the load and the CPUs' placement at the end of the run
    for name, st in stats.items():
        data["targets"][name]["call"] = st
        data["targets"][name]["machine"] = run_machine
    if args.merge:
        for name, row in _previous().get("targets", {}).items():
            if name not in data["targets"] and "call" in row:
                data["targets"][name] = row
    rows = []
    for name, d in data["targets"].items():
        if "call" not in d:
            continue
        st, drv, m = d["call"], d.get("driver", {}), d.get("machine", run_machine)
        st = st if isinstance(st, dict) else st.__dict__
        fp64 = "" if "cl_khr_fp64" not in drv else \
            f"; cl_khr_fp64 {'yes' if drv['cl_khr_fp64'] else 'no'}"
        rows.append([name, f"{drv.get('device', '')} ({drv.get('backend', '')}){fp64}",
                     f"{d['compile_and_first_call_s']:.1f}", fmt_ms(st["p50"]),
                     fmt_ms(st["p10"]), fmt_ms(st["p90"]), str(st["runs"]),
                     f"{d['max_abs_diff']:.1e}", f"{m['when']}, load {m['load_average_1m']}"])
    m = run_machine
    md = (f"# MiniLM-L6-v2 on the GPU targets (software drivers)\n\n"
          f"Batch {ids.shape[0]} x {ids.shape[1]} tokens, real weights. {m['cpu']}, "
          f"{m['cores']} cores ({m['machine']}), {placement_text(m)}, "
          f"a machine shared with other jobs (the load "
          f"average of each row's run is in its last column). Per call: interleaved turns "
          f"of all targets of one run, p50/p10/p90 over the runs. Command: "
          f"`python benchmarks/bench_minilm_gpu.py` (`--targets ... --merge` per part)."
          f"\n\n" + markdown_table(["target", "driver (device, API)",
                                    "compile + first call (s)", "call p50 (ms)", "p10",
                                    "p90", "runs", "max abs diff vs numpy", "run"], rows)
          + "\nMiniLM runs in f32 on every target; the OpenCL row says whether the device "
            "offers doubles (cl_khr_fp64), which the OpenCL dialect uses for f64 graphs.\n")
    js, mdp = write_results("minilm_gpu", data, md)
    say(md)
    say(f"wrote {js} and {mdp}")


if __name__ == "__main__":
    main()
