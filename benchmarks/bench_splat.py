"""3D Gaussian splatting: rlx.splat on cpu and webgpu against a PyTorch CPU reference.

Peers, in this one process, on the same random scene and camera:

- ``rlx-cpu``: ``rlx.splat.render`` compiled for cpu (generated C; the rasterizer
  and its VJP share tiles over ``--threads`` team threads);
  forward+backward is ``rlx.value_and_grad`` of ``sum(render * G)`` for means, quats, scales,
  opacities and SH (the ops' VJP kernels);
- ``rlx-webgpu``: the same two functions compiled for webgpu (WGSL on wgpu; Mesa lavapipe, a
  CPU Vulkan driver, where there is no GPU);
- ``torch``: benchmarks/splat_torch.py, the same equations in PyTorch (CPU, ``--threads``
  intra-op threads), backward by autograd. gsplat's own PyTorch rasterizer needs CUDA.

Before timing, every peer's image is checked against rlx-cpu's (max abs difference). p50 of
interleaved turns (benchmarks/common.py). Then a fit: ``--fit-gaussians`` random Gaussians
fitted with Adam to ``--fit-views`` views of a procedural scene, PSNR over all views before
and after ``--fit-steps`` steps (rlx-cpu).

    python benchmarks/bench_splat.py                   # 1e4 and 1e5 Gaussians, 256 and 512
    python benchmarks/bench_splat.py --quick           # 2,000 Gaussians at 128, nothing written

Writes results/splat-<cpu>.json and .md (CPU model and ISA inside).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
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
    result_stem,
    say,
    stamp,
    torch_threads,
    write_results,
)


def scene_args(n: int, size: int) -> tuple[Any, ...]:
    from rlx_core.splat import scene

    g = scene.random_gaussians(n, 3, seed=0, extent=1.0, scale=0.6 / n ** (1 / 3))
    return (*g.arrays(), scene.orbit(30.0, 20.0, 3.2), scene.intrinsics(size, size))


def case(n: int, size: int, runs: int, budget_s: float, webgpu: str = "all",
         warmup: int = 1, torch_peer: bool = True,
         save: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
    import numpy as np
    import torch

    import rlx_core as rlx
    from benchmarks import splat_torch as ts
    from rlx_core.targets.registry import get_target

    args = scene_args(n, size)
    gimg = np.random.default_rng(1).normal(size=(size, size, 3)).astype(np.float32)

    def render(*a):
        return rlx.splat.render(*a, width=size, height=size)

    def loss(m, q, s, o, sh, v, k, g):
        return (render(m, q, s, o, sh, v, k) * g).sum()

    vg = rlx.value_and_grad(loss, argnums=(0, 1, 2, 3, 4))
    t0 = time.perf_counter()
    cpu_f = rlx.jit(render, target="cpu")
    cpu_fb = rlx.jit(lambda *a: (lambda v, gr: (v, *gr))(*vg(*a)), target="cpu")
    ref = np.asarray(cpu_f(*args))
    cpu_fb(*args, gimg)
    out: dict[str, Any] = {"gaussians": n, "size": size, "compile_s": time.perf_counter() - t0,
                           "visible": int((np.asarray(rlx.splat.project(
                               *args, width=size, height=size))[:, 6] > 0).sum())}
    tt = ts.tensors(args[:5])
    view, K = (torch.tensor(x) for x in args[5:])
    g_t = torch.tensor(gimg)

    def torch_f():
        with torch.no_grad():
            return ts.render(*tt, view, K, size, size)

    def torch_fb():
        for t in tt:
            t.grad = None
        (ts.render(*tt, view, K, size, size) * g_t).sum().backward()

    say(f"  rlx-cpu compiled and ran in {out['compile_s']:.1f} s")
    fwd: dict[str, Any] = {"rlx-cpu": lambda: cpu_f(*args)}
    fb: dict[str, Any] = {"rlx-cpu": lambda: cpu_fb(*args, gimg)}
    if torch_peer:
        out["diff_torch"] = float(np.abs(torch_f().numpy() - ref).max())
        say(f"  torch checked: max diff {out['diff_torch']:.1e}")
        fwd["torch"], fb["torch"] = torch_f, torch_fb
    ok, why = get_target("webgpu").available()
    if webgpu == "none":
        ok, why = False, "left out (--webgpu none)"
    if ok:
        gpu_f = rlx.jit(render, target="webgpu")
        out["diff_webgpu"] = float(np.abs(np.asarray(gpu_f(*args)) - ref).max())
        fwd["rlx-webgpu"] = lambda: gpu_f(*args)
        say(f"  webgpu forward checked: max diff {out['diff_webgpu']:.1e}")
    if ok and webgpu == "all":
        gpu_fb = rlx.jit(lambda *a: (lambda v, gr: (v, *gr))(*vg(*a)), target="webgpu")
        want = [np.asarray(x) for x in cpu_fb(*args, gimg)[1:]]
        got = [np.asarray(x) for x in gpu_fb(*args, gimg)[1:]]
        out["grad_rel_diff_webgpu"] = max(float(np.abs(a - b).max() / (np.abs(b).max() + 1e-30))
                                          for a, b in zip(got, want, strict=True))
        fb["rlx-webgpu"] = lambda: gpu_fb(*args, gimg)
        say(f"  webgpu gradients checked: {out['grad_rel_diff_webgpu']:.1e} relative")
    if not ok:
        out["webgpu"] = why
    if runs > 1:
        out["forward"] = interleaved(fwd, runs, warmup, budget_s)
        out["forward_backward"] = interleaved(fb, runs, warmup, budget_s)
        return out
    # one timed call each (10^5 runs): each peer alone, and the case saved after each, so a
    # run cut by its time limit keeps the peers it timed (interleaving one call gains nothing)
    out["forward"], out["forward_backward"] = {}, {}
    for table, peers in (("forward", fwd), ("forward_backward", fb)):
        for name, fn in peers.items():
            out[table][name] = interleaved({name: fn}, 1, warmup)[name]
            say(f"  {table} {name}: {out[table][name].p50 * 1e3:.1f} ms")
            if save is not None:
                save(out)
    return out


def fit(gaussians: int, views: int, steps: int, size: int) -> dict[str, Any]:
    """Adam on raw parameters (log scales, logit opacities, SH degree 1); PSNR over views."""
    import numpy as np

    import rlx_core as rlx
    from rlx_core.splat import scene

    truth = scene.procedural_scene(4 * gaussians // 3, seed=0)
    K = scene.intrinsics(size, size, fov_deg=45)
    cams = [scene.orbit(360 * i / views, 30 * np.sin(4 * np.pi * i / views), 3.0)
            for i in range(views)]
    draw = rlx.jit(lambda *a: rlx.splat.render(*a, width=size, height=size), target="cpu")
    images = [np.asarray(draw(*truth.arrays(), c, K)) for c in cams]
    rng = np.random.default_rng(1)
    p = [rng.uniform(-0.9, 0.9, (gaussians, 3)).astype(np.float32) * np.float32([1, .4, 1]),
         rng.normal(size=(gaussians, 4)).astype(np.float32),
         np.full((gaussians, 3), np.log(0.04), np.float32), np.zeros(gaussians, np.float32),
         np.zeros((gaussians, 4, 3), np.float32)]
    lr = [4e-3, 1e-2, 1e-2, 5e-2, 2e-2]

    def image(m, q, ls, lo, sh, v, k):
        return rlx.splat.render(m, q, rlx.exp(ls), rlx.sigmoid(lo), sh, v, k, width=size,
                                height=size)

    vg = rlx.value_and_grad(lambda *a: ((image(*a[:7]) - a[7]) ** 2).mean(),
                            argnums=(0, 1, 2, 3, 4))
    step = rlx.jit(lambda *a: (lambda v, g: (v, *g))(*vg(*a)), target="cpu")
    show = rlx.jit(image, target="cpu")

    def psnr() -> float:
        mse = np.mean([np.mean((np.asarray(show(*p, c, K)) - im) ** 2)
                       for c, im in zip(cams, images, strict=True)])
        return float(10 * np.log10(1 / mse))

    m1 = [np.zeros_like(x) for x in p]
    m2 = [np.zeros_like(x) for x in p]
    history = [(0, psnr())]
    t0 = time.perf_counter()
    for it in range(1, steps + 1):
        i = int(rng.integers(views))
        _, *grads = step(*p, cams[i], K, images[i])
        for j, g in enumerate(grads):
            g = np.asarray(g)
            m1[j] = 0.9 * m1[j] + 0.1 * g
            m2[j] = 0.999 * m2[j] + 0.001 * g * g
            upd = (m1[j] / (1 - 0.9 ** it)) / (np.sqrt(m2[j] / (1 - 0.999 ** it)) + 1e-15)
            p[j] = (p[j] - lr[j] * upd).astype(np.float32)
        if it % max(1, steps // 5) == 0:
            history.append((it, psnr()))
    return {"gaussians": gaussians, "views": views, "steps": steps, "size": size,
            "psnr": history, "train_s": time.perf_counter() - t0}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gaussians", type=int, nargs="*", default=[10_000, 100_000])
    ap.add_argument("--sizes", type=int, nargs="+", default=[256, 512])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--budget", type=float, default=40.0, help="seconds per timing table")
    ap.add_argument("--warmup", type=int, default=1,
                    help="untimed calls per peer before the timed ones (the correctness checks "
                         "have already compiled and run each peer once; 0 fits 10^5 runs)")
    ap.add_argument("--fit-gaussians", type=int, default=2000)
    ap.add_argument("--fit-views", type=int, default=16)
    ap.add_argument("--fit-steps", type=int, default=300)
    ap.add_argument("--fit-size", type=int, default=64)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--no-fit", action="store_true")
    ap.add_argument("--webgpu", choices=("all", "forward", "none"), default="all",
                    help="which webgpu peers to time (lavapipe is slow on a shared CPU)")
    ap.add_argument("--no-torch", action="store_true",
                    help="leave the PyTorch peer out (10^5 runs: one results file per peer set)")
    ap.add_argument("--stem", default="splat", help="results file stem (before the CPU)")
    a = ap.parse_args()
    if a.quick:
        a.gaussians, a.sizes, a.runs, a.fit_steps, a.fit_gaussians = [2000], [128], 2, 30, 300
    limit_threads(a.threads)
    import torch

    torch_threads(torch, a.threads)
    cases: list[dict[str, Any]] = []
    info = machine()
    info["isa"] = isa()
    for n in a.gaussians:
        for size in a.sizes:
            say(f"{n} Gaussians at {size}x{size} ...")
            def partial(c: dict[str, Any]) -> None:
                report(a, info, [*cases, c], None)

            c = case(n, size, a.runs, a.budget, a.webgpu, a.warmup, not a.no_torch,
                     None if a.quick else partial)
            cases.append(c)
            say("  forward ms: " + ", ".join(f"{k} {v.p50 * 1e3:.1f}"
                                              for k, v in c["forward"].items()))
            say("  forward+backward ms: " + ", ".join(f"{k} {v.p50 * 1e3:.1f}" for k, v in
                                                       c["forward_backward"].items()))
            if not a.quick:  # after every case: a run cut short keeps what it measured
                report(a, info, cases, None)
    if not a.no_fit:
        say("fit ...")
        f = fit(a.fit_gaussians, a.fit_views, a.fit_steps, a.fit_size)
        say(f"  PSNR {f['psnr'][0][1]:.2f} -> {f['psnr'][-1][1]:.2f} dB in {f['steps']} steps")
        if not a.quick:
            report(a, info, cases, f)


def report(a: Any, info: dict[str, Any], cases: list[dict[str, Any]],
           f: dict[str, Any] | None) -> None:
    """Write results/<stem>-<cpu>.json and .md for what has run so far."""
    rows = []
    for c in cases:
        fw, fb = c["forward"], c["forward_backward"]
        gpu, gpu_b = fw.get("rlx-webgpu"), fb.get("rlx-webgpu")
        if "rlx-cpu" not in fw:
            continue  # saved before its first timing

        def ms(s: Any) -> str:
            return f"{s.p50 * 1e3:.1f}" if s else "n/a"

        def ratio(t: dict[str, Any]) -> str:
            return (f"{t['torch'].p50 / t['rlx-cpu'].p50:.2f}x" if "torch" in t and "rlx-cpu" in t
                    else "n/a")

        rows.append([c["gaussians"], f"{c['size']}x{c['size']}", c["visible"],
                     ms(fw["rlx-cpu"]), ms(fw.get("torch")), ratio(fw), ms(gpu),
                     ms(fb.get("rlx-cpu")), ms(fb.get("torch")), ratio(fb), ms(gpu_b),
                     f"{c.get('diff_torch', float('nan')):.1e}",
                     f"{c.get('diff_webgpu', float('nan')):.1e}",
                     f"{c.get('grad_rel_diff_webgpu', float('nan')):.1e}"])
    end_of_run(info)
    md = (f"# 3D Gaussian splatting: rlx.splat vs PyTorch (CPU)\n\n{stamp(info)}.\n\n"
          f"Threads: {a.threads} (rlx's rasterizer and its VJP share tiles over the team; "
          f"projection runs on one). p50 over "
          f"interleaved turns, ms. `python benchmarks/bench_splat.py "
          f"{' '.join(sys.argv[1:])}`.\n"
          f"webgpu runs on wgpu's adapter here (Mesa lavapipe: a CPU Vulkan driver, so its "
          f"times are CPU times, not a GPU's). Max diffs are against rlx-cpu's image; the "
          f"webgpu gradient diff is relative to the largest cpu gradient.\n\n"
          + markdown_table(["N", "image", "visible", "rlx-cpu fwd", "torch fwd", "torch/rlx",
                            "rlx-webgpu fwd", "rlx-cpu fwd+bwd", "torch fwd+bwd", "torch/rlx",
                            "rlx-webgpu fwd+bwd", "max diff torch", "max diff webgpu",
                            "grad diff webgpu"], rows)
          + ("" if f is None else
             f"\n## Fit\n\n{f['gaussians']} Gaussians (SH degree 1) fitted with Adam to "
             f"{f['views']} views ({f['size']}x{f['size']}) of a procedural scene, rlx-cpu, "
             f"{f['train_s']:.1f} s: PSNR by step "
             + ", ".join(f"{s}: {v:.2f} dB" for s, v in f["psnr"]) + "\n"))
    stem = result_stem(f"{a.stem}-{cpu_slug(info['cpu'])}", a.threads if a.threads != 1 else None,
                       SETTLE_S)
    js, mdp = write_results(stem, {"machine": info, "threads": a.threads, "cases": cases,
                                   "fit": f}, md)
    say(f"wrote {js} and {mdp}")


if __name__ == "__main__":
    main()
