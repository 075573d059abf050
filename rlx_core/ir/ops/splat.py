"""3D Gaussian splatting ops (HIR): projection, tile rasterization and their VJPs.

They have no common-IR decomposition (per-tile sorting and a data-dependent early stop are no
sensible MIR): the numpy reference runs them with the oracle (rlx_core/splat/reference.py),
cpu and webgpu with kernels of their own, and every other target fails legalization with
RLX-S020. The record layouts are in rlx_core/splat/layout.py:

- ``splat_project(means[N,3], quats[N,4], scales[N,3], opacities[N], sh[N,K,3],
  viewmat[4,4], intrinsics[3,3])`` -> f32[N, 11]: u, v, conic (3), depth, radius, opacity,
  rgb; all zeros where a Gaussian is culled. K is 1, 4, 9 or 16 (SH degree 0..3).
- ``splat_project_vjp(<the same 7>, g[N,11])`` -> f32[N, 11 + 3K]: the gradients of means,
  quats, scales, opacities and sh side by side (camera inputs get none).
- ``splat_rasterize(proj[N,11])`` -> f32[height, width, 3]. ``tile_entries`` sizes a GPU
  rasterizer's (tile, Gaussian) list; a scene that needs more fails with RLX-S021.
- ``splat_rasterize_vjp(proj[N,11], g[height,width,3])`` -> f32[N, 11].
"""

from __future__ import annotations

from typing import Any

from rlx_core.errors import DTypeError
from rlx_core.ir import dtypes as dt
from rlx_core.ir.graph import Level, TensorType
from rlx_core.ir.ops.base import AttrSpec, OpDef, require

T = TensorType
PROJ_COLS = 11  # rlx_core/splat/layout.py's record width (that module needs no numpy either)
SH_SIZES = (1, 4, 9, 16)


def _f32(op: str, ins: list[T]) -> None:
    for t in ins:
        require(t.dtype == dt.f32, op, f"operands must be f32, got {t}",
                hint="cast to f32 first (x.astype('f32'))", exc=DTypeError)


def _size(op: str, a: dict[str, Any]) -> None:
    require(a["width"] > 0 and a["height"] > 0, op,
            f"image size {a['width']} x {a['height']} must be positive")
    if "background" in a:
        require(len(a["background"]) == 3, op, "background must be three floats (r, g, b)")
    if "tile_entries" in a:
        require(a["tile_entries"] >= 0, op,
                f"tile_entries must be >= 0 (0: sized from N), got {a['tile_entries']}")


def _gaussians(op: str, ins: list[T]) -> int:
    """Check the seven projection operands; returns K."""
    _f32(op, ins)
    means, quats, scales, opac, sh, view, intr = ins[:7]
    n = means.shape[0] if means.rank == 2 else -1
    require(means.rank == 2 and means.shape[1] == 3, op, f"means must be [N, 3], got {means}")
    for t, what, cols in ((quats, "quats", 4), (scales, "scales", 3)):
        require(t.shape == (n, cols), op, f"{what} must be [{n}, {cols}], got {t}")
    require(opac.shape == (n,), op, f"opacities must be [{n}], got {opac}")
    require(sh.rank == 3 and sh.shape[0] == n and sh.shape[1] in SH_SIZES and sh.shape[2] == 3,
            op, f"sh must be [{n}, K, 3] with K in {SH_SIZES} (degree 0..3), got {sh}")
    require(view.shape == (4, 4), op, f"viewmat must be [4, 4], got {view}")
    require(intr.shape == (3, 3), op, f"intrinsics must be [3, 3], got {intr}")
    return sh.shape[1]


def _project(ins: list[T], a: dict[str, Any]) -> T:
    _size("splat_project", a)
    _gaussians("splat_project", ins)
    return T(dt.f32, (ins[0].shape[0], PROJ_COLS))


def _project_vjp(ins: list[T], a: dict[str, Any]) -> T:
    _size("splat_project_vjp", a)
    k = _gaussians("splat_project_vjp", ins)
    n = ins[0].shape[0]
    require(ins[7].shape == (n, PROJ_COLS), "splat_project_vjp",
            f"the cotangent must be [{n}, {PROJ_COLS}], got {ins[7]}")
    return T(dt.f32, (n, PROJ_COLS + 3 * k))


def _records(op: str, t: T) -> None:
    require(t.rank == 2 and t.shape[1] == PROJ_COLS, op,
            f"needs splat_project's records [N, {PROJ_COLS}], got {t}")


def _rasterize(ins: list[T], a: dict[str, Any]) -> T:
    _size("splat_rasterize", a)
    _f32("splat_rasterize", ins)
    _records("splat_rasterize", ins[0])
    return T(dt.f32, (a["height"], a["width"], 3))


def _rasterize_vjp(ins: list[T], a: dict[str, Any]) -> T:
    _size("splat_rasterize_vjp", a)
    _f32("splat_rasterize_vjp", ins)
    _records("splat_rasterize_vjp", ins[0])
    require(ins[1].shape == (a["height"], a["width"], 3), "splat_rasterize_vjp",
            f"the cotangent must be [{a['height']}, {a['width']}, 3], got {ins[1]}")
    return ins[0]


def splat_defs() -> dict[str, OpDef]:
    size = {"width": AttrSpec("int"), "height": AttrSpec("int")}
    # tile_entries: how many (tile, Gaussian) pairs a GPU rasterizer's buffer holds; 0 sizes it
    # from N (webgpu/splat_raster.py's capacity); kernels without such a buffer ignore it
    image = {**size, "background": AttrSpec("floats", (0.0, 0.0, 0.0)),
             "tile_entries": AttrSpec("int", 0)}
    t: dict[str, OpDef] = {}

    def add(name, arity, infer, doc):
        attrs = image if "rasterize" in name else size
        t[name] = OpDef(name, Level.HIR, "composite", arity, dict(attrs), infer, doc)

    add("splat_project", (7, 7), _project,
        "3-D Gaussians -> [N, 11] records (u, v, conic, depth, radius, opacity, rgb) with the "
        "EWA covariance and SH colour; zeros where culled")
    add("splat_project_vjp", (8, 8), _project_vjp,
        "gradients of splat_project for means, quats, scales, opacities, sh side by side")
    add("splat_rasterize", (1, 1), _rasterize,
        "records -> [height, width, 3]: 16x16 tiles, per-tile depth sort, front-to-back "
        "alpha compositing with early stop")
    add("splat_rasterize_vjp", (2, 2), _rasterize_vjp,
        "gradient of splat_rasterize with respect to its records")
    return t


SPLAT_OPS: tuple[str, ...] = ("splat_project", "splat_project_vjp", "splat_rasterize",
                              "splat_rasterize_vjp")
