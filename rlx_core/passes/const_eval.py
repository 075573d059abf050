"""Pure-Python evaluation of MIR ops on constants: the semantics constant folding relies on.

No numpy here (rlx_core imports with the standard library alone). The semantics are those the
numpy reference pins (rlx_core/targets/numpy_ref/semantics.py, the oracle every backend is
checked against). Values are Python scalars (``bool``, ``int``, ``float``) held exactly as the
dtype stores them:

- integers wrap around to the dtype's width (two's complement for signed types);
- ``div`` on integers truncates toward zero, as in C and ``jax.lax.div`` -- it is *not*
  numpy's floor division ``//``; ``rem`` takes the sign of the dividend (C ``%`` / ``fmod``),
  for integers and floats alike; ``pow`` with a negative integer exponent is ``1/x**n``
  truncated (0 unless ``|x| == 1``);
- bool arithmetic is or / xor / and for add / sub / mul; ``logical_not`` is ``~x`` on integers;
- f32 and f16 results are computed in double precision and rounded once to the dtype
  (``struct`` formats ``'f'`` and ``'e'``); for ``+ - * /`` and ``sqrt`` this is exact,
  transcendental functions may differ from a device's libm by an ulp;
- float division by zero follows IEEE 754 (signed infinity, NaN for 0/0); ``round`` is half
  to even; ``sign(-0.0)`` is ``0.0``;
- ``cast`` float -> int truncates toward zero and saturates, NaN -> 0; int -> int wraps.

Anything a target may legitimately compute differently -- integer division or remainder by
zero (undefined in C), ``max``/``min`` of zeros of opposite sign, float powers and remainders
outside their domain -- and the dtypes bf16, packed i4 and c64 raise ``NotFoldable`` so the op
stays for the target to evaluate. ``NotFoldable`` is internal: folding leaves such a node alone.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from rlx_core.ir import dtypes as dt
from rlx_core.ir.dtypes import DType
from rlx_core.ir.graph import Node, Shape, TensorType, row_strides

Scalar = bool | int | float
ConstValue = Scalar | tuple[Scalar, ...]

# the largest tuple constant folding may create (a splat result may have any size)
MAX_ELEMENTS = 4096
FOLDABLE_DTYPES: tuple[DType, ...] = (dt.bool_, *dt.INTS, dt.f16, dt.f32, dt.f64)


class NotFoldable(Exception):
    """This op on these operands has no exactly defined result here; leave it to the target."""


@dataclass(frozen=True)
class ConstData:
    """The value of a ``constant`` node: a splat scalar or a flat row-major tuple."""

    dtype: DType
    shape: Shape
    value: ConstValue

    @property
    def is_splat(self) -> bool:
        return not isinstance(self.value, tuple)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    def elements(self) -> tuple[Scalar, ...]:
        """Every element, row-major (a splat repeated ``size`` times)."""
        if isinstance(self.value, tuple):
            return self.value
        return (self.value,) * self.size

    def uniform(self) -> Scalar | None:
        """The one value every element has, or None when elements differ (or there are none)."""
        if not isinstance(self.value, tuple):
            return self.value
        if not self.value:
            return None
        first = self.value[0]
        same = all(_same_scalar(v, first) for v in self.value)
        return first if same else None

    def attrs(self) -> dict[str, Any]:
        """The attributes of a ``constant`` node holding this value."""
        return {"value": self.value, "shape": self.shape, "dtype": self.dtype}


def _same_scalar(a: Scalar, b: Scalar) -> bool:
    """Bitwise-style equality: NaN equals NaN, 0.0 differs from -0.0."""
    if isinstance(a, float) and isinstance(b, float):
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)
    return a == b


# ---- storing a Python number in a dtype -----------------------------------------------------


def _round_struct(fmt: str, x: float) -> float:
    try:
        return struct.unpack(fmt, struct.pack(fmt, x))[0]
    except OverflowError:
        # struct only raises when the correctly rounded result is infinite
        return math.copysign(math.inf, x)


def wrap_int(dtype: DType, x: int) -> int:
    """``x`` modulo 2**bits, read back as the dtype's signed or unsigned value."""
    mod = 1 << dtype.bits
    v = x % mod
    if dtype.kind is dt.Kind.INT and v >= mod >> 1:
        v -= mod
    return v


def store(dtype: DType, x: Scalar) -> Scalar:
    """``x`` as the dtype holds it: wrapped ints, floats rounded to the storage precision."""
    if dtype not in FOLDABLE_DTYPES:
        raise NotFoldable(f"{dtype} is not folded")
    if dtype == dt.bool_:
        return bool(x)
    if dtype.is_int:
        if isinstance(x, float) and not x.is_integer():
            raise NotFoldable(f"{x!r} is not an integer")
        return wrap_int(dtype, int(x))
    x = float(x)
    if dtype == dt.f32:
        return _round_struct("f", x)
    if dtype == dt.f16:
        return _round_struct("e", x)
    return x


def read_constant(node: Node) -> ConstData | None:
    """The value of a ``constant`` node (elements stored exactly as its dtype holds them), or
    None when the node is not a foldable constant."""
    if node.op != "constant":
        return None
    dtype = node.attr("dtype")
    if not isinstance(dtype, DType) or dtype not in FOLDABLE_DTYPES:
        return None
    shape = tuple(node.attr("shape", ()))
    raw = node.attr("value")
    try:
        if isinstance(raw, tuple):
            if len(raw) != math.prod(shape) or len(raw) > MAX_ELEMENTS:
                return None
            value: ConstValue = tuple(store(dtype, _scalar(v)) for v in raw)
        else:
            value = store(dtype, _scalar(raw))
    except NotFoldable:
        return None
    return ConstData(dtype, shape, value)


def _scalar(v: object) -> Scalar:
    if isinstance(v, bool | int | float):
        return v
    raise NotFoldable(f"constant element {v!r} is not a real number")


# ---- elementwise semantics ------------------------------------------------------------------


def _fdiv(x: float, y: float) -> float:
    if y == 0.0:
        if x == 0.0 or math.isnan(x):
            return math.nan
        negative = (math.copysign(1.0, x) < 0) != (math.copysign(1.0, y) < 0)
        return -math.inf if negative else math.inf
    return x / y


def _fmax(x: float, y: float, pick_max: bool) -> float:
    if math.isnan(x) or math.isnan(y):
        return math.nan  # max/min propagate NaN (numpy.maximum, jax.lax.max)
    if x == y == 0.0:
        # the sign of max(-0.0, 0.0) differs between implementations; do not guess
        if math.copysign(1.0, x) != math.copysign(1.0, y):
            raise NotFoldable("max/min of zeros of opposite sign")
    return max(x, y) if pick_max else min(x, y)


def _fsign(x: float) -> float:
    if math.isnan(x):
        return x
    if x == 0.0:
        return 0.0  # numpy: sign(-0.0) is +0.0
    return 1.0 if x > 0 else -1.0


def _flog(x: float) -> float:
    if math.isnan(x):
        return x
    if x == 0.0:
        return -math.inf
    if x < 0.0:
        return math.nan
    return math.log(x)


def _fsqrt(x: float) -> float:
    if x < 0.0:
        return math.nan
    return math.sqrt(x)


def _fexp(x: float) -> float:
    try:
        return math.exp(x)
    except OverflowError:
        return math.inf


def _logistic(x: float) -> float:
    # written so that neither branch overflows
    if x >= 0.0:
        return 1.0 / (1.0 + math.exp(-x))
    e = math.exp(x)
    return e / (1.0 + e)


def _ftrig(fn: Callable[[float], float]) -> Callable[[float], float]:
    def trig(x: float) -> float:
        return math.nan if math.isinf(x) or math.isnan(x) else fn(x)

    return trig


def _fround_dir(fn: Callable[[float], int]) -> Callable[[float], float]:
    def rounded(x: float) -> float:
        if math.isinf(x) or math.isnan(x):
            return x
        r = float(fn(x))
        return math.copysign(0.0, x) if r == 0.0 else r  # floor(-0.0) and ceil(-0.5) are -0.0

    return rounded


_FLOAT_UNARY: dict[str, Callable[[float], float]] = {
    "neg": lambda x: -x,
    "abs": abs,
    "exp": _fexp,
    "log": _flog,
    "sqrt": _fsqrt,
    "rsqrt": lambda x: _fdiv(1.0, _fsqrt(x)),
    "tanh": math.tanh,
    "erf": math.erf,
    "logistic": _logistic,
    "sin": _ftrig(math.sin),
    "cos": _ftrig(math.cos),
    "floor": _fround_dir(math.floor),
    "ceil": _fround_dir(math.ceil),
    "sign": _fsign,
    "round": _fround_dir(round),  # Python's round is half to even, like numpy's
    "reciprocal": lambda x: _fdiv(1.0, x),
}

_INT_UNARY: dict[str, Callable[[int], int]] = {
    "neg": lambda x: -x,
    "abs": abs,
    "sign": lambda x: (x > 0) - (x < 0),
    "logical_not": lambda x: ~x,
}


def eval_unary(op: str, dtype: DType, x: Scalar) -> Scalar:
    """``op(x)`` for an element of ``dtype``; raises NotFoldable where it is not defined here."""
    if dtype == dt.bool_:
        if op == "logical_not":
            return not x
    elif dtype.is_int:
        if op in _INT_UNARY:
            return wrap_int(dtype, _INT_UNARY[op](int(x)))
    elif dtype.is_float and op in _FLOAT_UNARY:
        return store(dtype, _FLOAT_UNARY[op](float(x)))
    raise NotFoldable(f"{op} on {dtype} is not folded")


def _trunc_div(x: int, y: int) -> int:
    if y == 0:
        raise NotFoldable("integer division by zero")
    q = abs(x) // abs(y)
    return q if (x < 0) == (y < 0) else -q


def _int_binary(op: str, dtype: DType, x: int, y: int) -> int:
    if op == "add":
        r = x + y
    elif op == "sub":
        r = x - y
    elif op == "mul":
        r = x * y
    elif op == "div":
        r = _trunc_div(x, y)
    elif op == "rem":
        r = x - y * _trunc_div(x, y)
    elif op == "pow":
        if y < 0:
            r = 1 if x == 1 else ((-1 if y % 2 else 1) if x == -1 else 0)
        else:
            r = pow(x, y, 1 << dtype.bits)
    elif op == "max":
        r = max(x, y)
    elif op == "min":
        r = min(x, y)
    elif op == "and":
        r = x & y
    elif op == "or":
        r = x | y
    elif op == "xor":
        r = x ^ y
    else:
        raise NotFoldable(f"{op} on {dtype} is not folded")
    return wrap_int(dtype, r)


def _float_binary(op: str, x: float, y: float) -> float:
    if op == "add":
        return x + y
    if op == "sub":
        return x - y
    if op == "mul":
        return x * y
    if op == "div":
        return _fdiv(x, y)
    if op == "max":
        return _fmax(x, y, True)
    if op == "min":
        return _fmax(x, y, False)
    try:
        if op == "rem":
            return math.fmod(x, y)
        if op == "pow":
            return math.pow(x, y)
    except (ValueError, OverflowError):
        # 0 ** -1, (-8) ** (1/3), fmod(inf, y): IEEE answers exist, but we do not guess them
        raise NotFoldable(f"{op}({x!r}, {y!r})") from None
    raise NotFoldable(f"{op} on floats is not folded")


def eval_binary(op: str, dtype: DType, x: Scalar, y: Scalar) -> Scalar:
    """``op(x, y)`` for two elements of ``dtype``."""
    if dtype == dt.bool_:
        # computed in i8 and read back as != 0: add is or, sub is xor, mul is and
        table = {
            "and": x and y,
            "or": x or y,
            "xor": x != y,
            "max": x or y,
            "min": x and y,
            "add": x or y,
            "sub": x != y,
            "mul": x and y,
        }
        if op in table:
            return bool(table[op])
        raise NotFoldable(f"{op} on bool is not folded")
    if dtype.is_int:
        return _int_binary(op, dtype, int(x), int(y))
    if dtype.is_float:
        return store(dtype, _float_binary(op, float(x), float(y)))
    raise NotFoldable(f"{op} on {dtype} is not folded")


def eval_compare(op: str, x: Scalar, y: Scalar) -> bool:
    """``x op y`` (NaN compares unequal to everything, as in IEEE 754)."""
    if op == "eq":
        return x == y
    if op == "ne":
        return x != y
    if op == "lt":
        return x < y
    if op == "le":
        return x <= y
    if op == "gt":
        return x > y
    if op == "ge":
        return x >= y
    raise NotFoldable(f"unknown comparison {op}")


def eval_cast(x: Scalar, src: DType, dst: DType) -> Scalar:
    """``x`` of dtype ``src`` converted to ``dst``."""
    if dst not in FOLDABLE_DTYPES or src not in FOLDABLE_DTYPES:
        raise NotFoldable(f"cast {src} -> {dst} is not folded")
    if dst == dt.bool_:
        return x != 0  # NaN is truthy, as in numpy and C
    if dst.is_int:
        if isinstance(x, float):
            if math.isnan(x):
                return 0
            lo = -(1 << (dst.bits - 1)) if dst.kind is dt.Kind.INT else 0
            hi = (1 << (dst.bits - 1)) - 1 if dst.kind is dt.Kind.INT else (1 << dst.bits) - 1
            if math.isinf(x):
                return hi if x > 0 else lo
            return min(max(math.trunc(x), lo), hi)  # saturate
        return wrap_int(dst, int(x))
    if isinstance(x, int) and not isinstance(x, bool) and abs(x) > 1 << 53 and dst != dt.f64:
        raise NotFoldable("large integer to a narrow float would round twice")
    return store(dst, float(x))


# ---- whole ops on constant operands ---------------------------------------------------------


def _unravel(index: int, shape: Shape) -> list[int]:
    out = []
    for d in reversed(shape):
        out.append(index % d)
        index //= d
    return out[::-1]


def _remap(src: ConstData, out: TensorType, source_index: Callable[[list[int]], int]) -> ConstData:
    """An output whose element at each multi-index is ``src`` at ``source_index(index)``."""
    if src.is_splat:
        return ConstData(out.dtype, out.shape, src.value)
    if len(src.elements()) == 1:
        # one element (an ONNX scalar constant, as Clip's bounds): the result is a splat; a
        # tuple would be materialised and read by every kernel using it
        return ConstData(out.dtype, out.shape, src.elements()[0])
    if out.size > MAX_ELEMENTS:
        raise NotFoldable("result too large to fold")
    elems = src.elements()
    return ConstData(
        out.dtype,
        out.shape,
        tuple(elems[source_index(_unravel(i, out.shape))] for i in range(out.size)),
    )


def _movement(op: str, attrs: dict[str, Any], src: ConstData, out: TensorType) -> ConstData:
    in_strides = row_strides(src.shape)
    if op == "reshape":
        return ConstData(out.dtype, out.shape, src.value)
    if op == "transpose":
        perm = tuple(attrs["perm"])
        return _remap(src, out, lambda idx: sum(idx[j] * in_strides[p] for j, p in enumerate(perm)))
    if op == "broadcast_in_dim":
        dims = tuple(attrs["dims"])
        return _remap(
            src,
            out,
            lambda idx: sum(
                (idx[d] if src.shape[i] != 1 else 0) * in_strides[i] for i, d in enumerate(dims)
            ),
        )
    if op == "slice":
        start, stride = tuple(attrs["start"]), tuple(attrs["stride"])
        return _remap(
            src,
            out,
            lambda idx: sum(
                (start[i] + idx[i] * stride[i]) * in_strides[i] for i in range(len(idx))
            ),
        )
    raise NotFoldable(f"{op} is not folded")


def _elementwise(
    fn: Callable[..., Scalar], operands: Sequence[ConstData], out: TensorType
) -> ConstData:
    if all(c.is_splat for c in operands):
        return ConstData(out.dtype, out.shape, fn(*(c.value for c in operands)))
    if out.size > MAX_ELEMENTS:
        raise NotFoldable("result too large to fold")
    cols = [c.value if isinstance(c.value, tuple) else (c.value,) * out.size for c in operands]
    return ConstData(out.dtype, out.shape, tuple(fn(*row) for row in zip(*cols, strict=True)))


def _iota(attrs: dict[str, Any], out: TensorType) -> ConstData:
    if out.size > MAX_ELEMENTS or out.dtype == dt.bool_:
        raise NotFoldable("iota too large (or bool) to fold")
    dim = attrs["dim"]
    return ConstData(
        out.dtype,
        out.shape,
        tuple(store(out.dtype, _unravel(i, out.shape)[dim]) for i in range(out.size)),
    )


def eval_op(
    op: str, attrs: dict[str, Any], operands: Sequence[ConstData], out: TensorType
) -> ConstData:
    """The value of ``op(operands) {attrs}`` whose result type is ``out``, or NotFoldable."""
    if out.dtype not in FOLDABLE_DTYPES:
        raise NotFoldable(f"{out.dtype} results are not folded")
    from rlx_core.ir.ops import MIR_OPS  # the op table is the authority on categories

    d = MIR_OPS.get(op)
    if d is None:
        raise NotFoldable(f"{op} is not a MIR op")
    cat = d.category
    if cat == "unary":
        src = operands[0].dtype
        return _elementwise(lambda x: eval_unary(op, src, x), operands, out)
    if cat == "binary":
        src = operands[0].dtype
        return _elementwise(lambda x, y: eval_binary(op, src, x, y), operands, out)
    if cat == "compare":
        return _elementwise(lambda x, y: eval_compare(op, x, y), operands, out)
    if cat == "select":
        return _elementwise(lambda p, x, y: x if p else y, operands, out)
    if cat == "cast":
        src = operands[0].dtype
        return _elementwise(lambda x: eval_cast(x, src, out.dtype), operands, out)
    if cat == "movement" and len(operands) == 1:
        return _movement(op, attrs, operands[0], out)
    if op == "iota":
        return _iota(attrs, out)
    raise NotFoldable(f"{op} is not folded")
