"""Host side of GPU buffers without numpy: any array-like in, storage bytes, arrays out.

Inputs may be numpy arrays (used when numpy is importable), ``array.array``, memoryviews,
nested lists/tuples or scalars. They become the little-endian bytes of the WGSL storage type
(``gpu_common.expr.STORAGE``: bool and u8 as u32, i8/i16 as i32, f16 as f16, bf16 as its 16 bits
in a u32) with the reference's cast rules. Results come back as numpy arrays when numpy is present, else as ``HostArray``.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass
from typing import Any

from rlx_core.errors import ArgumentError, IndexOutOfRangeError
from rlx_core.ir import dtypes as dt
from rlx_core.ir.dtypes import DType
from rlx_core.ir.graph import TensorType

# struct format of each WGSL storage element type
_FORMAT = {"f32": "f", "f16": "e", "i32": "i", "u32": "I", "f64": "d"}
_WIDTH = {"f32": 4, "f16": 2, "i32": 4, "u32": 4, "f64": 8}
_NUMPY = {"f32": "<f4", "f16": "<f2", "i32": "<i4", "u32": "<u4", "f64": "<f8"}


def storage_name(d: DType) -> str:
    from rlx_core.targets.gpu_common.expr import STORAGE

    if d.name not in STORAGE:
        raise ArgumentError(f"GPU buffers cannot hold {d.name}",
                            hint="cast to f32/i32 before compiling for a GPU target")
    return STORAGE[d.name]


def buffer_bytes(t: TensorType) -> int:
    """Bytes of ``t`` in its storage form, rounded up to 4 (WebGPU copy granularity), >= 4."""
    raw = t.size * _WIDTH[storage_name(t.dtype)]
    return max(4, -(-raw // 4) * 4)


@dataclass(frozen=True)
class HostArray:
    """A result without numpy: row-major ``values`` of ``dtype`` (an rlx dtype name) and shape."""

    dtype: str
    shape: tuple[int, ...]
    values: tuple[Any, ...]

    @property
    def size(self) -> int:
        return len(self.values)

    def tolist(self) -> Any:
        """Nested lists like ``numpy.ndarray.tolist`` (a scalar for shape ``()``)."""
        if not self.shape:
            return self.values[0]

        def nest(flat: tuple[Any, ...], shape: tuple[int, ...]) -> list[Any]:
            if len(shape) == 1:
                return list(flat)
            step = math.prod(shape[1:])
            return [nest(flat[i * step:(i + 1) * step], shape[1:]) for i in range(shape[0])]

        return nest(self.values, self.shape)

    def __array__(self, dtype: Any = None, copy: Any = None) -> Any:
        import numpy as np

        arr = np.array(self.values, dtype=dt.to_numpy_name(dt.get(self.dtype))).reshape(self.shape)
        return arr if dtype is None else arr.astype(dtype)


def _flat_values(arg: Any) -> tuple[list[Any], tuple[int, ...]]:
    """Row-major Python values and the shape of any supported array-like."""
    if isinstance(arg, HostArray):
        return list(arg.values), arg.shape
    if isinstance(arg, memoryview):
        shape = tuple(arg.shape or ())
        flat = arg.cast("B").cast(arg.format).tolist() if arg.ndim != 1 else arg.tolist()
        return (flat if isinstance(flat, list) else [flat]), shape
    if type(arg).__name__ == "array" and hasattr(arg, "typecode"):
        return arg.tolist(), (len(arg),)
    if hasattr(arg, "tolist") and hasattr(arg, "shape"):
        shape = tuple(int(d) for d in arg.shape)
        vals = arg.tolist()
        from rlx_core.frontend.tracer import flatten_nested

        return flatten_nested(vals)[0] if shape else [vals], shape
    from rlx_core.frontend.tracer import flatten_nested

    return flatten_nested(arg)


def _bf16_bits(v: float) -> int:
    """The bf16 bits of ``v`` (round to nearest even, NaN canonical): the reference's rounding."""
    if math.isnan(v):
        return 0x7FC0
    u = struct.unpack("<I", struct.pack("<f", v))[0]
    return (u + 0x7FFF + ((u >> 16) & 1)) >> 16


def _convert(v: Any, d: DType) -> Any:
    """One Python value in storage form, with ``cast`` semantics (truncate, saturate, wrap)."""
    if d == dt.bool_:
        return 1 if v else 0
    if d == dt.bf16:
        return _bf16_bits(float(v))
    if d.is_float:
        return float(v)
    if isinstance(v, float):
        if math.isnan(v):
            return 0
        lo, hi = (0, 2 ** d.bits - 1) if d.kind is dt.Kind.UINT else \
            (-(2 ** (d.bits - 1)), 2 ** (d.bits - 1) - 1)
        return max(lo, min(hi, int(v))) if math.isfinite(v) else (hi if v > 0 else lo)
    m = int(v) % (2 ** d.bits)
    if d.kind is dt.Kind.INT and m >= 2 ** (d.bits - 1):
        m -= 2 ** d.bits
    return m


class IndexRangeError(IndexOutOfRangeError, ArgumentError):
    """A gather/scatter index passed by the caller lies outside the indexed axis.

    The shared IndexOutOfRangeError comes first so its code (RLX-R002) wins over
    ArgumentError's: the same mistake has the same code on every target.
    """


def check_indices(arg: Any, size: int, op: str, what: str) -> None:
    """Refuse indices outside [-size, size) before they reach a kernel (which would clamp)."""
    try:
        import numpy as np

        arr = np.asarray(arg) if not isinstance(arg, HostArray) else np.asarray(arg.values)
        lo, hi = (int(arr.min()), int(arr.max())) if arr.size else (0, 0)
    except ImportError:
        flat = _flat_values(arg)[0]
        lo, hi = (int(min(flat)), int(max(flat))) if flat else (0, 0)
    for bad in (lo, hi):
        if not -size <= bad < size:
            raise IndexRangeError(f"{op}: index {bad} in {what} is out of range for an axis of "
                                  f"size {size}", hint=f"indices must lie in [{-size}, {size - 1}]")


def to_storage(arg: Any, t: TensorType, what: str = "argument") -> bytes:
    """``arg`` as the bytes of a GPU buffer holding ``t`` (checks the shape)."""
    st = storage_name(t.dtype)
    try:
        import numpy as np
    except ImportError:
        np = None  # type: ignore[assignment]
    if np is not None and not isinstance(arg, HostArray):
        from rlx_core.targets.numpy_ref.semantics import convert

        arr = np.asarray(arg)
        if tuple(arr.shape) != t.shape:
            raise ArgumentError(f"{what} has shape {list(arr.shape)}, expected {t}")
        arr = convert(arr, t.dtype)
        if t.dtype == dt.bf16:  # rounded already: the top half of each f32's bits
            arr = np.ascontiguousarray(arr, dtype=np.float32).view(np.uint32) >> 16
        data = np.ascontiguousarray(arr).astype(_NUMPY[st]).tobytes()
    else:
        flat, shape = _flat_values(arg)
        if tuple(shape) != t.shape:
            raise ArgumentError(f"{what} has shape {list(shape)}, expected {t}")
        fmt = f"<{len(flat)}{_FORMAT[st]}"
        if t.dtype.is_float and t.dtype != dt.bf16:
            # struct converts each value as float() would, which is all _convert does for
            # floats: one C call instead of one Python call per element (Pyodide trains with
            # this path: parameters and optimizer state go up on every step)
            data = struct.pack(fmt, *flat)
        else:
            data = struct.pack(fmt, *(_convert(v, t.dtype) for v in flat))
    pad = buffer_bytes(t) - len(data)
    return data + b"\0" * pad


def from_storage(data: bytes | bytearray | memoryview, t: TensorType) -> Any:
    """The bytes of a GPU buffer as a host array of ``t`` (numpy when available)."""
    st = storage_name(t.dtype)
    raw = bytes(data[:t.size * _WIDTH[st]])
    try:
        import numpy as np
    except ImportError:
        np = None  # type: ignore[assignment]
    if np is not None:
        arr = np.frombuffer(raw, dtype=_NUMPY[st]).copy()
        if t.dtype == dt.bf16:
            arr = (arr << np.uint32(16)).view(np.float32)
        if t.dtype == dt.bool_:
            arr = arr != 0
        else:
            arr = arr.astype(dt.to_numpy_name(t.dtype))
        return arr.reshape(t.shape)
    vals = struct.unpack(f"<{t.size}{_FORMAT[st]}", raw)
    if t.dtype == dt.bf16:
        vals = tuple(struct.unpack("<f", struct.pack("<I", (v & 0xFFFF) << 16))[0] for v in vals)
    if t.dtype == dt.bool_:
        vals = tuple(v != 0 for v in vals)
    return HostArray(t.dtype.name, t.shape, tuple(vals))
