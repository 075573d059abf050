"""Fold dynamic int8 linears (rlx.quant.ptq, per-token scales) into ``dynamic_int_linear``.

``quantize_dynamic(granularity="token")`` writes every linear as an explicit chain, so the
quantized graph shows each step::

    s   = div(max(reduce_max(abs(x2), axes=(1,)), 1e-30), Q)        x2 = x as (rows, k)
    acc = int_linear(quantize(x2, s, 0) {axis=0, i8}, w_q)
    y   = mul(dequantize(acc, w_scale, 0) {axis=-1}, broadcast(s))  (acc, s at x's rank)
    y   = add(y, broadcast(bias))

(``Q`` = 127, or 63 for 7-bit codes: the op's ``a_qmax``.)

On a target that keeps the chain apart, that is four kernels a linear (the row maxima, the
quantize, the GEMM, the dequantize), each a pass through memory. Where the target claims
``dynamic_int_linear`` (the CPU: rows quantized into the GEMM's own buffer, dequantize and
bias in its store, cpu/igemm_packed.py), the rules here replace the chain, before legalization
decomposes ``quantize`` and ``dequantize``::

    mul(dequantize(int_linear(quantize(x2, s)), w_scale), s)  -> dynamic_int_linear(x, w_q, w_scale)
    add(dynamic_int_linear(...), broadcast(bias))             -> dynamic_int_linear(..., bias)

The op's reference rule (numpy_ref/quant_semantics.py) is that chain's arithmetic, so the
folded graph computes what the explicit one does. Anything else (per-tensor scales, zero
points, a u8 input, a chain whose pieces are read elsewhere) is left as it is.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from rlx_core.ir import dtypes as dt
from rlx_core.ir.graph import Graph, Node
from rlx_core.passes.base import PassContext
from rlx_core.passes.rewrite_engine import Replacement, RewriteView, Rules, require_level, rewrite

OP = "dynamic_int_linear"


def _f32(x: float) -> float:
    """``x`` rounded to f32, without numpy (this pass runs in Pyodide, which has none)."""
    return struct.unpack("<f", struct.pack("<f", x))[0]


TINY = _f32(1e-30)


def _splat(view: RewriteView, name: str) -> float | None:
    """``name``'s value (f32) if it is a real constant splat through broadcasts and reshapes."""
    v = view.splat(name)
    if v is None or isinstance(v, bool):
        return None
    try:
        return _f32(float(v))
    except (TypeError, ValueError, OverflowError):  # a complex or non-numeric splat
        return None


def _is(view: RewriteView, name: str, value: float) -> bool:
    """Is ``name`` a constant splat of exactly ``value`` (f32) through broadcasts and reshapes?"""
    return _splat(view, name) == value


def _through_reshape(view: RewriteView, name: str) -> str:
    n = view.producer(name)
    return n.inputs[0] if n is not None and n.op == "reshape" else name


def _row_scale(view: RewriteView, s: str) -> tuple[str, int] | None:
    """The (rows, k) input ``x2`` and ``q`` when ``s`` is ``max(max|x2| over axis 1, 1e-30) /
    q``, ``q`` a whole number in [1, 127] (the op's ``a_qmax``)."""
    div = view.producer(s)
    q = _splat(view, div.inputs[1]) if div is not None and div.op == "div" else None
    if q is None or not (1.0 <= q <= 127.0 and q == int(q)):
        return None
    mx = view.producer(div.inputs[0])
    if mx is None or mx.op != "max" or not _is(view, mx.inputs[1], TINY):
        return None
    red = view.producer(mx.inputs[0])
    if red is None or red.op != "reduce_max" or tuple(red.attr("axes")) != (1,):
        return None
    ab = view.producer(red.inputs[0])
    return (ab.inputs[0], int(q)) if ab is not None and ab.op == "abs" else None


def fold_chain(node: Node, view: RewriteView) -> Replacement:
    """mul(dequantize(int_linear(quantize(x2, s)), w_scale), broadcast(s)) -> the op."""
    for d, r in (node.inputs, node.inputs[::-1]):
        deq = view.producer(d)
        if deq is None or deq.op != "dequantize" or view.uses(d) != 1:
            continue
        acc_name = _through_reshape(view, deq.inputs[0])
        lin = view.producer(acc_name)
        if (lin is None or lin.op != "int_linear" or len(lin.inputs) != 2
                or lin.attr("a_zero_point") or lin.attr("b_zero_point")
                or not _is(view, deq.inputs[2], 0)):
            continue
        q = view.producer(lin.inputs[0])
        w, ws = view.type_of(lin.inputs[1]), view.type_of(deq.inputs[1])
        if (q is None or q.op != "quantize" or q.attr("axis") != 0 or q.attr("dtype") != dt.i8
                or not _is(view, q.inputs[2], 0) or w.dtype != dt.i8
                or ws.shape != (w.shape[0],) or deq.attr("axis") % node.out.type.rank
                != node.out.type.rank - 1):
            continue
        x2, s = q.inputs[0], q.inputs[1]
        found = _row_scale(view, s)
        if found is None or found[0] != x2:
            continue
        bc = view.producer(r)  # the row scale, at the output's rank
        if bc is None or bc.op != "broadcast_in_dim" or _through_reshape(view, bc.inputs[0]) != s:
            continue
        lead = node.out.type.shape[:-1]
        if tuple(bc.attr("dims")) != tuple(range(len(lead))):
            continue
        x = _through_reshape(view, x2)
        x = x if view.type_of(x).shape[:-1] == lead else x2
        if view.type_of(x).shape[:-1] != lead:
            continue
        return [view.emit(OP, [x, lin.inputs[1], deq.inputs[1]], {"a_qmax": found[1]})]
    return None


def fold_bias(node: Node, view: RewriteView) -> Replacement:
    """add(dynamic_int_linear(x, w, s), broadcast(bias over the last axis)) -> with the bias."""
    for y, r in (node.inputs, node.inputs[::-1]):
        op = view.producer(y)
        if op is None or op.op != OP or len(op.inputs) != 3 or view.uses(y) != 1:
            continue
        bc = view.producer(r)
        rank = node.out.type.rank
        if bc is None or bc.op != "broadcast_in_dim" or tuple(bc.attr("dims")) != (rank - 1,):
            continue
        bias = view.type_of(bc.inputs[0])
        if bias.dtype != dt.f32 or bias.shape != (node.out.type.shape[-1],):
            continue
        return [view.emit(OP, [*op.inputs, bc.inputs[0]], dict(op.attrs))]
    return None


RULES: Rules = (("mul", fold_chain), ("add", fold_bias))


@dataclass(frozen=True)
class DynamicIntLinear:
    """Apply ``RULES`` where the target claims ``dynamic_int_linear`` in f32 and i8."""

    name: str = "dynamic_int_linear"

    def run(self, g: Graph, ctx: PassContext) -> Graph:
        require_level(g, self.name)
        return rewrite(g, RULES, ctx) if folds_into(g, ctx, OP) else g


def folds_into(g: Graph, ctx: PassContext, op: str) -> bool:
    """Does an int8-linear fold to ``op`` apply: the target claims ``op`` in f32 and i8 and
    ``g`` holds an ``int_linear``? (passes/static_int_linear.py asks the same.)"""
    caps = getattr(ctx.target, "caps", None)
    claim = caps.claim_for(op) if caps is not None else None
    return (claim is not None and {"f32", "i8"} <= set(claim.dtypes)
            and any(n.op == "int_linear" for n in g.nodes))
