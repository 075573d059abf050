"""Element types and the one promotion table every op uses."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

from rlx_core.errors import DTypeError


class Kind(enum.Enum):
    """The family of an element type: boolean, signed or unsigned integer, float, complex."""

    BOOL = "bool"
    INT = "int"
    UINT = "uint"
    FLOAT = "float"
    COMPLEX = "complex"


@dataclass(frozen=True)
class DType:
    """An element type. ``bits`` is the storage width (packed i4 is 4 bits)."""

    name: str
    kind: Kind
    bits: int

    @property
    def itemsize(self) -> float:
        """Bytes per element (0.5 for packed i4)."""
        return self.bits / 8

    @property
    def is_float(self) -> bool:
        return self.kind is Kind.FLOAT

    @property
    def is_int(self) -> bool:
        return self.kind in (Kind.INT, Kind.UINT)

    @property
    def is_complex(self) -> bool:
        return self.kind is Kind.COMPLEX

    @property
    def is_inexact(self) -> bool:
        return self.kind in (Kind.FLOAT, Kind.COMPLEX)

    def __repr__(self) -> str:
        return self.name

    def __str__(self) -> str:
        return self.name


bool_ = DType("bool", Kind.BOOL, 8)
i4 = DType("i4", Kind.INT, 4)
i8 = DType("i8", Kind.INT, 8)
i16 = DType("i16", Kind.INT, 16)
i32 = DType("i32", Kind.INT, 32)
i64 = DType("i64", Kind.INT, 64)
u8 = DType("u8", Kind.UINT, 8)
u32 = DType("u32", Kind.UINT, 32)
f16 = DType("f16", Kind.FLOAT, 16)
bf16 = DType("bf16", Kind.FLOAT, 16)
f32 = DType("f32", Kind.FLOAT, 32)
f64 = DType("f64", Kind.FLOAT, 64)
c64 = DType("c64", Kind.COMPLEX, 64)

ALL: tuple[DType, ...] = (bool_, i4, i8, i16, i32, i64, u8, u32, f16, bf16, f32, f64, c64)
BY_NAME: dict[str, DType] = {d.name: d for d in ALL}
FLOATS = (f16, bf16, f32, f64)
INTS = (i8, i16, i32, i64, u8, u32)

# numpy spelling of each dtype; bf16 and packed i4 have no numpy dtype, so the host array layer
# keeps bf16 in float32 and i4 unpacked in int8 (see to_numpy_name).
_NUMPY_NAMES = {
    "bool": "bool", "i4": "int8", "i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64",
    "u8": "uint8", "u32": "uint32", "f16": "float16", "bf16": "float32", "f32": "float32",
    "f64": "float64", "c64": "complex64",
}
_FROM_NUMPY = {
    "bool": bool_, "int8": i8, "int16": i16, "int32": i32, "int64": i64, "uint8": u8,
    "uint32": u32, "float16": f16, "float32": f32, "float64": f64, "complex64": c64,
}


def get(name: object) -> DType:
    """Resolve a dtype from a DType, its name (``"f32"``), or a numpy dtype / name."""
    if isinstance(name, DType):
        return name
    if isinstance(name, type):  # numpy scalar types (np.float32) and Python's float/int/bool
        text = name.__name__
    else:
        text = str(getattr(name, "name", name))
    if text in BY_NAME:
        return BY_NAME[text]
    if text in _FROM_NUMPY:
        return _FROM_NUMPY[text]
    aliases = {"float": f32, "int": i64, "bool_": bool_, "bfloat16": bf16, "int4": i4}
    if text in aliases:
        return aliases[text]
    raise DTypeError(
        f"unknown dtype {text!r}",
        hint=f"use one of: {', '.join(d.name for d in ALL)}",
    )


def to_numpy_name(dtype: DType) -> str:
    """The numpy dtype name used to hold values of ``dtype`` on the host."""
    return _NUMPY_NAMES[dtype.name]


# ---------------------------------------------------------------------------------------------
# Promotion. The lattice below is the single source of truth: an edge a -> b means "a converts
# to b without losing values". The promoted type of (a, b) is the least type above both.
#
#   bool -> u8 -> u32 -> i64        bool -> i8 -> i16 -> i32 -> i64      u8 -> i16
#   i64 -> f16, i64 -> bf16 (ints become floats on mixing, as in JAX)
#   f16 -> f32, bf16 -> f32, f32 -> f64, f32 -> c64, f64 -> c64 (c64 is the only complex type)
#
# Packed i4 is a storage type only: it never promotes; cast it explicitly (or dequantize).
_EDGES: dict[DType, tuple[DType, ...]] = {
    bool_: (u8, i8),
    u8: (u32, i16),
    u32: (i64,),
    i8: (i16,),
    i16: (i32,),
    i32: (i64,),
    i64: (f16, bf16),
    f16: (f32,),
    bf16: (f32,),
    f32: (f64, c64),
    f64: (c64,),
    c64: (),
}


def _upper_set(d: DType) -> frozenset[DType]:
    seen = {d}
    todo = [d]
    while todo:
        for nxt in _EDGES[todo.pop()]:
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return frozenset(seen)


_UPPER = {d: _upper_set(d) for d in _EDGES}


def promote(a: DType, b: DType) -> DType:
    """The promoted dtype of a binary op on ``a`` and ``b`` (see the lattice above)."""
    if a == b:
        return a
    if a == i4 or b == i4:
        raise DTypeError(
            f"packed i4 does not mix with {b if a == i4 else a}",
            hint="dequantize first: cast the i4 tensor to f32 (or use rlx.nn.dequantize)",
        )
    common = _UPPER[a] & _UPPER[b]
    # the least element: the one whose own upper set contains all the others
    for cand in sorted(common, key=lambda d: len(_UPPER[d]), reverse=True):
        if common <= _UPPER[cand]:
            return cand
    raise DTypeError(f"no common dtype for {a} and {b}")  # unreachable for this lattice


def promotion_table() -> str:
    """The full promotion table as markdown (docs/dtypes.md is generated from it)."""
    names = [d for d in ALL if d != i4]
    head = "| | " + " | ".join(d.name for d in names) + " |"
    sep = "|---" * (len(names) + 1) + "|"
    rows = [
        f"| **{a.name}** | " + " | ".join(promote(a, b).name for b in names) + " |" for a in names
    ]
    return "\n".join([head, sep, *rows])


def weak_scalar_dtype(value: object, other: DType) -> DType:
    """dtype of a Python scalar mixed with a tensor of ``other`` (scalars are 'weak', as in JAX)."""
    if isinstance(value, bool):
        return other
    if isinstance(value, int):
        return other
    if isinstance(value, float):
        return other if other.is_inexact else f32
    if isinstance(value, complex):
        return c64
    raise DTypeError(f"cannot use {type(value).__name__} as a tensor scalar")


def python_scalar(value: Any, d: DType) -> bool | int | float | complex:
    """``value`` as the Python scalar a constant of dtype ``d`` holds: bool, int, complex or
    float (no rounding to ``d``'s width; codegen does that)."""
    if d == bool_:
        return bool(value)
    if d.is_int:
        return int(value)
    if d.is_complex:
        return complex(value)
    return float(value)
