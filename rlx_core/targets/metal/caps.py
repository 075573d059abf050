"""Capability table of the metal target (Metal Shading Language kernels).

Labelled "syntax-checked": there is no Metal compiler for Linux; every kernel passes a strict
clang++ C++17 syntax pass against a shim of metal_stdlib (metal/shim.py), nothing more. Facts:
Metal has no f64 at all (RLX-L002: cast to f32); no 64-bit integers in buffers we use (i64
narrowed, RLX-L004); half is native: stored as half, computed in f32 and rounded to half
after every op (the reference's semantics); at most
1024 threads per threadgroup and 31 buffer bindings per kernel ([[buffer(0..30)]]). int8:
``int_linear`` and ``requantize`` (gpu_common/int8.py) on the i32 path (MSL has no packed int8
dot product).
"""

from __future__ import annotations

from rlx_core.dispatch.capabilities import Capabilities, DTypeRule, Limits
from rlx_core.targets.gpu_common import caps as gpu

DTYPES = gpu.DTYPES

CAPS = Capabilities(
    target="metal",
    verification="syntax-checked",
    claims=(*gpu.claims(DTYPES),
            *gpu.int8_claims("unpacked by shifts (MSL has no packed int8 dot product)")),
    dtype_rules=(*(r if r.dtype != "f64" else DTypeRule(
        "f64", "unsupported", code="RLX-L002", hint="Metal has no f64: cast to f32")
        for r in gpu.dtype_rules("metal")), DTypeRule("f16", "native")),
    limits=Limits(max_workgroup_size=1024, max_storage_buffers=31,
                  source="Metal (Apple silicon)"),
    note="MSL kernels (gpu_common renderer, metal/dialect.py), syntax-checked with a shim",
)
