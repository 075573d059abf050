"""What the shared GPU renderer implements, as the claims and dtype rules a GPU table starts from.

Each GPU target's caps.py builds its ``Capabilities`` from these: the ops are exactly those
kernels.py renders, in the dtypes expr.py stores (bool as u32, i8/i16 as i32, u8 as u32,
computed in 32 bits and wrapped to their width after every op; bf16 as its 16 bits in a u32,
computed in f32 and rounded to bf16 after every op, as the reference does). A target adds its own f16,
limits and label.
"""

from __future__ import annotations

from rlx_core.dispatch.capabilities import DTypeRule, OpClaim
from rlx_core.ir.ops.mir import BINARY, COMPARE, REDUCE, UNARY

DTYPES: tuple[str, ...] = ("f32", "f16", "i32", "u32", "bool", "i8", "i16", "u8", "bf16")

_ELEMENTWISE = (*UNARY, *BINARY, *COMPARE, "select", "cast")
_OTHER = (*REDUCE, "argmax", "broadcast_in_dim", "reshape", "transpose", "slice", "pad",
          "concat", "gather", "scatter_add", "dot_general", "iota", "constant")


def claims(dtypes: tuple[str, ...] = DTYPES, f64_ops: tuple[str, ...] = (),
           f64_note: str = "") -> tuple[OpClaim, ...]:
    """The renderer's claims in ``dtypes``; the ops in ``f64_ops`` also in f64 (a dialect that
    emulates f64 computes only those)."""
    out = []
    for ops, note in ((_ELEMENTWISE, "one invocation per output element"),
                      (_OTHER, "workgroup reductions / tiled matmul")):
        with_f64 = tuple(op for op in ops if op in f64_ops)
        rest = tuple(op for op in ops if op not in f64_ops)
        if with_f64:
            out.append(OpClaim(with_f64, (*dtypes, "f64"), note=f"{note}; {f64_note}"))
        if rest:
            out.append(OpClaim(rest, dtypes, note=note))
    return tuple(out)


def dtype_rules(target: str) -> tuple[DTypeRule, ...]:
    """Every dtype but f16 (the target says how it gets f16, if at all)."""
    return (
        DTypeRule("f32", "native"),
        DTypeRule("i32", "native"),
        DTypeRule("u32", "native"),
        DTypeRule("bool", "storage", stored_as="u32"),
        DTypeRule("f64", "unsupported", code="RLX-L002", hint="cast to f32 before this op"),
        DTypeRule("i64", "narrow", stored_as="i32", code="RLX-L004",
                  hint="pass i32 values (ids.astype('int32')); or use target cpu"),
        DTypeRule("i8", "storage", stored_as="i32"),
        DTypeRule("u8", "storage", stored_as="u32"),
        DTypeRule("i16", "storage", stored_as="i32"),
        DTypeRule("bf16", "storage", stored_as="u32"),
        DTypeRule("c64", "unsupported", hint="split into real and imaginary f32 parts"),
        DTypeRule("i4", "unsupported", hint="dequantize: cast the i4 tensor to f32 first"),
    )


def int8_claims(path: str) -> tuple[OpClaim, ...]:
    """``int_linear`` (i8/u8 operands, i32 accumulators) and ``requantize`` (i32 to i8, u8 or
    i16) as gpu_common/int8.py renders them; ``path`` says how the dot products run."""
    return (OpClaim(("int_linear",), ("i8", "u8", "i32"),
                    note=f"16x16 tiles of packed int8 words staged in shared memory, {path} "
                         "(gpu_common/int8.py)"),
            OpClaim(("requantize",), ("i32", "i8", "u8", "i16"),
                    note="TFLite's fixed-point rescale in 32-bit limbs (no i64 in shaders)"))

