"""Capability table of the cuda target (CUDA C kernels of the shared GPU renderer).

Labelled "compile-check": every kernel passes nvcc (PTX for compute_80) and ptxas for sm_80
and sm_90; no NVIDIA GPU runs them on this machine. Facts: NVIDIA GPUs have f64, but the
renderer computes in f32 (RLX-L002: cast to f32); i64 is narrowed to i32 where provable
(RLX-L004 otherwise); f16 (cuda_fp16.h) is not rendered yet (RLX-L003); up to 1024 threads per
block.
"""

from __future__ import annotations

from rlx_core.dispatch.capabilities import Capabilities, DTypeRule, Limits
from rlx_core.targets.gpu_common import caps as gpu

DTYPES = tuple(d for d in gpu.DTYPES if d != "f16")

CAPS = Capabilities(
    target="cuda",
    verification="compile-check",
    claims=gpu.claims(DTYPES),
    dtype_rules=(*gpu.dtype_rules("cuda"),
                 DTypeRule("f16", "unsupported", code="RLX-L003",
                           hint="cast to f32 (the CUDA dialect does not render __half yet)")),
    limits=Limits(max_workgroup_size=1024, source="CUDA (compute capability 8.0+)"),
    note="CUDA C kernels (gpu_common renderer, cuda/dialect.py), nvcc + ptxas sm_80/sm_90",
)
