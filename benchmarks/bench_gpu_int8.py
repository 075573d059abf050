"""int8 against f32 on the GPU targets that run int8 (gpu_common/int8.py), side by side.

Two workloads, each as int8 and as f32 on the same target and device:

- ``gemm``: a 128x384 by 384x384 linear (MiniLM's hidden size at 128 tokens): f32 ``x @ W.T``
  against ``int_linear`` (i8 x i8 -> i32), on the packed-dot path (WGSL ``dot4I8Packed`` /
  SPIR-V ``OpSDot``) and the i32 path (unpacked bytes) where the target has both; with the
  weights a parameter (prepacked into words once, when uploaded) and a call input (packed
  while staging, in every call: what every int8 weight cost before the prepack);
- ``mlp``: the MNIST MLP 784-512-512-10 at batch 32 (random weights: speed only), f32
  against its static PTQ graph (quantize -> int_linear -> requantize -> ... -> dequantize).

The GPUs here are software (Mesa lavapipe for webgpu and vulkan, on the CPU): these figures
say what the kernels cost on a CPU-emulated GPU, not on a GPU. lavapipe reports
``integerDotProduct8BitSignedAccelerated = false``. Per call, interleaved turns, p50 of the
process CPU time (lavapipe's worker threads run in this process, so the figure counts the
shader work but not the time slices other processes take on a shared machine) and of the
wall time.
Every int8 result is checked bit for bit against the numpy reference before timing. Run:

    python benchmarks/bench_gpu_int8.py [--targets webgpu,vulkan] [--runs 7]

writes ``results/gpu_int8-<cpu>-<targets>.md`` (one file per target list, so a loaded
machine can measure the targets in separate runs of a few minutes each).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import (  # noqa: E402
    cpu_slug,
    end_of_run,
    fmt_ms,
    isa,
    machine,
    markdown_table,
    say,
    stamp,
    write_results,
)

PACKED = {"webgpu": "wgsl-packed-4x8-integer-dot-product", "vulkan": "shader-integer-dot-product"}


def _holder(target: str) -> Any:
    import rlx_core as rlx

    t = rlx.api.get_target(target)
    return t.runtime() if target == "webgpu" else t.device()


def _compile(fn: Any, args: list[np.ndarray], target: str, packed: bool) -> Any:
    """``fn`` compiled for ``target`` on the packed-dot path or (hiding the device feature
    from the dialect choice, as tests/targets/test_gpu_int8.py does) the i32 path."""
    import rlx_core as rlx

    holder = _holder(target)
    saved = holder.info
    if not packed:
        holder.info = dataclasses.replace(saved, features=tuple(
            f for f in saved.features if f != PACKED.get(target)))
    try:
        exe = fn if hasattr(fn, "nodes") else None
        return rlx.compile(exe, target=target) if exe is not None else \
            rlx.compile(fn, *args, target=target)
    finally:
        holder.info = saved


def _paths(target: str) -> list[bool]:
    """The int8 paths this device has: packed-dot (True) where it has the feature, and i32."""
    return [True, False] if PACKED.get(target) in _holder(target).info.features else [False]


def _peers(target: str, f32: tuple[str, Any, list[np.ndarray]],
           int8: list[tuple[str, Any, list[np.ndarray]]], want: np.ndarray,
           ) -> tuple[dict[str, Any], list[str]]:
    """The f32 peer, then each int8 variant on each int8 path, every int8 output checked bit
    for bit against ``want`` before it is timed."""
    peers: dict[str, Any] = {}
    notes = []
    name, fn, fargs = f32
    ef = _compile(fn, fargs, target, True)
    peers[name] = lambda: ef(*fargs)
    for packed in _paths(target):
        for name, fn, args in int8:
            e = _compile(fn, args, target, packed)
            ok = bool(np.array_equal(e(*args), want))
            label = f"{name} ({'packed-dot' if packed else 'i32'})"
            notes.append(f"{label}: bit-exact {ok}")
            if not ok:
                raise SystemExit(f"{target} {label} differs from the reference")
            peers[label] = (lambda e=e, args=args: e(*args))
    return peers, notes


def gemm_peers(target: str, rng: np.random.Generator) -> tuple[dict[str, Any], list[str]]:
    """The linear: int8 with the weights a parameter (prepacked once, when uploaded) and with
    the weights a call input (packed while staging, in every call)."""
    import rlx_core as rlx
    from rlx_core import quant as Q

    m, k, n = 128, 384, 384
    xf = rng.normal(size=(m, k)).astype(np.float32)
    wf = (rng.normal(size=(n, k)) * 0.05).astype(np.float32)
    xq = rng.integers(-127, 127, (m, k), endpoint=True).astype(np.int8)
    wq = rng.integers(-127, 127, (n, k), endpoint=True).astype(np.int8)
    want = xq.astype(np.int64) @ wq.astype(np.int64).T
    return _peers(target, ("f32 linear", lambda x: rlx.nn.linear(x, wf), [xf]),
                  [("int8 int_linear", lambda x: Q.int_linear(x, wq), [xq]),
                   ("int8 int_linear, weights packed per call",
                    lambda x, w: Q.int_linear(x, w), [xq, wq])], want)


def mlp_peers(target: str, rng: np.random.Generator) -> tuple[dict[str, Any], list[str]]:
    import rlx_core as rlx
    from rlx_core.models.mlp import init_mlp, mlp_logits
    from rlx_core.quant import ptq

    params = init_mlp((784, 512, 512, 10), seed=1)
    x = rng.uniform(0, 1, (32, 784)).astype(np.float32)
    g = rlx.trace(lambda a: mlp_logits(params, a), x)
    q = ptq.quantize_static(g, data=[rng.uniform(0, 1, (32, 784)).astype(np.float32)],
                            target="numpy")
    want = rlx.compile(q.graph, target="numpy")(x)
    return _peers(target, ("f32 MLP", g, [x]), [("int8 MLP", q.graph, [x])], want)


def timed(peers: dict[str, Any], runs: int, warmup: int) -> dict[str, dict[str, float]]:
    """Per peer, p50 of the process CPU time and of the wall time per call, in turns that
    rotate through the peers (load that drifts over the run reaches all of them)."""
    import statistics
    import time

    for fn in peers.values():
        for _ in range(warmup):
            fn()
    cpu: dict[str, list[float]] = {n: [] for n in peers}
    wall: dict[str, list[float]] = {n: [] for n in peers}
    names = list(peers)
    for r in range(runs):
        for name in names[r % len(names):] + names[:r % len(names)]:
            c0, t0 = time.process_time(), time.perf_counter()
            peers[name]()
            wall[name].append(time.perf_counter() - t0)
            cpu[name].append(time.process_time() - c0)
    return {n: {"cpu_p50": statistics.median(cpu[n]), "wall_p50": statistics.median(wall[n]),
                "runs": runs} for n in names}


def main() -> None:
    import rlx_core as rlx

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--targets", default="webgpu,vulkan")
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--warmup", type=int, default=3)
    args = ap.parse_args()
    mach = machine()
    mach["isa"] = isa()
    say(stamp(mach))
    rows: list[list[Any]] = []
    data: dict[str, Any] = {"machine": mach, "runs": args.runs, "results": {}}
    for target in args.targets.split(","):
        ok, why = rlx.api.get_target(target).available()
        if not ok:
            say(f"{target}: unavailable ({why})")
            continue
        dev = _holder(target).info
        for work, make in (("gemm 128x384x384", gemm_peers), ("MNIST MLP b32", mlp_peers)):
            peers, notes = make(target, np.random.default_rng(0))
            say(f"{target} {work}: " + "; ".join(notes))
            stats = timed(peers, args.runs, args.warmup)
            base = next(iter(stats.values()))["cpu_p50"]
            for name, st in stats.items():
                rows.append([target, dev.name, work, name, fmt_ms(st["cpu_p50"]),
                             fmt_ms(st["wall_p50"]), f"{base / st['cpu_p50']:.2f}x"])
                data["results"][f"{target}/{work}/{name}"] = st
                say(f"  {name}: CPU p50 {fmt_ms(st['cpu_p50'])} ms, wall "
                    f"{fmt_ms(st['wall_p50'])} ms ({base / st['cpu_p50']:.2f}x f32 by CPU)")
    end_of_run(mach)
    md = ["# int8 vs f32 on the GPU targets (software GPUs)", "",
          stamp(mach), "",
          "`python benchmarks/bench_gpu_int8.py " +
          f"--targets {args.targets} --runs {args.runs} --warmup {args.warmup}`; per call, "
          "p50 over interleaved "
          "turns of the process CPU time (lavapipe's threads included) and the wall time. "
          "The devices are Mesa lavapipe (a Vulkan implementation on the CPU): the ratios say "
          "what the shaders cost there, not on a GPU. Every int8 output was bit-exact with "
          "the numpy reference before timing.", "",
          markdown_table(["target", "device", "workload", "peer", "CPU ms (p50)",
                          "wall ms (p50)", "f32 / this (CPU)"], rows)]
    # one file per target list: a loaded machine measures the targets in separate runs
    stem = f"gpu_int8-{cpu_slug(mach['cpu'])}-{args.targets.replace(',', '-')}"
    js, mdp = write_results(stem, data, "\n".join(md))
    say(f"wrote {js} and {mdp}")


if __name__ == "__main__":
    main()
