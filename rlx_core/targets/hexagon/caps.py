"""Capability table of the hexagon target (C + HVX intrinsics for a Hexagon v68 DSP).

The rules of the device family, as the renderer implements them:

- HVX (128-byte vectors) has integer lanes (i8/u8, i16, i32) and, from v68 on, qf32/qf16
  floating lanes; single-node elementwise kernels use them (hvx.py), every other kernel is
  scalar C on the scalar core (f32 in hardware, 64-bit integers in register pairs);
- no f64 claimed: HVX has no f64 lanes and v68's scalar double support is partial: cast to f32;
- no bf16: v68 has no bf16 type (it arrives with v73): cast to f16 or f32;
- no threads and no BLAS: one hardware thread runs the program.
"""

from __future__ import annotations

from rlx_core.dispatch.capabilities import (
    MIR_PRIMITIVES,
    Capabilities,
    DTypeRule,
    OpClaim,
    native_dtypes,
)

DTYPES: tuple[str, ...] = ("f32", "f16", "i64", "i32", "i16", "i8", "u32", "u8", "bool")


def caps(verification: str) -> Capabilities:
    """The table, labelled with how this machine verifies it."""
    return Capabilities(
        target="hexagon",
        verification=verification,
        claims=(OpClaim(MIR_PRIMITIVES, DTYPES,
                        note="HVX loops for one-op integer/f32 elementwise kernels, scalar C "
                             "elsewhere"),),
        dtype_rules=native_dtypes(DTYPES) + (
            DTypeRule("f64", "unsupported", code="RLX-L002",
                      hint="Hexagon has no f64 vector lanes: cast to f32 before this op"),
            DTypeRule("bf16", "unsupported", code="RLX-L002",
                      hint="Hexagon v68 has no bf16: cast to f16 or f32"),
            DTypeRule("c64", "unsupported", hint="split into real and imaginary f32 parts"),
            DTypeRule("i4", "unsupported", hint="dequantize: cast the i4 tensor to i8 first"),
        ),
        note="C + HVX intrinsics (targets/hexagon), clang --target=hexagon -mv68 -mhvx "
             "-mhvx-length=128b",
    )


# the table as the static probe (dispatch/registry.py) reads it: this machine's label
CAPS = caps("executes (emulated)")
