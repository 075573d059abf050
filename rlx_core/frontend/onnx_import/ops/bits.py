"""Converters for ONNX bit-level ops: BitShift (over import-time shift amounts) and BitCast."""

from __future__ import annotations

from rlx_core.frontend.onnx_import import dtypes as odt
from rlx_core.frontend.onnx_import.context import NodeCtx
from rlx_core.frontend.onnx_import.errors import Reject
from rlx_core.ir import dtypes as dt
from rlx_core.ir.graph import Value


def _wrap(v: int, d: dt.DType) -> int:
    """``v`` reduced modulo 2**bits into ``d``'s range (two's complement for signed types)."""
    v &= (1 << d.bits) - 1
    return v - (1 << d.bits) if d.kind is dt.Kind.INT and v >> (d.bits - 1) else v


def bit_shift(n: NodeCtx) -> Value:
    """Shifts as integer arithmetic by 2**y (exact: mul wraps, div truncates), with ONNX's
    out-of-range rule: a shift by y < 0 or y >= the width gives the sign fill alone (-1 for a
    right shift of a negative value, else 0)."""
    import numpy as np

    x, y = n.x(0), n.x(1)
    if x.type.dtype != y.type.dtype:
        raise Reject(f"operand dtypes differ ({x.type}, {y.type})")
    d = x.type.dtype
    signed = d.kind is dt.Kind.INT
    if not d.is_int or (signed and n.version < 28):
        raise Reject(f"BitShift of {d} (signed shifts need opset 28)")
    direction = n.attr("direction", b"")
    direction = direction.decode() if isinstance(direction, bytes) else direction
    if direction not in ("LEFT", "RIGHT"):
        raise Reject(f"direction must be LEFT or RIGHT, got {direction!r}")
    shape = n.bshape(x, y)
    shifts = np.broadcast_to(np.asarray(n.static(y, "the shift amounts")).astype(np.int64),
                             shape)
    x = n.broadcast(x, shape)
    # a signed right shift by width-1 is the sign fill too, and 2**(width-1) is not positive
    top = d.bits - 1 if signed and direction == "RIGHT" else d.bits
    valid = (shifts >= 0) & (shifts < top)
    powers = [_wrap(1 << int(s), d) if ok else (0 if direction == "LEFT" else 1)
              for s, ok in zip(shifts.reshape(-1).tolist(), valid.reshape(-1).tolist(), strict=False)]
    scale = n.array(np.asarray(powers, dtype=dt.to_numpy_name(d)).reshape(shape), d)
    if direction == "LEFT":
        return n.emit("mul", [x, scale])  # an out-of-range shift multiplies by 0
    q = n.emit("div", [x, scale])
    zero = n.full_like(0, x)
    if signed:  # arithmetic shift = floor division; MIR div truncates toward zero
        r = n.emit("rem", [x, scale])
        neg = n.emit("lt", [x, zero])
        fix = n.emit("and", [n.emit("ne", [r, zero]), neg])
        q = n.emit("select", [fix, n.emit("sub", [q, n.full_like(1, q)]), q])
        fill = n.emit("select", [neg, n.full_like(-1, x), zero])
    else:
        fill = zero
    if bool(valid.all()):
        return q
    mask = n.array(valid, dt.bool_)
    return n.emit("select", [mask, q, fill])


def bit_cast(n: NodeCtx) -> Value:
    """BitCast between same-width types: integer <-> integer and bool -> u8 are ``cast`` (the
    int -> int cast wraps modulo 2**width, which is reinterpreting the bits)."""
    x = n.x(0)
    to = odt.to_rlx(int(n.attr("to", 0)))
    if to is None:
        raise Reject(f"to={odt.onnx_type_name(int(n.attr('to', 0)))}, which rlx has no "
                     f"dtype for")
    src = x.type.dtype
    if src.bits != to.bits:
        raise Reject(f"{src} and {to} differ in width")
    if src == to:
        return x
    ints = (src.is_int or src == dt.bool_) and to.is_int
    if not ints:
        raise Reject(f"reinterpreting {src} as {to} needs a bitcast primitive rlx lacks")
    return n.cast(x, to)
