"""Capability table of the rocm target (HIP kernels of the shared GPU renderer).

Labelled "compile-check": every kernel passes hipcc for gfx90a and gfx940 (device code
objects); no AMD GPU runs them here. Facts as CUDA's: f64 exists on MI-class GPUs but the
renderer computes in f32 (RLX-L002); i64 narrowed (RLX-L004); f16 as on cuda (``__half`` from
hip_fp16.h, rounded after every op); up to 1024 work-items per workgroup. int8: ``int_linear``
through ``__builtin_amdgcn_sdot4`` (v_dot4c_i32_i8 on gfx90a/gfx940) and ``requantize`` in
32-bit limbs (gpu_common/int8.py).
"""

from __future__ import annotations

from rlx_core.dispatch.capabilities import Capabilities, DTypeRule, Limits
from rlx_core.targets.gpu_common import caps as gpu

DTYPES = gpu.DTYPES

CAPS = Capabilities(
    target="rocm",
    verification="compile-check",
    claims=(*gpu.claims(DTYPES),
            *gpu.int8_claims("__builtin_amdgcn_sdot4 (v_dot4_i32_i8)")),
    dtype_rules=(*gpu.dtype_rules("rocm"), DTypeRule("f16", "native")),
    limits=Limits(max_workgroup_size=1024, source="ROCm (CDNA2/CDNA3)"),
    note="HIP kernels (gpu_common renderer, rocm/dialect.py), hipcc gfx90a/gfx940",
)
