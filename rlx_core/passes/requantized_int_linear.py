"""Fold a static int8 layer whose output stays an integer into ``requantized_int_linear``.

``quantize_static`` chains two quantized linears through the integers (the MNIST MLP)::

    acc = int_linear(q, w_q, bias_i32) {a_zero_point = zp_x}
    y   = requantize(acc) {multiplier, shift (per tensor or per output channel), zp_y, u8}
          [-> max(y, zp_y): a folded ReLU] [-> min / max: 7-bit codes]

On a target that keeps them apart, the i32 accumulator goes through memory and requantize
and each clamp are elementwise kernels of their own. Where the target claims
``requantized_int_linear`` (the CPU: the packed int8 GEMM requantizes in its store and writes
the codes, cpu/igemm_packed.py), the rules here replace the chain::

    requantize(int_linear(q, w_q[, bias])) -> requantized_int_linear(q, w_q[, bias])
        {a_zero_point, multiplier, shift, zero_point, dtype, qmin, qmax = the dtype's range}
        (q = clamp(quantize(x, s, zp)), the first layer's: -> requantized_int_linear(x, ..)
         {a_scale s, a_qmin, a_qmax}, x quantized in the kernel as static_int_linear's)
    max(requantized_int_linear(..) {qmin}, c) -> the same with qmin = max(qmin, c)
    min(requantized_int_linear(..) {qmax}, c) -> the same with qmax = min(qmax, c)

The op's rule is the chain's arithmetic (numpy_ref/quant_semantics.py), so the folded graph
computes what the explicit one does. A weight zero point, an accumulator read elsewhere or a
requantize along another axis is left as it is.
"""

from __future__ import annotations

from dataclasses import dataclass

from rlx_core.ir import dtypes as dt
from rlx_core.ir.graph import Graph, Node
from rlx_core.ir.ops.quant import qrange
from rlx_core.passes.base import PassContext
from rlx_core.passes.dce import DCE
from rlx_core.passes.dynamic_int_linear import _splat
from rlx_core.passes.rewrite_engine import Replacement, RewriteView, Rules, require_level, rewrite
from rlx_core.passes.static_int_linear import _codes, _int_splat

OP = "requantized_int_linear"
ATTRS = ("a_zero_point", "multiplier", "shift", "zero_point", "dtype", "qmin", "qmax",
         "a_scale", "a_qmin", "a_qmax")


def fold_requantize(node: Node, view: RewriteView) -> Replacement:
    """requantize(int_linear(q, w_q[, bias])) -> requantized_int_linear."""
    acc = node.inputs[0]
    lin = view.producer(acc)
    if lin is None or lin.op != "int_linear" or view.uses(acc) != 1 or view.is_output(acc):
        return None
    out, w = node.out.type, view.type_of(lin.inputs[1])
    per_channel = len(node.attr("multiplier")) > 1
    if (lin.attr("b_zero_point") or w.dtype != dt.i8 or w.rank != 2
            or out.dtype not in (dt.i8, dt.u8)
            or (per_channel and node.attr("axis") % out.rank != out.rank - 1)):
        return None
    lo, hi = qrange(out.dtype)
    attrs = {"a_zero_point": lin.attr("a_zero_point"), "multiplier": node.attr("multiplier"),
             "shift": node.attr("shift"), "zero_point": node.attr("zero_point"),
             "dtype": out.dtype, "qmin": lo, "qmax": hi}
    x = lin.inputs[0]
    found = _codes(view, x)  # the first layer: its f32 input's quantize goes in too
    if found is not None:
        q, qlo, qhi = found
        s, zp = _splat(view, q.inputs[1]), _int_splat(view, q.inputs[2])
        if (s is not None and zp == lin.attr("a_zero_point") and qlo <= zp <= qhi
                and 0 < s < float("inf")):
            x = q.inputs[0]
            attrs.update(a_scale=s, a_qmin=qlo, a_qmax=qhi)
    return [view.emit(OP, [x, *lin.inputs[1:]], attrs)]


def fold_clamp(node: Node, view: RewriteView) -> Replacement:
    """max / min of a requantized_int_linear (read nowhere else) by an integer constant:
    narrow the op's [qmin, qmax] (a ReLU is max(y, zp_y); 7-bit codes are a min and a max)."""
    for mine, other in (node.inputs, node.inputs[::-1]):
        op = view.producer(mine)
        c = view.splat(other)
        if (op is None or op.op != OP or view.uses(mine) != 1 or view.is_output(mine)
                or not isinstance(c, int) or isinstance(c, bool)):
            continue
        qmin, qmax = op.attr("qmin"), op.attr("qmax")
        qmin, qmax = (max(qmin, c), qmax) if node.op == "max" else (qmin, min(qmax, c))
        if qmin >= qmax:  # a constant result: not this op's form
            return None
        return [view.emit(OP, op.inputs, {**{k: op.attr(k) for k in ATTRS},
                                          "qmin": qmin, "qmax": qmax})]
    return None


RULES: Rules = (("requantize", fold_requantize), ("max", fold_clamp), ("min", fold_clamp))


def claims(g: Graph, ctx: PassContext) -> bool:
    """Does the target claim the op in i8 and does ``g`` hold a requantize to fold?"""
    caps = getattr(ctx.target, "caps", None)
    claim = caps.claim_for(OP) if caps is not None else None
    return (claim is not None and "i8" in claim.dtypes
            and any(n.op == "requantize" for n in g.nodes))


@dataclass(frozen=True)
class RequantizedIntLinear:
    """Apply ``RULES`` where the target claims ``requantized_int_linear``."""

    name: str = "requantized_int_linear"

    def run(self, g: Graph, ctx: PassContext) -> Graph:
        require_level(g, self.name)
        if not claims(g, ctx):
            return g
        # quantize_static leaves an unread f32 view (dequantize) beside each chained layer's
        # codes: drop it first, or the codes would count two readers and stay unfolded
        return rewrite(DCE().run(g, ctx), RULES, ctx)
