"""Fold static int8 linears (rlx.quant.ptq.quantize_static) into ``static_int_linear``.

``quantize_static`` writes a linear whose output leaves the integer chain (a transformer's
every linear: GELU, a residual add or attention reads it) as::

    q   = quantize(x, s, zp) {u8 or i8, per tensor}   [-> min(q, hi) -> max(q, lo): 7-bit codes]
    acc = int_linear(q, w_q, bias_i32) {a_zero_point = zp}
    y   = dequantize(acc, acc_scale, 0) {axis -1}

On a target that keeps the chain apart, that is three kernels a linear, two of them passes
through memory of their own. Where the target claims ``static_int_linear`` (the CPU: the
rows quantized into the GEMM's own buffer, the dequantize in its store,
cpu/igemm_packed.py), the rule here replaces the chain, before legalization decomposes
``quantize`` and ``dequantize``::

    dequantize(int_linear(clamp(quantize(x, s, zp))), acc_scale, 0)
        -> static_int_linear(x, w_q, acc_scale[, bias]) {a_scale s, a_zero_point zp,
                                                       a_qmin, a_qmax}

The op's reference rule (numpy_ref/quant_semantics.py) is that chain's arithmetic, so the
folded graph computes what the explicit one does. A quantize shared by several linears (q, k
and v read one input) is folded into each; it is dead afterwards. Anything else (per-channel
activation scales, a weight zero point, an accumulator read elsewhere) is left as it is.
"""

from __future__ import annotations

from dataclasses import dataclass

from rlx_core.ir import dtypes as dt
from rlx_core.ir.graph import Graph, Node
from rlx_core.ir.ops.quant import qrange
from rlx_core.passes.base import PassContext
from rlx_core.passes.dynamic_int_linear import _splat, folds_into
from rlx_core.passes.rewrite_engine import Replacement, RewriteView, Rules, require_level, rewrite

OP = "static_int_linear"


def _int_splat(view: RewriteView, name: str) -> int | None:
    """``name``'s value if it is an integer constant splat."""
    v = view.splat(name)
    return int(v) if isinstance(v, int) and not isinstance(v, bool) else None


def _codes(view: RewriteView, name: str) -> tuple[Node, int, int] | None:
    """The per-tensor ``quantize`` behind ``name`` (through ``min`` / ``max`` clamps by
    constants) and the codes' range [lo, hi]."""
    lo, hi = -(2**31), 2**31 - 1
    node = view.producer(name)
    while node is not None and node.op in ("min", "max"):
        c = _int_splat(view, node.inputs[1])
        if c is None:
            return None
        lo, hi = (max(lo, c), hi) if node.op == "max" else (lo, min(hi, c))
        node = view.producer(node.inputs[0])
    if node is None or node.op != "quantize" or node.attr("dtype") not in (dt.i8, dt.u8):
        return None
    if view.type_of(node.inputs[1]).rank != 0:
        return None  # per-channel activation scales: not this op
    dlo, dhi = qrange(node.attr("dtype"))
    lo, hi = max(lo, dlo), min(hi, dhi)
    return (node, lo, hi) if lo < hi else None


def fold_chain(node: Node, view: RewriteView) -> Replacement:
    """dequantize(int_linear(codes(x)), acc_scale, 0) -> static_int_linear."""
    acc = node.inputs[0]
    lin = view.producer(acc)
    if (lin is None or lin.op != "int_linear" or view.uses(acc) != 1
            or lin.attr("b_zero_point") or _int_splat(view, node.inputs[2]) != 0):
        return None
    rank = node.out.type.rank
    w, scale = view.type_of(lin.inputs[1]), view.type_of(node.inputs[1])
    if (w.dtype != dt.i8 or scale.shape != (w.shape[0],) or scale.dtype != dt.f32
            or node.attr("axis") % rank != rank - 1):
        return None
    found = _codes(view, lin.inputs[0])
    if found is None:
        return None
    q, lo, hi = found
    s, zp = _splat(view, q.inputs[1]), _int_splat(view, q.inputs[2])
    if s is None or zp is None or zp != lin.attr("a_zero_point") or not lo <= zp <= hi:
        return None
    if not (s > 0 and s != float("inf")):
        return None
    return [view.emit(OP, [q.inputs[0], lin.inputs[1], node.inputs[1], *lin.inputs[2:]],
                      {"a_scale": s, "a_zero_point": zp, "a_qmin": lo, "a_qmax": hi})]


RULES: Rules = (("dequantize", fold_chain),)


@dataclass(frozen=True)
class StaticIntLinear:
    """Apply ``RULES`` where the target claims ``static_int_linear`` in f32 and i8."""

    name: str = "static_int_linear"

    def run(self, g: Graph, ctx: PassContext) -> Graph:
        require_level(g, self.name)
        return rewrite(g, RULES, ctx) if folds_into(g, ctx, OP) else g
