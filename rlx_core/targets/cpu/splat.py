"""The CPU's splatting kernels: the four ops of ir/ops/splat.py kept whole, in f32.

Projection and its VJP are one loop over Gaussians (double inside, as the oracle). The
rasterizer bins once: one global sort by (depth, index), then each Gaussian appended to the
tiles its 3-sigma box touches, so every tile's list is already front to back. Then per tile::

    for j in tile's list (while some pixel is not done):       # Gaussians, front to back
        for p in the tile's 256 pixels:                         # the vector loop (omp simd)
            alpha = min(0.99, o exp(-sigma_p)); skip if sigma < 0 or alpha < 1/255
            stop the pixel if T (1 - alpha) <= 1e-4, else C += alpha T c; T *= 1 - alpha

The VJP runs that forward again for each pixel's T_final and last Gaussian, then walks the list
back to front with T_i = T_{i+1} / (1 - alpha_i) and the colour behind accumulated (gsplat's
recursion), summing each Gaussian's gradient over the tile's pixels in the vector loop.

Both rasterizer calls are team blocks (cpu/team.py): thread 0 bins, then the tiles are shared
out: claimed one at a time in the forward (tiles write disjoint pixels), tile t to thread
t % team in the VJP, whose threads add gradients into rows of their own, summed in thread
order at the end (deterministic for a given team size). Projection and its VJP run on one
thread. An allocation failure leaves the result NaN.
"""

from __future__ import annotations

from rlx_core.ir.graph import Node
from rlx_core.ir.ops.splat import SPLAT_OPS
from rlx_core.targets.c_common.expr import RenderError
from rlx_core.targets.c_common.kernels import KernelEnv
from rlx_core.targets.c_common.loops import Writer
from rlx_core.targets.cpu.splat_source import SOURCE
from rlx_core.targets.cpu.team import TEAM_BLOCK

IMPL = "rlx-splat"
DTYPES: tuple[str, ...] = ("f32",)
OPS = SPLAT_OPS

__all__ = ["IMPL", "DTYPES", "OPS", "SOURCE", "emit_splat"]


def _f(x: float) -> str:
    return f"{float(x)!r}f"


def emit_splat(env: KernelEnv, w: Writer, node: Node) -> str:
    """Write one call of the op's C function; returns the impl label."""
    if node.type.dtype.name not in DTYPES:
        raise RenderError(f"{node.op} on {node.type.dtype} has no CPU kernel",
                          hint="the capability table claims the splatting ops in f32 only")
    ins = [env.inputs[v].ptr for v in node.inputs]
    out = env.outputs[node.name]
    wd, ht = int(node.attr("width")), int(node.attr("height"))
    n = env.inputs[node.inputs[0]].type.shape[0]
    if node.op in ("splat_project", "splat_project_vjp"):
        k = env.inputs[node.inputs[4]].type.shape[1]
        fn = "rlx_splat_project" if node.op == "splat_project" else "rlx_splat_project_vjp"
        w.line(f"{fn}({n}, {k}, {', '.join(ins)}, {wd}, {ht}, {out.ptr});")
        return IMPL
    bg = ", ".join(_f(c) for c in node.attr("background"))
    if node.op == "splat_rasterize":
        call = f"rlx_splat_rasterize({n}, {ins[0]}, {wd}, {ht}, {bg}, {out.ptr})"
    else:
        call = f"rlx_splat_rasterize_vjp({n}, {ins[0]}, {ins[1]}, {wd}, {ht}, {bg}, {out.ptr})"
    # every thread of the region runs the call (tiles shared out inside); asked for its side
    # effect: an image of several tiles' worth of work makes the program open its region
    env.parallel(wd * ht * max(n, 1) // 64, 0)
    w.line(TEAM_BLOCK)
    w.line(f"    {call};")
    w.line("}")
    return IMPL
