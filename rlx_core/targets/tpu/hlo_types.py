"""StableHLO spellings of rlx types and literals: ``tensor<2x3xf32>``, ``dense<0x3F800000>``."""

from __future__ import annotations

import math
import struct
from typing import Any

from rlx_core.ir import dtypes as dt
from rlx_core.ir.dtypes import DType
from rlx_core.ir.graph import TensorType

# rlx dtype -> MLIR element type (signless integers; unsigned ones say so)
ELEMENT: dict[str, str] = {
    "bool": "i1", "i8": "i8", "i16": "i16", "i32": "i32", "i64": "i64", "u8": "ui8",
    "u32": "ui32", "f16": "f16", "bf16": "bf16", "f32": "f32", "f64": "f64",
}
# struct formats of the bit patterns a float splat is written as (exact, NaN payloads kept)
_FLOAT_BITS = {"f16": ("e", "H", 4), "f32": ("f", "I", 8), "f64": ("d", "Q", 16)}


def tensor(t: TensorType) -> str:
    """``tensor<2x3xf32>``; a scalar is ``tensor<f32>``."""
    dims = "".join(f"{d}x" for d in t.shape)
    return f"tensor<{dims}{ELEMENT[t.dtype.name]}>"


def compare_type(d: DType) -> str:
    """The comparison_type operand of stablehlo.compare for operands of ``d``."""
    if d.is_float:
        return "FLOAT"
    return "SIGNED" if d.kind is dt.Kind.INT else "UNSIGNED"


def scalar_literal(value: Any, d: DType) -> str:
    """One element of ``d`` as an MLIR literal; floats as their exact bit pattern."""
    if d == dt.bool_:
        return "true" if value else "false"
    if d.is_int:
        return str(int(value))
    if d == dt.bf16:
        bits = struct.unpack("<I", struct.pack("<f", float(value)))[0] >> 16
        return f"0x{bits:04X}"  # callers pass values already rounded to bf16
    ffmt, ifmt, width = _FLOAT_BITS[d.name]
    bits = struct.unpack("<" + ifmt, struct.pack("<" + ffmt, float(value)))[0]
    return f"0x{bits:0{width}X}"


def splat(value: Any, t: TensorType) -> str:
    """``dense<v> : tensor<...>``: every element equal to ``value``."""
    return f"dense<{scalar_literal(value, t.dtype)}> : {tensor(t)}"


def dense(values: Any, t: TensorType) -> str:
    """``dense<"0x…"> : tensor<...>`` from a host array in ``t``'s host form (numpy).

    The raw little-endian bytes of the element type; bf16 as its top 16 bits. Bool is not
    written this way (MLIR packs i1 differently across versions): callers build it from u8.
    """
    import numpy as np

    arr = np.ascontiguousarray(values)
    if t.dtype == dt.bf16:
        arr = (arr.astype(np.float32).view(np.uint32) >> 16).astype("<u2")
    else:
        arr = arr.astype(np.dtype(dt.to_numpy_name(t.dtype)).newbyteorder("<"))
    if math.prod(t.shape) == 0:
        return splat(0, t)
    flat = arr.reshape(-1)
    if (flat == flat[0]).all() and not (arr.dtype.kind == "f" and np.isnan(flat).any()):
        return splat(flat[0].item() if t.dtype != dt.bf16 else values.reshape(-1)[0].item(), t)
    return f'dense<"0x{arr.tobytes().hex().upper()}"> : {tensor(t)}'
