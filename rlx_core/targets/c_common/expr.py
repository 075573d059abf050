"""C expressions for the elementwise MIR ops (unary, binary, compare, select, cast).

``render(op, attrs, args, in_dtypes, out_dtype)`` takes operand expressions in *value* form
(ctype_table.VALUE) and returns the result in value form, already rounded to the result dtype
(f16/bf16 round after every op, like the reference) and, for bool, already 0 or 1.
"""

from __future__ import annotations

from typing import Any

from rlx_core.errors import RlxError
from rlx_core.ir import dtypes as dt
from rlx_core.ir.dtypes import DType
from rlx_core.targets.c_common.ctype_table import UNSIGNED, VALUE, round_to


class RenderError(RlxError):
    """The C-like renderer met an op, dtype or layout it has no rule for."""

    code = "RLX-X004"


# float unary ops: (float spelling, double spelling); "{x}" is the operand
_FLOAT_UNARY: dict[str, tuple[str, str]] = {
    "neg": ("(-{x})", "(-{x})"),
    "abs": ("fabsf({x})", "fabs({x})"),
    "exp": ("rlx_exp_f({x})", "exp({x})"),  # prelude: vectorisable
    "log": ("logf({x})", "log({x})"),
    "sqrt": ("sqrtf({x})", "sqrt({x})"),
    "rsqrt": ("(1.0f / sqrtf({x}))", "(1.0 / sqrt({x}))"),
    "tanh": ("rlx_tanh_f({x})", "tanh({x})"),  # prelude: vectorisable
    "erf": ("rlx_erf_f({x})", "erf({x})"),
    "logistic": ("rlx_logistic_f({x})", "rlx_logistic_d({x})"),
    "sin": ("sinf({x})", "sin({x})"),
    "cos": ("cosf({x})", "cos({x})"),
    "floor": ("floorf({x})", "floor({x})"),
    "ceil": ("ceilf({x})", "ceil({x})"),
    "round": ("rintf({x})", "rint({x})"),  # half to even in the default rounding mode
    "sign": ("rlx_sign_f({x})", "rlx_sign_d({x})"),
    "reciprocal": ("(1.0f / {x})", "(1.0 / {x})"),
}
_FLOAT_BINARY: dict[str, tuple[str, str]] = {
    "add": ("({a} + {b})", "({a} + {b})"),
    "sub": ("({a} - {b})", "({a} - {b})"),
    "mul": ("({a} * {b})", "({a} * {b})"),
    "div": ("({a} / {b})", "({a} / {b})"),
    "pow": ("powf({a}, {b})", "pow({a}, {b})"),
    "max": ("rlx_max_f({a}, {b})", "rlx_max_d({a}, {b})"),
    "min": ("rlx_min_f({a}, {b})", "rlx_min_d({a}, {b})"),
    "rem": ("fmodf({a}, {b})", "fmod({a}, {b})"),
}
# c64 (C99 float _Complex through GCC/Clang builtins: libm's cexpf & co., no <complex.h>)
_COMPLEX_UNARY: dict[str, str] = {
    "neg": "(-{x})",
    "abs": "((float _Complex)__builtin_cabsf({x}))",
    "exp": "__builtin_cexpf({x})",
    "log": "__builtin_clogf({x})",
    "sqrt": "__builtin_csqrtf({x})",
    "rsqrt": "(1.0f / __builtin_csqrtf({x}))",
    "tanh": "__builtin_ctanhf({x})",
    "sin": "__builtin_csinf({x})",
    "cos": "__builtin_ccosf({x})",
    "reciprocal": "(1.0f / {x})",
}
_COMPLEX_BINARY: dict[str, str] = {
    "add": "({a} + {b})", "sub": "({a} - {b})", "mul": "({a} * {b})", "div": "({a} / {b})",
    "pow": "__builtin_cpowf({a}, {b})",
}
_COMPARE = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
# bool arithmetic is i8 arithmetic read back as != 0 (semantics.py); these are its truth tables
_BOOL_BINARY = {
    "add": "({a} | {b})", "sub": "({a} ^ {b})", "mul": "({a} & {b})", "div": "({a} & {b})",
    "rem": "0", "pow": "({a} | !{b})", "max": "({a} | {b})", "min": "({a} & {b})",
    "and": "({a} & {b})", "or": "({a} | {b})", "xor": "({a} ^ {b})",
}
_BOOL_UNARY = {"neg": "{x}", "abs": "{x}", "sign": "{x}", "logical_not": "(!{x})"}


def _f(d: DType, pair: tuple[str, str]) -> str:
    return pair[1] if d == dt.f64 else pair[0]


def _unary(op: str, x: str, d: DType, erf: str = "") -> str:
    if d == dt.bool_:
        if op not in _BOOL_UNARY:
            raise RenderError(f"{op} is not defined on bool")
        return f"((uint8_t){_BOOL_UNARY[op].format(x=x)})"
    if d.is_complex:
        if op not in _COMPLEX_UNARY:
            raise RenderError(f"{op} has no C rule for {d}")
        return _COMPLEX_UNARY[op].format(x=x)
    if d.is_float:
        if op not in _FLOAT_UNARY:
            raise RenderError(f"{op} has no C rule for {d}")
        if op == "erf" and erf and d != dt.f64:
            return round_to(d, f"{erf}({x})")
        return round_to(d, _f(d, _FLOAT_UNARY[op]).format(x=x))
    t, u = VALUE[d.name], UNSIGNED[d.name]
    signed = d.kind is dt.Kind.INT
    if op == "neg":
        return f"(({t})(({u})0 - ({u}){x}))"
    if op == "abs":
        return f"rlx_abs_{d.name}({x})" if signed else x
    if op == "sign":
        return f"(({t})(({x} > 0) - ({x} < 0)))" if signed else f"(({t})({x} != 0))"
    if op == "logical_not":
        return f"(({t})~{x})"
    raise RenderError(f"{op} is not defined on integer dtype {d}",
                      hint="cast to f32 first")


def _binary(op: str, a: str, b: str, d: DType) -> str:
    if d == dt.bool_:
        return f"((uint8_t){_BOOL_BINARY[op].format(a=a, b=b)})"
    if d.is_complex:
        if op not in _COMPLEX_BINARY:
            raise RenderError(f"{op} is not defined on {d}")
        return _COMPLEX_BINARY[op].format(a=a, b=b)
    if d.is_float:
        if op not in _FLOAT_BINARY:
            raise RenderError(f"{op} is not defined on {d}")
        return round_to(d, _f(d, _FLOAT_BINARY[op]).format(a=a, b=b))
    t, u = VALUE[d.name], UNSIGNED[d.name]
    if op in ("add", "sub", "mul"):
        sym = {"add": "+", "sub": "-", "mul": "*"}[op]
        # unsigned arithmetic wraps where signed overflow would be undefined behaviour
        return f"(({t})(({u}){a} {sym} ({u}){b}))"
    if op in ("div", "rem", "pow"):
        return f"rlx_{op}_{d.name}({a}, {b})"
    if op == "max":
        return f"(({a}) > ({b}) ? ({a}) : ({b}))"
    if op == "min":
        return f"(({a}) < ({b}) ? ({a}) : ({b}))"
    sym = {"and": "&", "or": "|", "xor": "^"}[op]
    return f"(({t})({a} {sym} {b}))"


def _cast(x: str, src: DType, d: DType) -> str:
    if d.is_complex:  # a real value becomes the real part
        return f"((float _Complex)({x}))"
    if src.is_complex:  # to a real type: the real part (numpy drops the imaginary one)
        if d == dt.bool_:
            return f"((uint8_t)({x} != 0))"
        x, src = f"__builtin_crealf({x})", dt.f32
    if d == dt.bool_:
        return f"((uint8_t)({x} != 0))"
    if d.is_int:
        if src.is_float:
            return f"rlx_f2i_{d.name}((double){x})"
        return f"(({VALUE[d.name]}){x})"  # int -> int wraps (modulo 2^n, as GCC and Clang do)
    # to a float type
    if src == dt.bool_ and d in (dt.f32, dt.f64):
        # a select, not a conversion: GCC 12 leaves (float) of a compare's uint8_t scalar (one
        # vcvtusi2ss an element; the MNIST step's one-hot, 64 x 10 a thread, 3.6x slower)
        return f"({x} ? 1.0f : 0.0f)" if d == dt.f32 else f"({x} ? 1.0 : 0.0)"
    if d == dt.f64:
        return f"((double){x})"
    if d == dt.f32:
        return f"((float){x})"
    if d == dt.f16:
        # straight from double: numpy rounds f64 -> f16 once, not through f32
        return f"rlx_round_f16_d((double){x})" if src in (dt.f64, dt.i64, dt.u32, dt.i32) \
            else f"rlx_round_f16((float){x})"
    return f"rlx_round_bf16((float){x})"  # bf16: numpy goes through float32 first


def render(op: str, attrs: dict[str, Any], args: list[str], in_dtypes: list[DType],
           out: DType, erf: str = "") -> str:
    """The value-form C expression of one elementwise node; ``erf`` names the C function a
    float erf below f64 calls ("": the prelude's rlx_erf_f)."""
    if op == "select":
        return f"({args[0]} ? {args[1]} : {args[2]})"
    if op == "cast":
        return _cast(args[0], in_dtypes[0], out)
    if op in _COMPARE:
        return f"((uint8_t)({args[0]} {_COMPARE[op]} {args[1]}))"
    if len(args) == 1:
        return _unary(op, args[0], in_dtypes[0], erf)
    if len(args) == 2:
        return _binary(op, args[0], args[1], in_dtypes[0])
    raise RenderError(f"no C expression rule for {op}")
