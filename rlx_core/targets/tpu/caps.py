"""Capability table of the tpu target (StableHLO for XLA; executed here by XLA's CPU backend).

Labelled "executes": lowering.py renders every MIR primitive in each dtype below, and the
conformance suite runs the modules through XLA on this machine's CPU. The table states the
TPU's rules, not the looser ones of XLA's CPU backend that runs them here:

- static shapes only: every rlx shape is static, and a TPU compiles one program per shape;
- no f64: TPUs have no 64-bit float units (XLA-CPU would run it; we do not claim what a TPU
  cannot do): RLX-L002, cast to f32;
- no i64 by default (JAX's x64 mode is off on TPU; s64 is emulated in 32-bit pairs): i64
  values are narrowed to i32 where provably in range, else RLX-L004 with a hint;
- bf16 native (the MXU's input type), f16 supported (computed through f32 here as in the
  reference); matmuls ask for HIGHEST precision, else a TPU multiplies f32 in bf16 passes;
- c64 and packed i4 are not rendered.
"""

from __future__ import annotations

from rlx_core.dispatch.capabilities import (
    MIR_PRIMITIVES,
    Capabilities,
    DTypeRule,
    OpClaim,
    native_dtypes,
)

DTYPES: tuple[str, ...] = ("f32", "bf16", "f16", "i32", "i16", "i8", "u32", "u8", "bool")

CAPS = Capabilities(
    target="tpu",
    verification="executes",
    claims=(OpClaim(MIR_PRIMITIVES, DTYPES,
                    note="one StableHLO op (or a few) per primitive; XLA fuses"),),
    dtype_rules=native_dtypes(DTYPES) + (
        DTypeRule("f64", "unsupported", code="RLX-L002",
                  hint="TPUs have no f64: cast to f32 (or bf16) before this op"),
        DTypeRule("i64", "narrow", stored_as="i32", code="RLX-L004",
                  hint="pass i32 values (ids.astype('int32')): TPUs run without 64-bit "
                       "integers by default"),
        DTypeRule("c64", "unsupported", hint="split into real and imaginary f32 parts, or use "
                                             "target cpu"),
        DTypeRule("i4", "unsupported", hint="dequantize: cast the i4 tensor to i8 or bf16 first"),
    ),
    note="StableHLO text (targets/tpu) compiled by XLA through jaxlib's PJRT client; "
         "static shapes, no f64, no i64 by default, bf16 native",
)
