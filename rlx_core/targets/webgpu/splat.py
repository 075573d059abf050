"""WebGPU's splatting kernels (WGSL), f32: all four ops of ir/ops/splat.py.

``splat_project`` and ``splat_project_vjp`` are one invocation per Gaussian
(splat_project.py). ``splat_rasterize`` is six dispatches in one compute pass, with scratch
buffers of its own (splat_raster.py)::

    zero      tile counts := 0
    count     per Gaussian: atomicAdd 1 to every tile its 3-sigma box touches
    scan      one invocation: tile offsets (exclusive prefix sum), the entry total, overflow
    fill      per Gaussian: atomicAdd a slot in each of its tiles, write its index there
    sort      one workgroup per tile: bitonic sort of the tile's entries by (depth, index)
              in place (all-ascending form, so a length that is no power of two pads with
              virtual +inf that never moves), storageBarrier between stages
    composite one workgroup per tile, one invocation per pixel: chunks of 256 Gaussians
              staged in workgroup memory, front-to-back compositing with the early stop

``splat_rasterize_vjp`` bins the same way, then one workgroup per tile walks back to front and
reduces each Gaussian's gradient over the tile's pixels, and one invocation per Gaussian adds
its tiles' sums (no float atomics). The per-tile sort makes the atomics' arbitrary fill order
irrelevant: the order is the oracle's. The entry buffer holds ``capacity`` (tile, Gaussian)
pairs: the op's ``tile_entries``, else 16 per Gaussian and at least 2^16. A scene that needs
more (very large Gaussians) sets a flag the scan writes; the plan's guard reads it back after
the call and raises RLX-S021 with the count needed (the kernels also write NaN there, so a
runner that skips the guard cannot return a plausible image).
"""

from __future__ import annotations

from rlx_core.ir.graph import Kernel, TensorType
from rlx_core.targets.gpu_common.kernels import WG, GpuKernel, _grid
from rlx_core.targets.webgpu.splat_project import project_source, project_vjp_source
from rlx_core.targets.webgpu.splat_raster import (
    capacity,
    rasterize_kernels,
    rasterize_vjp_kernels,
)

OPS: tuple[str, ...] = ("splat_project", "splat_project_vjp", "splat_rasterize",
                        "splat_rasterize_vjp")
DTYPES: tuple[str, ...] = ("f32",)

__all__ = ["OPS", "DTYPES", "capacity", "render_splat"]


def render_splat(k: Kernel, types: dict[str, TensorType]) -> tuple[GpuKernel, ...]:
    """The dispatches of one kernel holding a splatting op."""
    node = k.nodes[0]
    w, h = int(node.attr("width")), int(node.attr("height"))
    n = types[node.inputs[0]].shape[0]
    if node.op in ("splat_project", "splat_project_vjp"):
        kk = types[node.inputs[4]].shape[1]
        grid = _grid(-(-n // WG))
        if node.op == "splat_project":
            return (GpuKernel(k.name, "splat", project_source(n, kk, w, h, grid),
                              tuple(node.inputs), (node.name,), grid),)
        reads = tuple(v for i, v in enumerate(node.inputs) if i != 3)  # not the opacities
        return (GpuKernel(k.name, "splat", project_vjp_source(n, kk, w, h, grid), reads,
                          (node.name,), grid),)
    bg = tuple(float(c) for c in node.attr("background"))
    if node.op == "splat_rasterize":
        return rasterize_kernels(k, n, w, h, bg)  # type: ignore[arg-type]
    return rasterize_vjp_kernels(k, n, w, h, bg)  # type: ignore[arg-type]
