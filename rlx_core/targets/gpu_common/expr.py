"""GPU kernel expressions: storage/compute types, literals, casts, elementwise ops, index maps.

The kernels (kernels.py) build loop nests; this file says what one value is inside them, in
any dialect (dialect.py). ``ExprGen`` gives the expression of any kernel value at a
multi-index: a buffer read, a fused elementwise node, or an index map (broadcast, reshape,
iota) followed to its operand, with each (value, index) computed once as a local.

Semantics are the numpy reference's, not the GPU's: integers wrap, ``x / 0`` on integers is 0,
float compares and min/max see NaN on the bits (drivers may assume no NaNs and fold ``x != x``
to false, and lavapipe's max/min drop NaN), float->int casts saturate with NaN -> 0.
"""

from __future__ import annotations

import math
import re
import struct
from typing import Any

from rlx_core.errors import RlxError
from rlx_core.ir import dtypes as dt
from rlx_core.ir.dtypes import DType
from rlx_core.ir.graph import Node, Shape, TensorType, row_strides
from rlx_core.ir.ops import is_elementwise
from rlx_core.targets.gpu_common.dialect import Dialect

# dtype -> storage type key in buffers; dtype -> compute type key in registers
# (bf16 is its 16 bits in a u32 in every language: held as the top half of an f32's bits)
STORAGE: dict[str, str] = {"f32": "f32", "f16": "f16", "i32": "i32", "u32": "u32", "bool": "u32",
                           "i8": "i32", "i16": "i32", "u8": "u32", "bf16": "u32", "f64": "f64"}
COMPUTE: dict[str, str] = {"f32": "f32", "f16": "f32", "i32": "i32", "u32": "u32", "bool": "bool",
                           "i8": "i32", "i16": "i32", "u8": "u32", "bf16": "f32", "f64": "f64"}
# compute keys of float values (f64 only in dialects with ``has_f64``: OpenCL with cl_khr_fp64)
FLOATS = ("f32", "f64")


class GpuRenderError(RlxError):
    """A LIR kernel the GPU renderer has no lowering for (a dtype or op it does not cover)."""

    code = "RLX-K001"


def safe(text: str) -> str:
    """A value name made safe for a comment."""
    return re.sub(r"[^A-Za-z0-9_.]", "_", text)


def check_dtype(d: Dialect, t: DType, where: str) -> None:
    if t.name not in STORAGE or (t == dt.f16 and not d.has_f16) or (
            t == dt.f64 and not d.has_f64 and d.f64_emulation is None):
        raise GpuRenderError(f"{where}: {d.name} kernels have no {t.name}",
                             hint=f"the {d.name} legalizer should have rejected or narrowed it; "
                                  f"cast to f32/i32 first")


# ---- scalars ---------------------------------------------------------------------------------


def bounds(t: DType) -> tuple[int, int]:
    if t.kind is dt.Kind.UINT:
        return 0, 2 ** t.bits - 1
    return -(2 ** (t.bits - 1)), 2 ** (t.bits - 1) - 1


def _wrap_int(v: int, t: DType) -> int:
    m = v % (2 ** t.bits)
    if t.kind is dt.Kind.INT and m >= 2 ** (t.bits - 1):
        m -= 2 ** t.bits
    return m


def lit(d: Dialect, value: Any, t: DType) -> str:
    """A literal of ``value`` in ``t``'s compute type (cast semantics for splats)."""
    c = COMPUTE[t.name]
    if c == "bool":
        return "true" if bool(value) else "false"
    if c == "f64":
        f = float(value)
        if math.isfinite(f):
            return d.double_lit(f)
        return d.nonfinite_lit64(struct.unpack("<Q", struct.pack("<d", f))[0])
    if c == "f32":
        f = float(value)
        if math.isfinite(f):
            return d.float_lit(f)
        return d.nonfinite_lit(struct.unpack("<I", struct.pack("<f", f))[0])
    if isinstance(value, float):
        lo, hi = bounds(t)
        value = 0 if math.isnan(value) else max(lo, min(hi, int(value)))
    return d.int_lit(_wrap_int(int(value), t), c)


def zero(d: Dialect, t: DType) -> str:
    return lit(d, 0, t)


def nan(d: Dialect, key: str = "f32") -> str:
    return d.nonfinite_lit64(0x7FF8000000000000) if key == "f64" else d.nonfinite_lit(0x7FC00000)


def flit(d: Dialect, f: float, key: str) -> str:
    """A finite float literal of compute type ``key`` (f32 or f64)."""
    return d.double_lit(f) if key == "f64" else d.float_lit(f)


def finish(d: Dialect, e: str, t: DType) -> str:
    """Round a computed value to ``t``: f16/bf16 rounding, narrow-integer wrap-around."""
    if t == dt.f16:
        return d.f16_round(e)
    if t == dt.bf16:  # round to nearest even on the bits (helpers.py), as the reference does
        return f"rlx_bf16({e})"
    if t in (dt.i8, dt.i16):
        s = 32 - t.bits
        return f"({d.int_binary('<<', e, f'{s}u', 'i32')} >> {s}u)"
    if t == dt.u8:
        return f"({e} & 255u)"
    return e


def load(d: Dialect, e: str, t: DType) -> str:
    """Storage element -> compute value."""
    if t == dt.f64 and d.f64_emulation is not None:
        return f"rlx_df_load({e})"
    if t == dt.bool_:
        return f"({e} != 0u)"
    if t == dt.f16:
        return d.conv("f32", e)
    if t == dt.bf16:
        return d.bitcast("f32", f"({e} << 16u)")
    return e


def store(d: Dialect, e: str, t: DType) -> str:
    """Compute value -> storage element."""
    if t == dt.f64 and d.f64_emulation is not None:
        return f"rlx_df_store({e})"
    if t == dt.bool_:
        return d.select("0u", "1u", e)
    if t == dt.f16:
        return d.conv("f16", e)
    if t == dt.bf16:
        return f"rlx_bf16_bits({e})"
    return e


def bits(d: Dialect, e: str) -> str:
    return d.bitcast("u32", e)


def isnan(d: Dialect, e: str, key: str = "f32") -> str:
    """A NaN test on the bits: shader compilers may fold ``x != x`` to false."""
    if key == "f64" and d.f64_emulation is not None:
        return f"rlx_df_isnan({e})"
    if key == "f64":
        return f"(({d.bitcast('u64', e)} & {d.u64_lit(2 ** 63 - 1)}) > {d.u64_lit(0x7FF << 52)})"
    return f"(({bits(d, e)} & 0x7fffffffu) > 0x7f800000u)"


def _nonzero_bits(d: Dialect, e: str, key: str) -> str:
    """``e != 0`` on the bits (NaN stays truthy whatever the compiler assumes)."""
    if key == "f64":
        return f"(({d.bitcast('u64', e)} & {d.u64_lit(2 ** 63 - 1)}) != {d.u64_lit(0)})"
    return f"(({bits(d, e)} & 0x7fffffffu) != 0u)"


def cast(d: Dialect, e: str, src: DType, dst: DType) -> str:
    """``cast`` semantics: float->int truncates and saturates (NaN -> 0), int->int wraps."""
    if d.f64_emulation is not None and dt.f64 in (src, dst):
        return d.f64_emulation.cast(d, e, src, dst)
    cs, cd = COMPUTE[src.name], COMPUTE[dst.name]
    if dst == dt.bool_:
        if cs in FLOATS:  # on the bits, so that NaN stays truthy whatever the compiler assumes
            return _nonzero_bits(d, e, cs)
        return e if src == dt.bool_ else f"({e} != {zero(d, src)})"
    if src == dt.bool_:
        return d.select(zero(d, dst), lit(d, 1, dst), e)
    if cd in FLOATS:
        return finish(d, d.conv(cd, e) if cs != cd else e, dst)
    if cs in FLOATS:
        lo, hi = bounds(dst)
        inner = d.conv(cd, e)
        sat = d.select(d.select(inner, lit(d, hi, dst), f"{e} >= {flit(d, float(hi), cs)}"),
                       lit(d, lo, dst), f"{e} <= {flit(d, float(lo), cs)}")
        return d.select(sat, zero(d, dst), isnan(d, e, cs))
    return finish(d, d.conv(cd, e) if cs != cd else e, dst)


_CMP = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
# bool arithmetic as the numpy reference computes it (True = 1, results back to bool): no
# shading language has ordering compares or arithmetic on bool
_BOOL = {"add": "({0} || {1})", "or": "({0} || {1})", "max": "({0} || {1})",
         "mul": "({0} && {1})", "and": "({0} && {1})", "min": "({0} && {1})",
         "sub": "({0} != {1})", "xor": "({0} != {1})", "logical_not": "(!{0})", "abs": "{0}",
         "neg": "{0}", "sign": "{0}",  # -1 and sign(1) are nonzero: True stays True
         "div": "({0} && {1})",  # 1/1 = 1; x/0 = 0 (the reference's integer division)
         "rem": "false",  # x % 1 = 0; x % 0 = 0
         "pow": "({0} || !{1})",  # 0^0 = 1, 0^1 = 0, 1^y = 1
         "lt": "(!{0} && {1})", "le": "(!{0} || {1})", "gt": "({0} && !{1})",
         "ge": "({0} || !{1})"}


def _unary_float(d: Dialect, op: str, a: str, used: set[str], key: str = "f32") -> str:
    one = flit(d, 1.0, key)
    if key == "f64" and op in ("erf", "log", "tanh"):  # the f64 builtins are correctly rounded
        return f"{op}({a})"                             # enough; the helpers are f32 code
    if op in ("erf", "log", "tanh"):
        used.add("rlx_" + op)
        return f"rlx_{op}({a})"
    table = {"exp": f"exp({a})", "sqrt": f"sqrt({a})", "rsqrt": f"({one} / sqrt({a}))",
             "logistic": f"({one} / ({one} + exp(-{a})))", "sin": f"sin({a})",
             "cos": f"cos({a})", "floor": f"floor({a})", "ceil": f"ceil({a})",
             "round": f"{d.round_even}({a})", "reciprocal": f"({one} / {a})"}
    return table[op]


UNARY_FLOAT = ("exp", "log", "sqrt", "rsqrt", "tanh", "erf", "logistic", "sin", "cos", "floor",
               "ceil", "round", "reciprocal")


def elementwise(d: Dialect, op: str, args: list[str], in_types: list[DType], out: DType,
                attrs: dict[str, Any], used: set[str]) -> str:
    """The expression of one elementwise MIR op on compute values ``args``."""
    t = in_types[0] if in_types else out
    if d.f64_emulation is not None and dt.f64 in (t, out):
        got = d.f64_emulation.elementwise(d, op, args, in_types, out, attrs)
        if got is None:
            raise GpuRenderError(f"no emulated f64 lowering in {d.name} for {op!r}",
                                 hint="cast to f32 first, or use target cpu")
        return got
    c = COMPUTE[t.name]
    a = args[0] if args else ""
    b = args[1] if len(args) > 1 else ""
    if op == "cast":
        return cast(d, a, t, dt.get(attrs["dtype"]))
    if op == "select":
        return d.select(args[2], args[1], args[0])
    if op in _CMP and not (c == "bool" and op in _BOOL):
        if c in FLOATS:
            # on the bits where NaN decides: shader compilers may assume no NaNs and fold
            # x != x (ONNX IsNaN) to false
            either = f"({isnan(d, a, c)} || {isnan(d, b, c)})"
            if op == "ne":
                return f"(({a} != {b}) || {either})"
            return f"(({a} {_CMP[op]} {b}) && !{either})"
        return f"({a} {_CMP[op]} {b})"
    if c == "bool":
        if op not in _BOOL:
            raise GpuRenderError(f"{op} on bool has no {d.name} lowering",
                                 hint="cast the operands to i32 first")
        return _BOOL[op].format(a, b)
    if op in UNARY_FLOAT:
        if c not in FLOATS:
            raise GpuRenderError(f"{op} needs a float operand, got {t}")
        return finish(d, _unary_float(d, op, a, used, c), out)
    if c == "f64" and d.ieee_guards:
        raise GpuRenderError(f"{d.name} has no IEEE-guarded f64 lowering")
    if op == "neg":
        if c in FLOATS:
            return finish(d, f"(-{a})", out)
        return finish(d, d.int_binary("-", zero(d, t), a, c), out)
    if op == "abs":
        if c == "u32":
            return a
        return finish(d, f"{d.fabs}({a})" if c in FLOATS else d.int_abs(a), out)
    if op == "sign":
        if c in FLOATS:  # NaN stays NaN (sign() gives 0 for NaN on several drivers)
            pos, neg, z0 = flit(d, 1.0, c), flit(d, -1.0, c), flit(d, 0.0, c)
            s = d.select(d.select(z0, neg, f"{a} < {z0}"), pos, f"{a} > {z0}")
            return finish(d, d.select(s, a, isnan(d, a, c)), out)
        if c == "u32":
            return d.select("0u", "1u", f"{a} > 0u")
        return finish(d, d.select(d.select(lit(d, 0, t), lit(d, -1, t), f"{a} < {zero(d, t)}"),
                                  lit(d, 1, t), f"{a} > {zero(d, t)}"), out)
    if op == "logical_not":
        return finish(d, f"(~{a})", out)
    if op in ("add", "sub", "mul"):
        sym = {"add": "+", "sub": "-", "mul": "*"}[op]
        if c == "f32" and op == "mul" and d.ieee_guards:
            return finish(d, _guarded_mul(d, a, b), out)
        if c == "f32" and op == "sub" and d.ieee_guards:
            return finish(d, _guarded_sub(d, a, b), out)
        if c in FLOATS:
            return finish(d, f"({a} {sym} {b})", out)
        return finish(d, d.int_binary(sym, a, b, c), out)
    if op in ("div", "rem"):
        if c == "f64":  # the f64 dialect's fmod is C's (exact), as the reference's
            return f"fmod({a}, {b})" if op == "rem" else f"({a} / {b})"
        if c == "f32" and op == "rem":
            used.add("rlx_fmod")
            return finish(d, f"rlx_fmod({a}, {b})", out)
        if c == "f32" and d.ieee_guards:
            return finish(d, _guarded_div(d, a, b), out)
        if c == "f32":
            return finish(d, f"({a} / {b})", out)
        return finish(d, _int_divmod(d, op, a, b, t), out)
    if op == "pow" and c == "f64":
        return f"pow({a}, {b})"  # C99 pow, as numpy's
    if op == "pow":
        fn = {"f32": "rlx_powf", "i32": "rlx_powi", "u32": "rlx_powu"}[c]
        used.add(fn)
        return finish(d, f"{fn}({a}, {b})", out)
    if op in ("max", "min"):
        if c in FLOATS:  # numpy's maximum/minimum propagate NaN
            either = f"({isnan(d, a, c)} || {isnan(d, b, c)})"
            return finish(d, d.select(f"{op}({a}, {b})", nan(d, c), either), out)
        return finish(d, f"{op}({a}, {b})", out)
    if op in ("and", "or", "xor"):
        sym = {"and": "&", "or": "|", "xor": "^"}[op]
        return finish(d, f"({a} {sym} {b})", out)
    raise GpuRenderError(f"no {d.name} lowering for elementwise op {op!r}")


def _mag(d: Dialect, e: str) -> str:
    return f"({bits(d, e)} & 0x7fffffffu)"


def _guarded_div(d: Dialect, a: str, b: str) -> str:
    """IEEE ``a / b`` where the driver folds ``x / 0.0`` to 0: a zero divisor is decided on the
    bits (NaN for 0/0 and NaN/0, else an infinity with the xor of the signs)."""
    sign = f"(({bits(d, a)} ^ {bits(d, b)}) & 0x80000000u)"
    inf = d.bitcast("f32", f"({sign} | 0x7f800000u)")
    special = d.select(inf, nan(d), f"({_mag(d, a)} == 0u || {isnan(d, a)})")
    return d.select(f"({a} / {b})", special, f"{_mag(d, b)} == 0u")


def _guarded_mul(d: Dialect, a: str, b: str) -> str:
    """IEEE ``a * b`` where the driver folds ``inf * 0.0`` and ``NaN * 0.0`` to 0."""
    ma, mb = _mag(d, a), _mag(d, b)
    bad = (f"(({ma} >= 0x7f800000u && ({mb} == 0u || {mb} > 0x7f800000u)) || "
           f"({mb} >= 0x7f800000u && ({ma} == 0u || {ma} > 0x7f800000u)))")
    return d.select(f"({a} * {b})", nan(d), bad)


def _guarded_sub(d: Dialect, a: str, b: str) -> str:
    """IEEE ``a - b`` where the driver folds ``x - x`` to 0 (Mesa's NIR does for any float op
    not marked exact, and SPIR-V/GLSL ``precise`` does not reach it from every front end): the
    same inf or NaN on both sides is NaN, decided on the bits, which no float rule can fold.
    layer_norm's ``var - var`` (NaN where the row's variance overflowed) depends on it."""
    same = f"({bits(d, a)} == {bits(d, b)} && {_mag(d, a)} >= 0x7f800000u)"
    return d.select(f"({a} - {b})", nan(d), same)


def _int_divmod(d: Dialect, op: str, a: str, b: str, t: DType) -> str:
    """Truncating integer ``a / b`` or ``a % b`` (sign of ``a``) as the reference: ``x / 0`` and
    ``x % 0`` are 0, ``INT_MIN / -1`` wraps; the divisor is made safe so no language traps."""
    c = COMPUTE[t.name]
    z = zero(d, t)
    bad = f"{b} == {z}"
    if c == "i32":
        bad = f"({b} == {z}) || ({b} == {lit(d, -1, t)} && {a} == {lit(d, -(2 ** 31), dt.i32)})"
    sb = d.select(b, lit(d, 1, t), bad)
    q = f"({a} / {sb})"
    if op == "div":
        return d.select(q, z, f"{b} == {z}")
    # a - q * b, never % (GLSL leaves % of negative operands undefined)
    r = d.int_binary("-", a, d.int_binary("*", q, sb, c), c)
    return d.select(r, z, f"{b} == {z}")


# ---- index arithmetic --------------------------------------------------------------------------


def linear(idx: tuple[str, ...], shape: Shape) -> str:
    """Row-major offset of multi-index ``idx`` (size-1 axes contribute nothing)."""
    terms = [i if s == 1 else f"{i} * {s}u"
             for i, s, n in zip(idx, row_strides(shape), shape, strict=True) if n != 1]
    return " + ".join(terms) if terms else "0u"


class Body:
    """Statements being emitted, with fresh local names."""

    def __init__(self, d: Dialect, prefix: str = "t") -> None:
        self.d = d
        self.lines: list[str] = []
        self.count = 0
        self.prefix = prefix

    def let(self, expr: str, key: str | None = None, indent: str = "  ", note: str = "") -> str:
        """A new local holding ``expr`` of type ``key`` (None: a u32 index)."""
        name = f"{self.prefix}{self.count}"
        self.count += 1
        tail = f"  {self.d.comment} {note}" if note else ""
        self.lines.append(f"{indent}{self.d.let(name, key, expr)}{tail}")
        return name

    def digits(self, flat: str, shape: Shape, indent: str = "  ") -> tuple[str, ...]:
        """Multi-index of row-major offset ``flat`` over ``shape`` as locals or ``0u``."""
        out = []
        for s, n in zip(row_strides(shape), shape, strict=True):
            out.append("0u" if n == 1 else self.let(f"({flat} / {s}u) % {n}u", None, indent))
        return tuple(out)


class ExprGen:
    """Values of a kernel at a multi-index: node expressions, buffer reads, index maps.

    ``bind`` maps a value read from a buffer to its buffer variable. Results are memoised per
    (value, index) so a value used twice at one index is computed once. Each statement made
    for a node carries the node's id in a comment (the explorer links source lines to nodes).
    """

    def __init__(self, d: Dialect, nodes: dict[str, Node], types: dict[str, TensorType],
                 bind: dict[str, str], body: Body, used: set[str], indent: str = "  ",
                 fixed: dict[str, str] | None = None) -> None:
        self.d = d
        self.nodes, self.types, self.bind, self.body = nodes, types, bind, body
        self.used, self.indent = used, indent
        self.fixed = fixed or {}  # values with a known compute expression (an accumulator)
        self.memo: dict[tuple[str, tuple[str, ...]], str] = {}

    def at(self, name: str, idx: tuple[str, ...]) -> str:
        if name in self.fixed:
            return self.fixed[name]
        key = (name, idx)
        if key not in self.memo:
            self.memo[key] = self._compute(name, idx)
        return self.memo[key]

    def _compute(self, name: str, idx: tuple[str, ...]) -> str:
        d, t = self.d, self.types[name]
        c = COMPUTE[t.dtype.name]
        if name not in self.nodes:
            if name not in self.bind:
                raise GpuRenderError(f"kernel reads %{safe(name)}, which has no binding")
            return self.body.let(load(d, f"{self.bind[name]}[{linear(idx, t.shape)}]", t.dtype),
                                 c, self.indent, f"%{safe(name)}")
        n = self.nodes[name]
        if n.op == "constant" and not isinstance(n.attr("value"), tuple):
            return lit(d, n.attr("value"), t.dtype)
        if n.op == "iota":
            return cast(d, idx[n.attr("dim")], dt.u32, t.dtype)
        if n.op == "broadcast_in_dim":
            src = self.types[n.inputs[0]]
            dims = n.attr("dims")
            sub = tuple("0u" if src.shape[i] == 1 else idx[k] for i, k in enumerate(dims))
            return self.at(n.inputs[0], sub)
        if n.op == "reshape":
            src = self.types[n.inputs[0]]
            flat = self.body.let(linear(idx, t.shape), None, self.indent, f"%{safe(name)}")
            return self.at(n.inputs[0], self.body.digits(flat, src.shape, self.indent))
        if is_elementwise(n.op):
            args = [self.at(i, idx) for i in n.inputs]
            ins = [self.types[i].dtype for i in n.inputs]
            expr = elementwise(d, n.op, args, ins, t.dtype, n.a, self.used)
            return self.body.let(expr, c, self.indent, f"%{safe(name)} = {n.op}")
        raise GpuRenderError(f"{n.op} cannot be evaluated inside a fused loop nest")
