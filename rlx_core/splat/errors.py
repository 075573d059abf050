"""Typed errors of rlx.splat (codes RLX-S020..S039 belong to splatting)."""

from __future__ import annotations

from rlx_core.errors import RlxError


class TileEntriesOverflowError(RlxError):
    """A GPU rasterizer's (tile, Gaussian) list, sized when the kernel was planned, was too
    small for the scene (many Gaussians, or large ones covering many tiles)."""

    code = "RLX-S021"


def tile_entries_overflow(op: str, capacity: int, needed: int) -> TileEntriesOverflowError:
    return TileEntriesOverflowError(
        f"{op}: the scene needs {needed} (tile, Gaussian) entries, the rasterizer's list holds "
        f"{capacity}; the result would be undefined",
        hint=f"pass tile_entries={needed} (or more) to rlx.splat.render / rasterize / "
             "render_backward, or keep the Gaussians' screen radii smaller; the cpu target has "
             "no such limit")
