"""rlx.splat: 3D Gaussian splatting as IR ops (rlx_core/ir/ops/splat.py), usable inside
``rlx.jit`` / ``rlx.compile`` and differentiable with ``rlx.grad``; outside a trace each call
computes at once on the numpy reference, like every rlx op.

    image = rlx.splat.render(means, quats, scales, opacities, sh, viewmat, K,
                             width=256, height=256)

Inputs are activated parameters (scales > 0, opacities in [0, 1]; apply ``rlx.exp`` /
``rlx.sigmoid`` to raw parameters inside the traced function). The equations are written
down in rlx_core/splat/reference.py (the numpy oracle); the record layout in layout.py.
Standard library only: numpy lives in reference.py and scene.py.
"""

from __future__ import annotations

from typing import Any

from rlx_core.frontend import ops
from rlx_core.frontend.eager import eager
from rlx_core.frontend.tensor import Tensor
from rlx_core.frontend.tracer import current
from rlx_core.splat import layout

__all__ = ["project", "rasterize", "render", "render_backward", "project_vjp", "rasterize_vjp",
           "layout"]

Background = tuple[float, float, float]


def _emit(op: str, args: list[Any], attrs: dict[str, Any]) -> Tensor:
    vals = [ops.asarray(a).value for a in args]
    return Tensor(current().emit(op, vals, attrs))


def _image(width: int, height: int, background: Background,
           tile_entries: int = 0) -> dict[str, Any]:
    return {"width": int(width), "height": int(height),
            "background": tuple(float(c) for c in background),
            "tile_entries": int(tile_entries)}


@eager
def project(means: Any, quats: Any, scales: Any, opacities: Any, sh: Any, viewmat: Any,
            intrinsics: Any, *, width: int, height: int) -> Tensor:
    """f32[N, 11] records: u, v, conic (a, b, c), depth, radius, opacity, r, g, b per Gaussian
    (layout.PROJ_NAMES); all zeros where culled (behind the camera, degenerate, off screen)."""
    return _emit("splat_project", [means, quats, scales, opacities, sh, viewmat, intrinsics],
                 {"width": int(width), "height": int(height)})


@eager
def rasterize(records: Any, *, width: int, height: int,
              background: Background = (0.0, 0.0, 0.0), tile_entries: int = 0) -> Tensor:
    """The f32[height, width, 3] image of ``project``'s records. ``tile_entries``: the size of
    a GPU rasterizer's (tile, Gaussian) list (0: from N); more needed fails with RLX-S021."""
    return _emit("splat_rasterize", [records], _image(width, height, background, tile_entries))


@eager
def render(means: Any, quats: Any, scales: Any, opacities: Any, sh: Any, viewmat: Any,
           intrinsics: Any, *, width: int, height: int,
           background: Background = (0.0, 0.0, 0.0), tile_entries: int = 0) -> Tensor:
    """``rasterize(project(...))``: the Gaussians' image from one camera."""
    rec = _emit("splat_project", [means, quats, scales, opacities, sh, viewmat, intrinsics],
                {"width": int(width), "height": int(height)})
    return _emit("splat_rasterize", [rec], _image(width, height, background, tile_entries))


@eager
def project_vjp(means: Any, quats: Any, scales: Any, opacities: Any, sh: Any, viewmat: Any,
                intrinsics: Any, g_records: Any, *, width: int, height: int) -> Tensor:
    """The gradients of ``project`` side by side: f32[N, 11 + 3K] (layout.grad_cols)."""
    return _emit("splat_project_vjp",
                 [means, quats, scales, opacities, sh, viewmat, intrinsics, g_records],
                 {"width": int(width), "height": int(height)})


@eager
def rasterize_vjp(records: Any, g_image: Any, *, width: int, height: int,
                  background: Background = (0.0, 0.0, 0.0), tile_entries: int = 0) -> Tensor:
    """The gradient of ``rasterize`` with respect to its records (depth, radius: zero)."""
    return _emit("splat_rasterize_vjp", [records, g_image],
                 _image(width, height, background, tile_entries))


@eager
def render_backward(means: Any, quats: Any, scales: Any, opacities: Any, sh: Any,
                    viewmat: Any, intrinsics: Any, g_image: Any, *, width: int, height: int,
                    background: Background = (0.0, 0.0, 0.0),
                    tile_entries: int = 0) -> tuple[Tensor, ...]:
    """Gradients of ``sum(g_image * render(...))`` for means, quats, scales, opacities, sh."""
    size = {"width": int(width), "height": int(height)}
    gauss = [means, quats, scales, opacities, sh, viewmat, intrinsics]
    rec = _emit("splat_project", gauss, size)
    g_rec = _emit("splat_rasterize_vjp", [rec, g_image],
                  _image(width, height, background, tile_entries))
    grads = _emit("splat_project_vjp", [*gauss, g_rec], size)
    n, k = grads.shape[0], (grads.shape[1] - layout.PROJ_COLS) // 3
    c = layout.grad_cols(k)
    g_means, g_quats, g_scales = (grads[:, c[i]:c[i + 1]] for i in range(3))
    g_opac = grads[:, c[3]:c[4]].reshape((n,))
    g_sh = grads[:, c[4]:c[5]].reshape((n, k, 3))
    return g_means, g_quats, g_scales, g_opac, g_sh
