"""Capability table of the CPU (generated C) target.

Labelled "planned": the C renderer is being written, so this table claims only what it is
committed to implement - every MIR primitive (dot_general included) in f32, f64, i32, i64,
i8, u8 and bool - and no composite: every HIR op goes common-IR. Other dtypes report how to
get to a supported one.
"""

from __future__ import annotations

from rlx_core.dispatch.capabilities import (
    MIR_PRIMITIVES,
    Capabilities,
    DTypeRule,
    OpClaim,
    native_dtypes,
)

DTYPES: tuple[str, ...] = ("f32", "f64", "i32", "i64", "i8", "u8", "bool")

CAPS = Capabilities(
    target="cpu",
    verification="planned",
    claims=(OpClaim(MIR_PRIMITIVES, DTYPES, note="one C loop nest per kernel"),),
    dtype_rules=native_dtypes(DTYPES) + (
        DTypeRule("f16", "unsupported", hint="cast to f32 before this op"),
        DTypeRule("bf16", "unsupported", hint="cast to f32 before this op"),
        DTypeRule("i16", "unsupported", hint="cast to i32 before this op"),
        DTypeRule("u32", "unsupported", hint="cast to i64 before this op"),
        DTypeRule("c64", "unsupported", hint="split into real and imaginary f32 parts, or use "
                                             "target numpy"),
        DTypeRule("i4", "unsupported", hint="dequantize: cast the i4 tensor to i8 or f32 first"),
    ),
    note="C renderer in progress: claims are limited to what it will implement",
)
