"""WGSL expressions: storage/compute types, literals, casts, elementwise ops, index maps.

The renderer (renderer.py) builds loop nests; this file says what one value is inside them.
``ExprGen`` gives the expression of any kernel value at a multi-index: a buffer read, a fused
elementwise node, or an index map (broadcast, reshape, iota) followed to its operand, with each
(value, index) computed once as a ``let``.
"""

from __future__ import annotations

import math
import re
import struct
from typing import Any

from rlx_core.errors import RlxError
from rlx_core.ir import dtypes as dt
from rlx_core.ir.dtypes import DType
from rlx_core.ir.graph import Node, Shape, TensorType
from rlx_core.ir.ops import is_elementwise

STORAGE: dict[str, str] = {"f32": "f32", "f16": "f16", "i32": "i32", "u32": "u32", "bool": "u32",
                           "i8": "i32", "i16": "i32", "u8": "u32"}
COMPUTE: dict[str, str] = {"f32": "f32", "f16": "f32", "i32": "i32", "u32": "u32", "bool": "bool",
                           "i8": "i32", "i16": "i32", "u8": "u32"}


class WgslRenderError(RlxError):
    """A LIR kernel the WGSL renderer has no lowering for (a dtype or op it does not cover)."""

    code = "RLX-K001"


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.]", "_", text)


def _check_dtype(d: DType, where: str) -> None:
    if d.name not in STORAGE:
        raise WgslRenderError(f"{where}: WGSL kernels have no {d.name}",
                              hint="the webgpu legalizer should have rejected or narrowed it; "
                                   "cast to f32/i32 before compiling for webgpu")


# ---- scalars ---------------------------------------------------------------------------------


def lit(value: Any, d: DType) -> str:
    """A WGSL literal of ``value`` in ``d``'s compute type (cast semantics for splats)."""
    c = COMPUTE[d.name]
    if c == "bool":
        return "true" if bool(value) else "false"
    if c == "f32":
        f = float(value)
        if math.isfinite(f):
            return f"f32({f!r})"
        bits = struct.unpack("<I", struct.pack("<f", f))[0]
        # not a const-expression: Tint rejects a constant inf or NaN, at run time both are fine
        return f"bitcast<f32>({bits:#010x}u | rlx_zero)"
    if isinstance(value, float):
        lo, hi = _bounds(d)
        value = 0 if math.isnan(value) else max(lo, min(hi, int(value)))
    v = int(value)
    bits = _wrap_int(v, d)
    if c == "u32":
        return f"{bits}u"
    return f"i32({bits})" if bits != -(2 ** 31) else "i32(-2147483647 - 1)"


def _bounds(d: DType) -> tuple[int, int]:
    if d.kind is dt.Kind.UINT:
        return 0, 2 ** d.bits - 1
    return -(2 ** (d.bits - 1)), 2 ** (d.bits - 1) - 1


def _wrap_int(v: int, d: DType) -> int:
    m = v % (2 ** d.bits)
    if d.kind is dt.Kind.INT and m >= 2 ** (d.bits - 1):
        m -= 2 ** d.bits
    return m


def zero(d: DType) -> str:
    return lit(0, d)


def finish(expr: str, d: DType) -> str:
    """Round a computed value to ``d``: f16 rounding, narrow-integer wrap-around."""
    if d == dt.f16:
        return f"f32(f16({expr}))"
    if d == dt.i8:
        return f"(({expr} << 24u) >> 24u)"
    if d == dt.i16:
        return f"(({expr} << 16u) >> 16u)"
    if d == dt.u8:
        return f"({expr} & 255u)"
    return expr


def load(expr: str, d: DType) -> str:
    """Storage element -> compute value."""
    if d == dt.bool_:
        return f"({expr} != 0u)"
    if d == dt.f16:
        return f"f32({expr})"
    return expr


def store(expr: str, d: DType) -> str:
    """Compute value -> storage element."""
    if d == dt.bool_:
        return f"select(0u, 1u, {expr})"
    if d == dt.f16:
        return f"f16({expr})"
    return expr


def isnan(e: str) -> str:
    """A NaN test on the bits: shader compilers may fold ``x != x`` to false."""
    return f"((bitcast<u32>({e}) & 0x7fffffffu) > 0x7f800000u)"


def cast(e: str, src: DType, dst: DType) -> str:
    """``cast`` semantics: float->int truncates and saturates (NaN -> 0), int->int wraps."""
    cs, cd = COMPUTE[src.name], COMPUTE[dst.name]
    if dst == dt.bool_:
        if cs == "f32":  # on the bits, so that NaN stays truthy whatever the compiler assumes
            return f"((bitcast<u32>({e}) & 0x7fffffffu) != 0u)"
        return e if src == dt.bool_ else f"({e} != {zero(src)})"
    if src == dt.bool_:
        return f"select({zero(dst)}, {lit(1, dst)}, {e})"
    if cd == "f32":
        return finish(f"f32({e})" if cs != "f32" else e, dst)
    if cs == "f32":
        lo, hi = _bounds(dst)
        inner = f"{cd}({e})"
        return (f"select(select(select({inner}, {lit(hi, dst)}, {e} >= {float(hi)!r}), "
                f"{lit(lo, dst)}, {e} <= {float(lo)!r}), {zero(dst)}, {isnan(e)})")
    return finish(f"{cd}({e})" if cs != cd else e, dst)


_UNARY_F = {"exp": "exp({0})", "log": "rlx_log({0})", "sqrt": "sqrt({0})",
            "rsqrt": "(1.0 / sqrt({0}))", "tanh": "rlx_tanh({0})",
            "erf": "rlx_erf({0})", "logistic": "(1.0 / (1.0 + exp(-{0})))", "sin": "sin({0})",
            "cos": "cos({0})", "floor": "floor({0})", "ceil": "ceil({0})",
            "round": "round({0})", "reciprocal": "(1.0 / {0})"}
_CMP = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}

# helpers a source includes when it uses them: erf (Abramowitz-Stegun 7.1.26, |err| < 1.5e-7),
# pow with numpy's sign rules for negative bases, integer pow by squaring
HELPERS = {
    "rlx_erf": """fn rlx_erf(x: f32) -> f32 {
  let a = abs(x);
  let t = 1.0 / (1.0 + 0.3275911 * a);
  let p = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027
      + t * 1.061405429))));
  return sign(x) * (1.0 - p * exp(-a * a));
}""",
    # log by reduction to [sqrt(1/2), sqrt(2)) and the atanh series: Vulkan lets log() be off
    # by 2^-21 absolute near 1, so log(1 + y) for small y (softplus, mish) lost 3 digits
    "rlx_log": """fn rlx_log(x: f32) -> f32 {
  let u = bitcast<u32>(x);
  if (x != x || (u & 0x7fffffffu) > 0x7f800000u || (u > 0x80000000u)) {
    return bitcast<f32>(0x7fc00000u | rlx_zero);
  }
  if ((u & 0x7fffffffu) == 0u) { return bitcast<f32>(0xff800000u | rlx_zero); }
  if (u == 0x7f800000u) { return x; }
  var m = x; var e = 0.0;
  if (u < 0x00800000u) { m = x * 8388608.0; e = -23.0; }
  let b = bitcast<u32>(m);
  e = e + f32(i32((b >> 23u) & 0xffu) - 127);
  m = bitcast<f32>((b & 0x007fffffu) | 0x3f800000u);
  if (m > 1.41421356) { m = m * 0.5; e = e + 1.0; }
  let f = (m - 1.0) / (m + 1.0);
  let f2 = f * f;
  let s = f2 * (0.6666666667 + f2 * (0.4 + f2 * (0.2857142857 + f2 * (0.2222222222
      + f2 * 0.1818181818))));
  return e * 0.693147180559945 + (2.0 * f + f * s);
}""",
    # tanh: the series near 0, where lavapipe's tanh (a quotient of exponentials) cancels
    # (tanh(4.5e-5) was 0.2% off, which broke mish at x = -10); NaN stays NaN
    "rlx_tanh": """fn rlx_tanh(x: f32) -> f32 {
  if ((bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u) { return x; }
  let a = abs(x);
  if (a < 0.125) {
    let z = x * x;
    return x + x * z * (-0.3333333333 + z * (0.1333333333 + z * (-0.0539682540
        + z * 0.0218694885)));
  }
  let e = exp(2.0 * min(a, 15.0));
  return sign(x) * ((e - 1.0) / (e + 1.0));
}""",
    # C fmod: NaN for an infinite or NaN dividend, a NaN or zero divisor; a for b = +-inf
    "rlx_fmod": """fn rlx_fmod(a: f32, b: f32) -> f32 {
  let ua = bitcast<u32>(a) & 0x7fffffffu;
  let ub = bitcast<u32>(b) & 0x7fffffffu;
  if (ua >= 0x7f800000u || ub > 0x7f800000u || ub == 0u) {
    return bitcast<f32>(0x7fc00000u | rlx_zero);
  }
  if (ub == 0x7f800000u) { return a; }
  return a - b * trunc(a / b);
}""",
    "rlx_powf": """fn rlx_powf(a: f32, b: f32) -> f32 {
  if (b == 0.0) { return 1.0; }
  if (a >= 0.0) { return pow(a, b); }
  if (floor(b) != b) { return bitcast<f32>(0x7fc00000u | rlx_zero); }
  let m = pow(-a, b);
  return select(m, -m, abs(b % 2.0) == 1.0);
}""",
    "rlx_powi": """fn rlx_powi(a: i32, b: i32) -> i32 {
  if (b < 0) { return select(select(0, select(1, -1, (b & 1) == 1), a == -1), 1, a == 1); }
  var r = 1; var x = a; var e = b;
  loop { if (e == 0) { break; } if ((e & 1) == 1) { r = r * x; } x = x * x; e = e >> 1; }
  return r;
}""",
    "rlx_powu": """fn rlx_powu(a: u32, b: u32) -> u32 {
  var r = 1u; var x = a; var e = b;
  loop { if (e == 0u) { break; } if ((e & 1u) == 1u) { r = r * x; } x = x * x; e = e >> 1u; }
  return r;
}""",
}


def elementwise(op: str, args: list[str], in_types: list[DType], out: DType,
                attrs: dict[str, Any], used: set[str]) -> str:
    """The WGSL expression of one elementwise MIR op on compute values ``args``."""
    d = in_types[0] if in_types else out
    c = COMPUTE[d.name]
    a = args[0] if args else ""
    b = args[1] if len(args) > 1 else ""
    if op == "cast":
        return cast(a, d, dt.get(attrs["dtype"]))
    if op == "select":
        return f"select({args[2]}, {args[1]}, {args[0]})"
    if op in _CMP:
        if c == "f32":
            # on the bits where NaN decides: shader compilers may assume no NaNs and fold
            # x != x (ONNX IsNaN) to false
            nan = f"({isnan(a)} || {isnan(b)})"
            if op == "ne":
                return f"(({a} != {b}) || {nan})"
            return f"(({a} {_CMP[op]} {b}) && !{nan})"
        return f"({a} {_CMP[op]} {b})"
    if c == "bool":
        table = {"add": "({0} || {1})", "or": "({0} || {1})", "max": "({0} || {1})",
                 "mul": "({0} && {1})", "and": "({0} && {1})", "min": "({0} && {1})",
                 "sub": "({0} != {1})", "xor": "({0} != {1})", "logical_not": "(!{0})",
                 "abs": "{0}"}
        if op not in table:
            raise WgslRenderError(f"{op} on bool has no WGSL lowering",
                                  hint="cast the operands to i32 first")
        return table[op].format(a, b)
    if op in _UNARY_F:
        if c != "f32":
            raise WgslRenderError(f"{op} needs a float operand, got {d}")
        if op in ("erf", "log", "tanh"):
            used.add("rlx_" + op)
        return finish(_UNARY_F[op].format(a), out)
    if op == "neg":
        return finish(f"({zero(d)} - {a})", out)
    if op == "abs":
        return finish(a if c == "u32" else f"abs({a})", out)
    if op == "sign":
        return f"select(0u, 1u, {a} > 0u)" if c == "u32" else f"sign({a})"
    if op == "logical_not":
        return finish(f"(~{a})", out)
    if op in ("add", "sub", "mul"):
        sym = {"add": "+", "sub": "-", "mul": "*"}[op]
        return finish(f"({a} {sym} {b})", out)
    if op in ("div", "rem"):
        sym = "/" if op == "div" else "%"
        if c == "f32" and op == "rem":
            used.add("rlx_fmod")
            return finish(f"rlx_fmod({a}, {b})", out)
        if c == "f32":
            return finish(f"({a} {sym} {b})", out)
        # WGSL gives the dividend for x/0; the reference defines integer x/0 and x%0 as 0
        safe = f"select({b}, {lit(1, d)}, {b} == {zero(d)})"
        return finish(f"select(({a} {sym} {safe}), {zero(d)}, {b} == {zero(d)})", out)
    if op == "pow":
        fn = {"f32": "rlx_powf", "i32": "rlx_powi", "u32": "rlx_powu"}[c]
        used.add(fn)
        return finish(f"{fn}({a}, {b})", out)
    if op in ("max", "min"):
        return finish(f"{op}({a}, {b})", out)
    if op in ("and", "or", "xor"):
        sym = {"and": "&", "or": "|", "xor": "^"}[op]
        return finish(f"({a} {sym} {b})", out)
    raise WgslRenderError(f"no WGSL lowering for elementwise op {op!r}")


# ---- index arithmetic --------------------------------------------------------------------------


def strides(shape: Shape) -> tuple[int, ...]:
    out, acc = [], 1
    for d in reversed(shape):
        out.append(acc)
        acc *= d
    return tuple(reversed(out))


def linear(idx: tuple[str, ...], shape: Shape) -> str:
    """Row-major offset of multi-index ``idx`` (size-1 axes contribute nothing)."""
    terms = [i if s == 1 else f"{i} * {s}u" for i, s, n in zip(idx, strides(shape), shape, strict=True)
             if n != 1]
    return " + ".join(terms) if terms else "0u"


class Body:
    """Statements being emitted, with fresh ``let`` names."""

    def __init__(self, prefix: str = "t") -> None:
        self.lines: list[str] = []
        self.count = 0
        self.prefix = prefix

    def let(self, expr: str, indent: str = "  ") -> str:
        name = f"{self.prefix}{self.count}"
        self.count += 1
        self.lines.append(f"{indent}let {name} = {expr};")
        return name

    def digits(self, flat: str, shape: Shape, indent: str = "  ") -> tuple[str, ...]:
        """Multi-index of row-major offset ``flat`` over ``shape`` as ``let`` names or ``0u``."""
        out = []
        for s, n in zip(strides(shape), shape, strict=True):
            if n == 1:
                out.append("0u")
            else:
                out.append(self.let(f"({flat} / {s}u) % {n}u", indent))
        return tuple(out)


class ExprGen:
    """Values of a kernel at a multi-index: node expressions, buffer reads, index maps.

    ``bind`` maps a value read from a buffer to its binding variable. Results are memoised per
    (value, index) so a value used twice at one index is computed once (a ``let``).
    """

    def __init__(self, nodes: dict[str, Node], types: dict[str, TensorType],
                 bind: dict[str, str], body: Body, used: set[str], indent: str = "  ",
                 fixed: dict[str, str] | None = None) -> None:
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
        t = self.types[name]
        if name not in self.nodes:
            if name not in self.bind:
                raise WgslRenderError(f"kernel reads %{_safe(name)}, which has no binding")
            return self.body.let(load(f"{self.bind[name]}[{linear(idx, t.shape)}]", t.dtype),
                                 self.indent)
        n = self.nodes[name]
        if n.op == "constant" and not isinstance(n.attr("value"), tuple):
            return lit(n.attr("value"), t.dtype)
        if n.op == "iota":
            return cast(idx[n.attr("dim")], dt.u32, t.dtype)
        if n.op == "broadcast_in_dim":
            src = self.types[n.inputs[0]]
            dims = n.attr("dims")
            sub = tuple("0u" if src.shape[i] == 1 else idx[d] for i, d in enumerate(dims))
            return self.at(n.inputs[0], sub)
        if n.op == "reshape":
            src = self.types[n.inputs[0]]
            flat = self.body.let(linear(idx, t.shape), self.indent)
            return self.at(n.inputs[0], self.body.digits(flat, src.shape, self.indent))
        if is_elementwise(n.op):
            args = [self.at(i, idx) for i in n.inputs]
            ins = [self.types[i].dtype for i in n.inputs]
            expr = elementwise(n.op, args, ins, t.dtype, n.a, self.used)
            return self.body.let(expr, self.indent)
        raise WgslRenderError(f"{n.op} cannot be evaluated inside a fused loop nest")
