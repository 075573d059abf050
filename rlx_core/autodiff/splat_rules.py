"""VJP rules of the splatting ops: each forward op's gradient is its ``*_vjp`` op, whose packed
result is sliced back into one gradient per operand (rlx_core/splat/layout.py's columns)."""

from __future__ import annotations

from rlx_core.ir.builder import Builder
from rlx_core.ir.graph import Node, Value


def _cols(b: Builder, x: Value, lo: int, hi: int) -> Value:
    n = x.type.shape[0]
    return b.emit("slice", [x], {"start": (0, lo), "limit": (n, hi), "stride": (1, 1)})


def splat_project(n: Node, ins: list[Value], out: Value, g: Value, b: Builder):
    """Means, quats, scales, opacities and sh get gradients; the camera gets none."""
    grads = b.emit("splat_project_vjp", [*ins, g], dict(n.attrs))
    k = ins[4].type.shape[1]
    num = ins[0].type.shape[0]
    opac = b.emit("reshape", [_cols(b, grads, 10, 11)], {"shape": (num,)})
    sh = b.emit("reshape", [_cols(b, grads, 11, 11 + 3 * k)], {"shape": (num, k, 3)})
    return (_cols(b, grads, 0, 3), _cols(b, grads, 3, 7), _cols(b, grads, 7, 10), opac, sh,
            None, None)


def splat_rasterize(n: Node, ins: list[Value], out: Value, g: Value, b: Builder):
    return (b.emit("splat_rasterize_vjp", [ins[0], g], dict(n.attrs)),)


SPLAT_VJP_RULES = {"splat_project": splat_project, "splat_rasterize": splat_rasterize}
