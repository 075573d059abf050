"""ONNX element types <-> rlx dtypes. ONNX types rlx has no dtype for map to None (rejected)."""

from __future__ import annotations

from rlx_core.ir import dtypes as dt
from rlx_core.ir.dtypes import DType

# TensorProto.DataType numbers (onnx.proto): spelled out so this table reads without onnx
_ONNX_TO_RLX: dict[int, DType] = {
    1: dt.f32,  # FLOAT
    2: dt.u8,  # UINT8
    3: dt.i8,  # INT8
    5: dt.i16,  # INT16
    6: dt.i32,  # INT32
    7: dt.i64,  # INT64
    9: dt.bool_,  # BOOL
    10: dt.f16,  # FLOAT16
    11: dt.f64,  # DOUBLE
    12: dt.u32,  # UINT32
    14: dt.c64,  # COMPLEX64
    # rlx holds bf16 in float32 on the host (rounded to bf16 on every op); the ONNX backend
    # converts ml_dtypes.bfloat16 arrays to and from that form at its boundary
    16: dt.bf16,  # BFLOAT16
}
_NAMES: dict[int, str] = {
    0: "UNDEFINED", 1: "FLOAT", 2: "UINT8", 3: "INT8", 4: "UINT16", 5: "INT16", 6: "INT32",
    7: "INT64", 8: "STRING", 9: "BOOL", 10: "FLOAT16", 11: "DOUBLE", 12: "UINT32", 13: "UINT64",
    14: "COMPLEX64", 15: "COMPLEX128", 16: "BFLOAT16", 17: "FLOAT8E4M3FN", 18: "FLOAT8E4M3FNUZ",
    19: "FLOAT8E5M2", 20: "FLOAT8E5M2FNUZ", 21: "UINT4", 22: "INT4", 23: "FLOAT4E2M1",
    24: "FLOAT8E8M0", 25: "UINT2", 26: "INT2",
}
_RLX_TO_ONNX: dict[str, int] = {d.name: k for k, d in _ONNX_TO_RLX.items()}


def onnx_type_name(elem_type: int) -> str:
    return _NAMES.get(elem_type, f"type {elem_type}")


def to_rlx(elem_type: int) -> DType | None:
    """The rlx dtype of an ONNX element type, or None when rlx has none."""
    return _ONNX_TO_RLX.get(elem_type)


def to_onnx(d: DType) -> int:
    return _RLX_TO_ONNX[d.name]
