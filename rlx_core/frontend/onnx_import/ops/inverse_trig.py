"""Converters for ONNX Atan, Asin and Acos (opset 7, 22) from existing primitives.

atan is Cephes' double-precision atan (range reduction at tan(pi/8) and tan(3pi/8), then a
4/5-degree rational in x^2, about 1e-16 relative in f64 and correctly rounded to a few ULPs in
f32); asin(x) = atan(x / sqrt((1-x)(1+x))) and acos(x) = 2 atan(sqrt((1-x)/(1+x))) keep their
precision near +-1 (1 +- x is exact there) and give NaN outside [-1, 1]. f16/bf16 are computed
in f32 and rounded once.
"""

from __future__ import annotations

import math

from rlx_core.frontend.onnx_import.context import NodeCtx
from rlx_core.ir import dtypes as dt
from rlx_core.ir.graph import Value

_P = (-8.750608600031904122785e-1, -1.615753718733365076637e1, -7.500855792314704667340e1,
      -1.228866684490136173410e2, -6.485021904942025371773e1)
_Q = (2.485846490142306297962e1, 1.650270098316988542046e2, 4.328810604912902668951e2,
      4.853903996359136964868e2, 1.945506571482613964425e2)
_T3P8 = 2.41421356237309504880  # tan(3 pi / 8)
_MOREBITS = 6.123233995736765886130e-17  # pi/2 - float(pi/2)


def _poly(n: NodeCtx, z: Value, coeffs: tuple[float, ...], monic: bool) -> Value:
    acc = n.full_like(1.0 if monic else coeffs[0], z)
    for c in coeffs if monic else coeffs[1:]:
        acc = n.scalar_op("add", n.emit("mul", [acc, z]), c)
    return acc


def atan_of(n: NodeCtx, x: Value) -> Value:
    a = n.emit("abs", [x])
    big = n.emit("gt", [a, n.full_like(_T3P8, a)])
    mid = n.emit("gt", [a, n.full_like(0.66, a)])
    one = n.full_like(1.0, a)
    r_big = n.emit("neg", [n.emit("div", [one, a])])
    r_mid = n.emit("div", [n.emit("sub", [a, one]), n.emit("add", [a, one])])
    r = n.emit("select", [big, r_big, n.emit("select", [mid, r_mid, a])])
    base = n.emit("select", [big, n.full_like(math.pi / 2, a),
                             n.emit("select", [mid, n.full_like(math.pi / 4, a),
                                               n.full_like(0.0, a)])])
    extra = n.emit("select", [big, n.full_like(_MOREBITS, a),
                              n.emit("select", [mid, n.full_like(0.5 * _MOREBITS, a),
                                                n.full_like(0.0, a)])])
    z = n.emit("mul", [r, r])
    frac = n.emit("div", [_poly(n, z, _P, False), _poly(n, z, _Q, True)])
    t = n.emit("add", [n.emit("mul", [r, n.emit("mul", [z, frac])]), r])
    y = n.emit("add", [base, n.emit("add", [t, extra])])
    neg = n.emit("lt", [x, n.full_like(0.0, x)])
    return n.emit("select", [neg, n.emit("neg", [y]), y])


def _wrap(fn):
    def convert(n: NodeCtx) -> Value:
        x = n.x(0)
        d = n.float_type(x)
        w = n.cast(x, dt.f32) if d in (dt.f16, dt.bf16) else x
        return n.cast(fn(n, w), d)

    return convert


def _asin(n: NodeCtx, x: Value) -> Value:
    one = n.full_like(1.0, x)
    root = n.emit("sqrt", [n.emit("mul", [n.emit("sub", [one, x]), n.emit("add", [one, x])])])
    return atan_of(n, n.emit("div", [x, root]))


def _acos(n: NodeCtx, x: Value) -> Value:
    one = n.full_like(1.0, x)
    q = n.emit("div", [n.emit("sub", [one, x]), n.emit("add", [one, x])])
    return n.scalar_op("mul", atan_of(n, n.emit("sqrt", [q])), 2.0)


atan = _wrap(atan_of)
asin = _wrap(_asin)
acos = _wrap(_acos)
