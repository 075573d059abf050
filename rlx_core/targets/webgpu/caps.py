"""Capability table of the WebGPU (WGSL) target.

Labelled "planned": no WGSL renderer exists yet, so this table claims what WGSL itself allows
and the renderer will implement, no more. The facts it encodes:

- no f64 in WGSL (nodes touching f64 fail with RLX-L002: cast to f32);
- no i64 in shaders: i64 values are narrowed to i32 where provably in range, else RLX-L004;
- f16 only with the optional ``shader-f16`` device feature (RLX-L003 otherwise);
- bool is not host-shareable: it is stored as u32 in buffers;
- no i8/u8/i16 arithmetic (no 8/16-bit integer types): cast to i32;
- no native erf: erf is rewritten to a polynomial (rewrite ``erf_polynomial``);
- no float atomics, so no scatter_add;
- limits: the WebGPU spec's guaranteed minimums as defaults (max workgroup size 256, 8 storage
  buffers per shader stage, 128 MiB per storage buffer binding); a live adapter may raise them
  (``CAPS.with_limits(...)``).
"""

from __future__ import annotations

from rlx_core.dispatch.capabilities import Capabilities, DTypeRule, Limits, OpClaim
from rlx_core.ir.ops.mir import BINARY, COMPARE, REDUCE, UNARY

# WGSL has f32/i32/u32 (and f16 with the feature); bool in buffers travels as u32.
DTYPES: tuple[str, ...] = ("f32", "f16", "i32", "u32", "bool")

_UNARY = tuple(op for op in UNARY if op != "erf")  # no erf builtin in WGSL
_ELEMENTWISE = (*_UNARY, *BINARY, *COMPARE, "select", "cast")
_OTHER = (*REDUCE, "argmax", "broadcast_in_dim", "reshape", "transpose", "slice", "pad",
          "concat", "gather", "dot_general", "iota", "constant")

CAPS = Capabilities(
    target="webgpu",
    verification="planned",
    claims=(
        OpClaim(_ELEMENTWISE, DTYPES, note="one invocation per output element"),
        OpClaim(_OTHER, DTYPES, note="workgroup reductions / tiled matmul"),
    ),
    dtype_rules=(
        DTypeRule("f32", "native"),
        DTypeRule("i32", "native"),
        DTypeRule("u32", "native"),
        DTypeRule("bool", "storage", stored_as="u32"),
        DTypeRule("f16", "feature", feature="shader-f16", code="RLX-L003",
                  hint="enable the shader-f16 feature (request it on the adapter), or cast to "
                       "f32"),
        DTypeRule("f64", "unsupported", code="RLX-L002", hint="cast to f32 before this op"),
        DTypeRule("i64", "narrow", stored_as="i32", code="RLX-L004",
                  hint="pass i32 values (ids.astype('int32')); or use target cpu"),
        DTypeRule("i8", "unsupported", hint="cast to i32 before this op"),
        DTypeRule("u8", "unsupported", hint="cast to u32 before this op"),
        DTypeRule("i16", "unsupported", hint="cast to i32 before this op"),
        DTypeRule("bf16", "unsupported", hint="cast to f32 (or f16 with shader-f16)"),
        DTypeRule("c64", "unsupported", hint="split into real and imaginary f32 parts"),
        DTypeRule("i4", "unsupported", hint="dequantize: cast the i4 tensor to f32 first"),
    ),
    limits=Limits(max_workgroup_size=256, max_storage_buffers=8,
                  max_buffer_bytes=128 * 1024 * 1024, source="WebGPU spec defaults"),
    features=("shader-f16",),
    note="WGSL renderer planned; the table claims what WGSL allows and no more",
)
