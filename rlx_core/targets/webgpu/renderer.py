"""WGSL renderer: the shared GPU kernels (gpu_common/kernels.py) in the WGSL dialect (wgsl.py).

One compute shader per LIR kernel. f16 is stored as f16 (``enable f16``, only with the
adapter's ``shader-f16``) and computed in f32, rounded to f16 after every op, which is what
the numpy reference does; the other storage rules are gpu_common/expr.py's.
"""

from __future__ import annotations

from rlx_core.ir.graph import Graph, Kernel, TensorType
from rlx_core.targets.gpu_common import kernels
from rlx_core.targets.gpu_common.expr import COMPUTE, STORAGE, GpuRenderError
from rlx_core.targets.gpu_common.kernels import GpuKernel
from rlx_core.targets.webgpu.wgsl import WGSL

WgslKernel = GpuKernel
WgslRenderError = GpuRenderError

__all__ = ["WgslKernel", "WgslRenderError", "STORAGE", "COMPUTE", "render_graph", "render_kernel"]


def render_kernel(k: Kernel, types: dict[str, TensorType]) -> GpuKernel:
    """WGSL for one LIR kernel (raises GpuRenderError for what it does not cover)."""
    return kernels.render_kernel(WGSL, k, types)


def render_graph(lir: Graph) -> tuple[GpuKernel, ...]:
    """Every kernel of a LIR graph, in execution order."""
    return kernels.render_graph(WGSL, lir)
