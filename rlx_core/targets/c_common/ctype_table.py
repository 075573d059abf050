"""dtype -> C types: storage type, register (value) type, accumulator, loads, stores, literals.

Every dtype has a *storage* type (how its elements sit in memory: numpy's layout, bf16 as its
top 16 bits, bool as one byte 0/1, c64 as C99's ``float _Complex``, numpy's complex64 layout) and a *value* type (what a temporary holds while a loop
body computes: f16 and bf16 widen to float, as the numpy reference computes them in f32).
"""

from __future__ import annotations

import math
import struct

from rlx_core.errors import DTypeError
from rlx_core.ir import dtypes as dt
from rlx_core.ir.dtypes import DType

STORAGE: dict[str, str] = {
    "bool": "uint8_t", "i8": "int8_t", "i16": "int16_t", "i32": "int32_t", "i64": "int64_t",
    "u8": "uint8_t", "u32": "uint32_t", "f16": "rlx_f16", "bf16": "uint16_t", "f32": "float",
    "f64": "double", "c64": "float _Complex",
}
VALUE: dict[str, str] = {**STORAGE, "f16": "float", "bf16": "float"}
UNSIGNED: dict[str, str] = {
    "i8": "uint8_t", "i16": "uint16_t", "i32": "uint32_t", "i64": "uint64_t", "u8": "uint8_t",
    "u32": "uint32_t", "bool": "uint8_t",
}
INT_BOUNDS: dict[str, tuple[int, int]] = {
    "i8": (-(2**7), 2**7 - 1), "i16": (-(2**15), 2**15 - 1), "i32": (-(2**31), 2**31 - 1),
    "i64": (-(2**63), 2**63 - 1), "u8": (0, 2**8 - 1), "u32": (0, 2**32 - 1),
}
# the helper-name suffix of each integer type (rlx_div_i32, rlx_f2i_u8, ...)
SUPPORTED: tuple[str, ...] = tuple(STORAGE)


def check(d: DType) -> None:
    if d.name not in STORAGE:
        raise DTypeError(f"C-like targets have no representation for {d}",
                         hint="cast to one of: " + ", ".join(SUPPORTED))


def storage(d: DType) -> str:
    check(d)
    return STORAGE[d.name]


def value(d: DType) -> str:
    check(d)
    return VALUE[d.name]


def is_f(d: DType) -> bool:
    return d.is_float


def is_float32_math(d: DType) -> bool:
    """Computed with float (f-suffixed libm) rather than double."""
    return d.is_float and d != dt.f64


def accumulator(d: DType, op: str) -> str:
    """Accumulator of a reduction or contraction of ``d``.

    Float sums and products accumulate in double (f32 included: numpy sums pairwise, and a
    double running sum is at least as accurate); max/min keep the value type; integer sums
    wrap in uint64 and are cut to the result width once, which equals wrapping at each step.
    """
    if op in ("reduce_max", "reduce_min", "argmax"):
        return value(d)
    if d.is_complex:
        return "double _Complex"
    if d.is_float:
        return "double"
    if d == dt.bool_:
        return "uint8_t"
    return "uint64_t"


def load(d: DType, ref: str) -> str:
    """Storage element ``ref`` as a value."""
    if d == dt.f16:
        return f"rlx_f16_ld({ref})"
    if d == dt.bf16:
        return f"rlx_bf16_ld({ref})"
    return ref


def store(d: DType, val: str) -> str:
    """Value ``val`` in storage form (values are already rounded to the dtype)."""
    if d == dt.f16:
        return f"rlx_f16_st({val})"
    if d == dt.bf16:
        return f"rlx_bf16_st({val})"
    return f"({STORAGE[d.name]})({val})"


def round_to(d: DType, val: str) -> str:
    """A float computation rounded to ``d``'s precision (the reference rounds every op)."""
    if d == dt.f16:
        return f"rlx_round_f16({val})"
    if d == dt.bf16:
        return f"rlx_round_bf16({val})"
    return val


# ---- host-side scalar conversion (mirrors semantics.convert for one Python scalar) ----------


def round_f16(x: float) -> float:
    """``x`` rounded to the nearest binary16 (ties to even); overflow gives +-inf."""
    if math.isnan(x) or math.isinf(x):
        return x
    try:
        return struct.unpack("<e", struct.pack("<e", x))[0]
    except OverflowError:
        return math.copysign(math.inf, x)


def round_f32(x: float) -> float:
    if math.isnan(x) or math.isinf(x):
        return x
    try:
        return struct.unpack("<f", struct.pack("<f", x))[0]
    except OverflowError:
        return math.copysign(math.inf, x)


def bf16_bits(x: float) -> int:
    """The bf16 bit pattern of ``x`` (via float32, round to nearest even; NaN stays NaN)."""
    f = round_f32(x)
    if math.isnan(f):
        return 0x7FC0
    bits = struct.unpack("<I", struct.pack("<f", f))[0]
    bits += 0x7FFF + ((bits >> 16) & 1)
    return (bits >> 16) & 0xFFFF


def f16_bits(x: float) -> int:
    return struct.unpack("<H", struct.pack("<e", round_f16(x)))[0]


def bf16_value(x: float) -> float:
    return struct.unpack("<f", struct.pack("<I", bf16_bits(x) << 16))[0]


def convert_scalar(v: object, d: DType) -> int | float:
    """A Python scalar converted to dtype ``d`` the way ``cast`` does (truncate, saturate)."""
    if d.is_complex:
        c = complex(v)  # type: ignore[arg-type]
        return complex(round_f32(c.real), round_f32(c.imag))  # type: ignore[return-value]
    if isinstance(v, complex):
        v = v.real
    if d == dt.bool_:
        return 1 if v else 0
    if d.is_int:
        if isinstance(v, float):
            lo, hi = INT_BOUNDS[d.name]
            if math.isnan(v):
                return 0
            if v >= hi:
                return hi
            if v <= lo:
                return lo
            return int(v)
        lo, hi = INT_BOUNDS[d.name]
        span = hi - lo + 1
        return (int(v) - lo) % span + lo
    f = float(v)
    if d == dt.f16:
        return round_f16(f)
    if d == dt.bf16:
        return bf16_value(f)
    if d == dt.f32:
        return round_f32(f)
    return f


def float_literal(x: float, d: DType) -> str:
    """A C literal of value type of ``d`` for an already-converted float ``x``."""
    if math.isnan(x):
        return "((float)NAN)" if d != dt.f64 else "((double)NAN)"
    if math.isinf(x):
        inf = "INFINITY" if x > 0 else "(-INFINITY)"
        return inf if d != dt.f64 else f"((double){inf})"
    text = float.hex(x)
    return f"((double){text})" if d == dt.f64 else f"((float){text})"


def int_literal(n: int, d: DType) -> str:
    if d.name in ("i64",):
        if n == -(2**63):
            return "INT64_MIN"
        return f"INT64_C({n})"
    if d.name == "u32":
        return f"UINT32_C({n})"
    if d.name == "i32" and n == -(2**31):
        return "INT32_MIN"
    return f"(({VALUE[d.name]}){n})"


def literal(v: object, d: DType) -> str:
    """C literal (value type) for the scalar ``v`` converted to ``d``."""
    check(d)
    c = convert_scalar(v, d)
    if d == dt.bool_:
        return "((uint8_t)1)" if c else "((uint8_t)0)"
    if d.is_int:
        return int_literal(int(c), d)
    if d.is_complex:  # GCC's and Clang's builtin: no <complex.h> (and its macro I) needed
        z = complex(c)  # type: ignore[arg-type]
        return (f"__builtin_complex({float_literal(z.real, dt.f32)}, "
                f"{float_literal(z.imag, dt.f32)})")
    return float_literal(float(c), d)


def storage_literal(v: object, d: DType) -> str:
    """An initializer for one storage element (f16/bf16 as bit patterns)."""
    c = convert_scalar(v, d)
    if d == dt.f16:
        return f"0x{f16_bits(float(c)):04x}"
    if d == dt.bf16:
        return f"0x{bf16_bits(float(c)):04x}"
    return literal(v, d)
