"""f64 in WGSL, emulated: buffers hold real f64 bits, kernels compute in double-float.

WGSL has no f64. A buffer of f64 holds the IEEE bits as ``vec2<u32>`` (so the host uploads and
downloads f64 unchanged, and ``numpy`` sees real doubles); a kernel decodes each element into a
*double-float* ``vec2<f32>`` (hi, lo) with ``|lo| <= ulp(hi) / 2``, computes with the error-free
transformations of Dekker and Knuth (TwoSum, Dekker's split product) and encodes back. What this
is and is not:

- precision: a 48-bit significand (hi's 24 bits and lo's 24): each arithmetic op is accurate
  to about 2^-47 relative, against f64's 2^-53; exp, log and pow to about 2^-40 (f32: 2^-24);
- range: f32's exponent range. A value beyond it (|x| > 3.4e38) becomes an infinity, one below
  2^-126 loses precision and underflows to zero; values in the node tests are far inside;
- every op the table claims for f64 is here (``OPS``); others stay explicit rejections.

lavapipe compiles as if floats had no inf or NaN (x / 0.0 -> 0, inf * 0.0 -> 0) and Mesa folds
float expressions it may treat as inexact, which would erase TwoSum's error term. So the hi
parts are guarded on the bits like f32 (gpu_common.expr), and every sum whose rounding error is
recovered passes through ``rlx_df_o``: an OR with ``rlx_opaque``, which the kernel sets to
``arrayLength(&b0) == 0xffffffff`` (0: no buffer has 2^32 - 1 elements of 4 bytes or more, but
no compiler can know it; a never-written private variable, like ``rlx_zero``, is folded to 0
and Mesa then cancelled ``(a + b) - a`` to ``b``, and TwoSum's error term to 0).
"""

from __future__ import annotations

import struct
from typing import Any

from rlx_core.ir import dtypes as dt
from rlx_core.ir.dtypes import DType

# the f64 ops the library computes (elementwise and the kernels' accumulations)
OPS = ("add", "sub", "mul", "div", "neg", "abs", "sign", "max", "min", "eq", "ne", "lt", "le",
       "gt", "ge", "select", "cast", "exp", "log", "sqrt", "rsqrt", "reciprocal", "pow", "rem",
       "floor", "ceil", "round", "logistic")
OTHER_OPS = ("reduce_sum", "reduce_max", "reduce_min", "reduce_prod",
             "broadcast_in_dim", "reshape", "transpose", "slice", "pad", "concat", "gather",
             "dot_general", "iota", "constant")

_CMP = {"eq": "rlx_df_eq({0}, {1})", "ne": "!rlx_df_eq({0}, {1})",
        "lt": "rlx_df_lt({0}, {1})", "gt": "rlx_df_lt({1}, {0})",
        "le": "rlx_df_le({0}, {1})", "ge": "rlx_df_le({1}, {0})"}
_UNARY = {"exp": "rlx_df_exp({0})", "log": "rlx_df_log({0})", "sqrt": "rlx_df_sqrt({0})",
          "rsqrt": "rlx_df_div(vec2<f32>(1.0, 0.0), rlx_df_sqrt({0}))",
          "reciprocal": "rlx_df_div(vec2<f32>(1.0, 0.0), {0})",
          "logistic": "rlx_df_div(vec2<f32>(1.0, 0.0), rlx_df_add(vec2<f32>(1.0, 0.0), "
                      "rlx_df_exp(-{0})))",
          "floor": "rlx_df_floor({0})", "ceil": "-rlx_df_floor(-{0})",
          "round": "rlx_df_round({0})", "neg": "(-{0})", "abs": "rlx_df_abs({0})",
          "sign": "rlx_df_sign({0})"}
_BINARY = {"add": "rlx_df_add({0}, {1})", "sub": "rlx_df_add({0}, -{1})",
           "mul": "rlx_df_mul({0}, {1})", "div": "rlx_df_div({0}, {1})",
           "pow": "rlx_df_pow({0}, {1})", "rem": "rlx_df_fmod({0}, {1})",
           "max": "rlx_df_max({0}, {1})", "min": "rlx_df_min({0}, {1})"}


def lit(f: float) -> str:
    """A double-float literal: hi = f rounded to f32, lo = the rest rounded to f32."""
    hi = struct.unpack("<f", struct.pack("<f", f))[0] if abs(f) < 3.4028234663852886e38 else None
    if hi is None:
        return nonfinite(0x7FF0000000000000 | (0x8000000000000000 if f < 0 else 0))
    lo = struct.unpack("<f", struct.pack("<f", f - hi))[0]
    return f"vec2<f32>(f32({hi!r}), f32({lo!r}))"


def nonfinite(bits64: int) -> str:
    sign = 0x80000000 if bits64 >> 63 else 0
    nan = bits64 & ((1 << 52) - 1)
    bits = sign | (0x7FC00000 if nan else 0x7F800000)
    return f"vec2<f32>(bitcast<f32>({bits:#010x}u | rlx_zero), 0.0)"


def elementwise(d: Any, op: str, args: list[str], in_types: list[DType], out: DType,
                attrs: dict[str, Any]) -> str | None:
    """The expression of an f64 op (None: not an f64 op; the caller's own path)."""
    t = in_types[0] if in_types else out
    if op == "cast":
        return cast(d, args[0], t, dt.get(attrs["dtype"]))
    if t != dt.f64 and out != dt.f64:
        return None
    if op == "select":
        return f"select({args[2]}, {args[1]}, {args[0]})"
    if op in _CMP:
        nan = f"(rlx_df_isnan({args[0]}) || rlx_df_isnan({args[1]}))"
        if op == "ne":
            return f"({_CMP[op].format(*args)} || {nan})"
        return f"({_CMP[op].format(*args)} && !{nan})"
    if op in _UNARY:
        return _UNARY[op].format(*args)
    if op in _BINARY:
        return _BINARY[op].format(*args)
    return None


def cast(d: Any, e: str, src: DType, dst: DType) -> str | None:
    """``cast`` to or from f64 (None when neither side is f64)."""
    from rlx_core.targets.gpu_common.expr import COMPUTE, bounds, finish
    from rlx_core.targets.gpu_common.expr import lit as lit_of

    if src != dt.f64 and dst != dt.f64:
        return None
    if src == dst:
        return e
    if dst == dt.f64:
        c = COMPUTE[src.name]
        if c == "bool":
            return f"select(vec2<f32>(0.0, 0.0), vec2<f32>(1.0, 0.0), {e})"
        if c == "f32":
            return f"vec2<f32>({e}, 0.0)"
        return f"rlx_df_from_{c}({e})"
    c = COMPUTE[dst.name]
    if c == "bool":
        return f"((bitcast<u32>({e}.x) & 0x7fffffffu) != 0u)"
    if c == "f32":
        return finish(d, f"({e}.x + {e}.y)", dst)
    # float -> int: truncate, saturate, NaN -> 0 (the reference's cast); i8/i16/u8 saturate
    # to their own bounds as the reference does
    lo, hi = bounds(dst)
    sat = d.select(d.select(f"rlx_df_to_{c}({e})", lit_of(d, hi, dst), f"{e}.x >= {float(hi)!r}"),
                   lit_of(d, lo, dst), f"{e}.x <= {float(lo)!r}")
    return d.select(sat, lit_of(d, 0, dst), f"rlx_df_isnan({e})")


def combine(op: str, a: str, b: str) -> str:
    """A reduction's accumulation step on f64."""
    return {"reduce_sum": f"rlx_df_add({a}, {b})", "reduce_prod": f"rlx_df_mul({a}, {b})",
            "reduce_max": f"rlx_df_max({a}, {b})", "reduce_min": f"rlx_df_min({a}, {b})"}[op]


LIBRARY = r"""
fn rlx_df_o(x: f32) -> f32 { return bitcast<f32>(bitcast<u32>(x) | rlx_opaque); }
fn rlx_df_fin(x: f32) -> bool { return (bitcast<u32>(x) & 0x7f800000u) != 0x7f800000u; }
fn rlx_df_isnan(a: vec2<f32>) -> bool { return (bitcast<u32>(a.x) & 0x7fffffffu) > 0x7f800000u; }
fn rlx_df_nan() -> vec2<f32> { return vec2<f32>(bitcast<f32>(0x7fc00000u | rlx_zero), 0.0); }
fn rlx_df_inf(neg: bool) -> vec2<f32> {
  return vec2<f32>(bitcast<f32>(select(0x7f800000u, 0xff800000u, neg) | rlx_zero), 0.0);
}
// s + e == a + b exactly (Knuth's TwoSum)
fn rlx_df_two_sum(a: f32, b: f32) -> vec2<f32> {
  let s = rlx_df_o(a + b);
  let bb = rlx_df_o(s - a);
  return vec2<f32>(s, (a - rlx_df_o(s - bb)) + (b - bb));
}
// |b| <= |a|: s + e == a + b exactly
fn rlx_df_quick(a: f32, b: f32) -> vec2<f32> {
  let s = rlx_df_o(a + b);
  if (!rlx_df_fin(s)) { return vec2<f32>(s, 0.0); }
  return vec2<f32>(s, b - rlx_df_o(s - a));
}
// Dekker's split: a == hi + lo, each with 12 significant bits (products of halves are exact)
fn rlx_df_split(a: f32) -> vec2<f32> {
  if (abs(a) > 1.0e34) {  // 4097 * a would overflow: split a scaled copy
    let t = rlx_df_o(a * 2.44140625e-4 * 4097.0);
    let hi = rlx_df_o(t - rlx_df_o(t - a * 2.44140625e-4));
    return vec2<f32>(hi * 4096.0, (a * 2.44140625e-4 - hi) * 4096.0);
  }
  let t = rlx_df_o(4097.0 * a);
  let hi = rlx_df_o(t - rlx_df_o(t - a));
  return vec2<f32>(hi, a - hi);
}
// p + e == a * b exactly (finite a * b)
fn rlx_df_two_prod(a: f32, b: f32) -> vec2<f32> {
  let p = rlx_df_o(a * b);
  let x = rlx_df_split(a);
  let y = rlx_df_split(b);
  let e = ((rlx_df_o(x.x * y.x) - p) + rlx_df_o(x.x * y.y) + rlx_df_o(x.y * y.x)) + x.y * y.y;
  return vec2<f32>(p, e);
}
fn rlx_df_add(a: vec2<f32>, b: vec2<f32>) -> vec2<f32> {
  let s = rlx_df_two_sum(a.x, b.x);
  if (!rlx_df_fin(s.x)) {  // inf + -inf, NaN: the f32 answer of the hi parts
    if (rlx_df_isnan(a) || rlx_df_isnan(b) || (!rlx_df_fin(a.x) && !rlx_df_fin(b.x)
        && bitcast<u32>(a.x) != bitcast<u32>(b.x))) { return rlx_df_nan(); }
    if (!rlx_df_fin(a.x)) { return vec2<f32>(a.x, 0.0); }
    if (!rlx_df_fin(b.x)) { return vec2<f32>(b.x, 0.0); }
    return vec2<f32>(s.x, 0.0);
  }
  let t = rlx_df_two_sum(a.y, b.y);
  var u = rlx_df_quick(s.x, s.y + t.x);
  u = rlx_df_quick(u.x, u.y + t.y);
  return u;
}
fn rlx_df_mul(a: vec2<f32>, b: vec2<f32>) -> vec2<f32> {
  let ma = bitcast<u32>(a.x) & 0x7fffffffu;
  let mb = bitcast<u32>(b.x) & 0x7fffffffu;
  if (ma > 0x7f800000u || mb > 0x7f800000u) { return rlx_df_nan(); }
  let neg = ((bitcast<u32>(a.x) ^ bitcast<u32>(b.x)) & 0x80000000u) != 0u;
  if (ma == 0x7f800000u || mb == 0x7f800000u) {
    if (ma == 0u || mb == 0u) { return rlx_df_nan(); }
    return rlx_df_inf(neg);
  }
  if (ma == 0u || mb == 0u) {
    return vec2<f32>(bitcast<f32>(select(0u, 0x80000000u, neg)), 0.0);
  }
  let p = rlx_df_two_prod(a.x, b.x);
  if (!rlx_df_fin(p.x)) { return vec2<f32>(p.x, 0.0); }
  return rlx_df_quick(p.x, p.y + (a.x * b.y + a.y * b.x));
}
fn rlx_df_fdiv(a: f32, b: f32) -> f32 {  // IEEE a / b on the bits (lavapipe folds x / 0.0)
  let mb = bitcast<u32>(b) & 0x7fffffffu;
  if (mb == 0u) {
    let ma = bitcast<u32>(a) & 0x7fffffffu;
    if (ma == 0u || ma > 0x7f800000u) { return rlx_df_nan().x; }
    return rlx_df_inf(((bitcast<u32>(a) ^ bitcast<u32>(b)) & 0x80000000u) != 0u).x;
  }
  return a / b;
}
fn rlx_df_div(a: vec2<f32>, b: vec2<f32>) -> vec2<f32> {
  let q1 = rlx_df_fdiv(a.x, b.x);
  if (!rlx_df_fin(q1) || !rlx_df_fin(b.x) || !rlx_df_fin(a.x) || q1 == 0.0) {
    if (!rlx_df_fin(a.x) && !rlx_df_fin(b.x)) { return rlx_df_nan(); }
    return vec2<f32>(q1, 0.0);
  }
  var r = rlx_df_add(a, -rlx_df_mul(b, vec2<f32>(q1, 0.0)));
  let q2 = r.x / b.x;
  r = rlx_df_add(r, -rlx_df_mul(b, vec2<f32>(q2, 0.0)));
  let q3 = r.x / b.x;
  let q = rlx_df_quick(q1, q2);
  return rlx_df_add(q, vec2<f32>(q3, 0.0));
}
fn rlx_df_eq(a: vec2<f32>, b: vec2<f32>) -> bool { return a.x == b.x && a.y == b.y; }
fn rlx_df_lt(a: vec2<f32>, b: vec2<f32>) -> bool { return a.x < b.x || (a.x == b.x && a.y < b.y); }
fn rlx_df_le(a: vec2<f32>, b: vec2<f32>) -> bool { return a.x < b.x || (a.x == b.x && a.y <= b.y); }
fn rlx_df_max(a: vec2<f32>, b: vec2<f32>) -> vec2<f32> {
  if (rlx_df_isnan(a)) { return a; }
  if (rlx_df_isnan(b)) { return b; }
  return select(a, b, rlx_df_lt(a, b));
}
fn rlx_df_min(a: vec2<f32>, b: vec2<f32>) -> vec2<f32> {
  if (rlx_df_isnan(a)) { return a; }
  if (rlx_df_isnan(b)) { return b; }
  return select(a, b, rlx_df_lt(b, a));
}
fn rlx_df_abs(a: vec2<f32>) -> vec2<f32> {
  return select(a, -a, (bitcast<u32>(a.x) & 0x80000000u) != 0u);
}
fn rlx_df_sign(a: vec2<f32>) -> vec2<f32> {
  if (rlx_df_isnan(a)) { return a; }
  if (a.x > 0.0) { return vec2<f32>(1.0, 0.0); }
  if (a.x < 0.0) { return vec2<f32>(-1.0, 0.0); }
  return vec2<f32>(0.0, 0.0);
}
fn rlx_df_floor(a: vec2<f32>) -> vec2<f32> {
  if (!rlx_df_fin(a.x)) { return a; }
  let h = floor(a.x);
  if (h != a.x) { return vec2<f32>(h, 0.0); }
  return rlx_df_quick(h, floor(a.y));
}
fn rlx_df_trunc(a: vec2<f32>) -> vec2<f32> {
  return select(rlx_df_floor(a), -rlx_df_floor(-a), a.x < 0.0);
}
fn rlx_df_round(a: vec2<f32>) -> vec2<f32> {  // half to even, as numpy
  if (!rlx_df_fin(a.x)) { return a; }
  let f = rlx_df_floor(a);
  let d = rlx_df_add(a, -f);
  if (d.x > 0.5 || (d.x == 0.5 && d.y > 0.0)) { return rlx_df_add(f, vec2<f32>(1.0, 0.0)); }
  if (d.x < 0.5 || (d.x == 0.5 && d.y < 0.0)) { return f; }
  let half = rlx_df_mul(f, vec2<f32>(0.5, 0.0));
  if (rlx_df_eq(rlx_df_floor(half), half)) { return f; }
  return rlx_df_add(f, vec2<f32>(1.0, 0.0));
}
fn rlx_df_sqrt(a: vec2<f32>) -> vec2<f32> {
  if (!(a.x > 0.0) || !rlx_df_fin(a.x)) {
    if (a.x < 0.0) { return rlx_df_nan(); }
    return vec2<f32>(a.x, 0.0);
  }
  let y = sqrt(a.x);
  let r = rlx_df_add(a, -rlx_df_two_prod(y, y));
  return rlx_df_quick(y, r.x / (2.0 * y));
}
fn rlx_df_exp(a: vec2<f32>) -> vec2<f32> {
  if (rlx_df_isnan(a)) { return a; }
  if (a.x > 88.8) { return rlx_df_inf(false); }
  if (a.x < -104.0) { return vec2<f32>(0.0, 0.0); }
  // a = k ln2 + r, |r| <= ln2 / 2; exp(r) = exp(r / 16)^16 by Taylor to r^9 / 9!
  let ln2 = vec2<f32>(0.693147182464599609375, -1.904654323148236017e-09);
  let k = round(a.x / 0.693147180559945);
  let r = rlx_df_mul(rlx_df_add(a, -rlx_df_mul(ln2, vec2<f32>(k, 0.0))), vec2<f32>(0.0625, 0.0));
  var s = vec2<f32>(1.0, 0.0);
  var term = vec2<f32>(1.0, 0.0);
  for (var i = 1u; i <= 9u; i = i + 1u) {
    term = rlx_df_div(rlx_df_mul(term, r), vec2<f32>(f32(i), 0.0));
    s = rlx_df_add(s, term);
  }
  for (var j = 0u; j < 4u; j = j + 1u) { s = rlx_df_mul(s, s); }
  // times 2^k in two steps (ldexp past the exponent range is undefined)
  let k1 = i32(k) / 2;
  let k2 = i32(k) - k1;
  s = vec2<f32>(ldexp(s.x, k1), ldexp(s.y, k1));
  return vec2<f32>(ldexp(s.x, k2), ldexp(s.y, k2));
}
fn rlx_df_log(a: vec2<f32>) -> vec2<f32> {
  if (!(a.x > 0.0) || !rlx_df_fin(a.x)) { return vec2<f32>(rlx_log(a.x), 0.0); }
  // Newton on exp: y <- y + a * exp(-y) - 1, from the f32 log (each step doubles the digits)
  var y = vec2<f32>(rlx_log(a.x), 0.0);
  for (var i = 0u; i < 2u; i = i + 1u) {
    y = rlx_df_add(y, rlx_df_add(rlx_df_mul(a, rlx_df_exp(-y)), vec2<f32>(-1.0, 0.0)));
  }
  return y;
}
fn rlx_df_is_int(b: vec2<f32>) -> bool { return rlx_df_eq(rlx_df_floor(b), b); }
fn rlx_df_pow(a: vec2<f32>, b: vec2<f32>) -> vec2<f32> {
  // C99 pow: special operands take the f32 answer of the hi parts (exact: 0, 1, inf, NaN)
  if (a.x == 0.0 || b.x == 0.0 || !rlx_df_fin(a.x) || !rlx_df_fin(b.x)
      || (a.x == 1.0 && a.y == 0.0)) {
    return vec2<f32>(rlx_powf(a.x, b.x), 0.0);
  }
  let neg = a.x < 0.0;
  if (neg && !rlx_df_is_int(b)) { return rlx_df_nan(); }
  let r = rlx_df_exp(rlx_df_mul(b, rlx_df_log(rlx_df_abs(a))));
  let half = rlx_df_mul(b, vec2<f32>(0.5, 0.0));
  let odd = neg && !rlx_df_is_int(half);
  return select(r, -r, odd);
}
fn rlx_df_fmod(a: vec2<f32>, b: vec2<f32>) -> vec2<f32> {  // C fmod: the sign of a
  if (!rlx_df_fin(a.x) || rlx_df_isnan(b) || b.x == 0.0) { return rlx_df_nan(); }
  if (!rlx_df_fin(b.x)) { return a; }
  let ab = rlx_df_abs(b);
  var r = rlx_df_abs(a);
  if (rlx_df_lt(r, ab)) { return a; }
  let q = rlx_df_trunc(rlx_df_div(r, ab));
  r = rlx_df_add(r, -rlx_df_mul(q, ab));
  if (r.x < 0.0) { r = rlx_df_add(r, ab); }
  if (!rlx_df_lt(r, ab)) { r = rlx_df_add(r, -ab); }
  return select(r, -r, a.x < 0.0);
}
fn rlx_df_from_i32(i: i32) -> vec2<f32> {
  return rlx_df_quick(f32(i & i32(-65536)), f32(i & 65535));
}
fn rlx_df_from_u32(u: u32) -> vec2<f32> {
  return rlx_df_quick(f32(u & 0xffff0000u), f32(u & 0xffffu));
}
// truncation of a finite value in the type's range (the caller saturates and maps NaN to 0)
fn rlx_df_to_i32(a: vec2<f32>) -> i32 {
  let t = rlx_df_trunc(a);
  return i32(t.x) + i32(t.y);
}
fn rlx_df_to_u32(a: vec2<f32>) -> u32 {
  let t = rlx_df_trunc(a);
  return u32(max(t.x, 0.0)) + bitcast<u32>(i32(t.y));
}
// the f64 bits (little-endian words) -> double-float, rounded to 48 bits
fn rlx_df_load(w: vec2<u32>) -> vec2<f32> {
  let s = w.y & 0x80000000u;
  let e = i32((w.y >> 20u) & 0x7ffu);
  let mh = w.y & 0xfffffu;
  if (e == 0x7ff) {
    if (mh == 0u && w.x == 0u) { return vec2<f32>(bitcast<f32>(s | 0x7f800000u | rlx_zero), 0.0); }
    return rlx_df_nan();
  }
  let x = e - 1023;
  if (x > 127) { return vec2<f32>(bitcast<f32>(s | 0x7f800000u | rlx_zero), 0.0); }
  if (x < -149 || e == 0) { return vec2<f32>(bitcast<f32>(s), 0.0); }
  let top = f32(0x800000u | (mh << 3u) | (w.x >> 29u));
  let rest = f32(w.x & 0x1fffffffu);
  var hi = ldexp(top, x - 23);
  var lo = ldexp(ldexp(rest, -26), x - 26);
  if (s != 0u) { hi = -hi; lo = -lo; }
  return rlx_df_quick(hi, lo);
}
// double-float -> the f64 bits of hi + lo (rounded to nearest)
fn rlx_df_store(a: vec2<f32>) -> vec2<u32> {
  let hb = bitcast<u32>(a.x);
  let s = hb & 0x80000000u;
  let m = hb & 0x7fffffffu;
  if (m >= 0x7f800000u) { return vec2<u32>(0u, s | select(0x7ff00000u, 0x7ff80000u, m > 0x7f800000u)); }
  if (m == 0u) { return vec2<u32>(0u, s); }
  let h = abs(a.x);
  let l = select(a.y, -a.y, s != 0u);
  let fr = frexp(h);
  var e = fr.exp - 1;  // h = 1.f * 2^e
  let mm = u32(ldexp(fr.fract, 24));  // h = mm * 2^(e - 23), 24 bits
  let k = 52 - e;  // l * 2^k is l in units of the f64 ulp of h
  let k1 = k / 2;
  let lf = round(ldexp(ldexp(l, k1), k - k1));
  let li = i32(clamp(lf, -1.0e9, 1.0e9));
  var mhi = mm >> 3u;
  var mlo = (mm & 7u) << 29u;
  if (li >= 0) {
    let n = mlo + u32(li);
    if (n < mlo) { mhi = mhi + 1u; }
    mlo = n;
  } else {
    let dd = u32(-li);
    if (dd > mlo) { mhi = mhi - 1u; }
    mlo = mlo - dd;
  }
  if (mhi >= 0x200000u) {
    mlo = (mlo >> 1u) | ((mhi & 1u) << 31u); mhi = mhi >> 1u; e = e + 1;
  } else if (mhi < 0x100000u) {
    mhi = (mhi << 1u) | (mlo >> 31u); mlo = mlo << 1u; e = e - 1;
  }
  return vec2<u32>(mlo, s | (u32(e + 1023) << 20u) | (mhi & 0xfffffu));
}
"""


def library() -> list[str]:
    """The WGSL helper functions (they call rlx_log and rlx_powf, the f32 helpers)."""
    return LIBRARY.strip("\n").splitlines() + [""]
