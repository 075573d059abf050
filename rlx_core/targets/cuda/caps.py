"""Capability table of the cuda target (CUDA C kernels of the shared GPU renderer).

Labelled "compile-check": every kernel passes nvcc (PTX for compute_80) and ptxas for sm_80
and sm_90; no NVIDIA GPU runs them on this machine. Facts: NVIDIA GPUs have f64, but the
renderer computes in f32 (RLX-L002: cast to f32); i64 is narrowed to i32 where provable
(RLX-L004 otherwise); f16 is ``__half`` storage (cuda_fp16.h) computed in f32 and rounded to half
after every op (the reference's semantics); up to 1024 threads per block. int8:
``int_linear`` on packed words through ``__dp4a`` and ``requantize`` in 32-bit limbs
(gpu_common/int8.py).
"""

from __future__ import annotations

from rlx_core.dispatch.capabilities import Capabilities, DTypeRule, Limits
from rlx_core.targets.gpu_common import caps as gpu

DTYPES = gpu.DTYPES

CAPS = Capabilities(
    target="cuda",
    verification="compile-check",
    claims=(*gpu.claims(DTYPES), *gpu.int8_claims("__dp4a (PTX dp4a.s32.s32)")),
    dtype_rules=(*gpu.dtype_rules("cuda"), DTypeRule("f16", "native")),
    limits=Limits(max_workgroup_size=1024, source="CUDA (compute capability 8.0+)"),
    note="CUDA C kernels (gpu_common renderer, cuda/dialect.py), nvcc + ptxas sm_80/sm_90",
)
