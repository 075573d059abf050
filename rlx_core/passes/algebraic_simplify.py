"""Algebraic simplification: a table of exact identities (x*1, neg(neg(x)), transpose chains, ...).

Only rules that hold for every input bit pattern are here. In particular, for floats
``x + 0.0`` is *not* ``x`` (``-0.0 + 0.0`` is ``+0.0``) and ``x * 0`` is not ``0`` (NaN, inf),
so those fire for integers only; ``x + (-0.0)`` and ``x - 0.0`` are exact for floats too.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from rlx_core.ir import dtypes as dt
from rlx_core.ir.graph import Graph, Node
from rlx_core.ir.ops.hir import HEADS_SWAP
from rlx_core.passes.base import PassContext
from rlx_core.passes.rewrite_engine import Replacement, RewriteView, Rules, require_level, rewrite


def _is(value: object, want: int) -> bool:
    """``value`` is the number ``want`` (bools excluded; 0 means +0.0 or an integer zero)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    if value != want:
        return False
    return not (isinstance(value, float) and want == 0 and math.copysign(1.0, value) < 0)


def _is_neg_zero(value: object) -> bool:
    return isinstance(value, float) and value == 0.0 and math.copysign(1.0, value) < 0


def _is_zero_for(value: object, dtype: dt.DType, additive: bool) -> bool:
    """An additive identity of ``dtype``: any zero for ints, only -0.0 for floats."""
    if dtype.is_int:
        return _is(value, 0) or _is_neg_zero(value)
    return dtype.is_float and additive and _is_neg_zero(value)


def mul_by_one(node: Node, view: RewriteView) -> Replacement:
    """x * 1 -> x and 1 * x -> x."""
    x, y = node.inputs
    if _is(view.splat(y), 1):
        return x
    if _is(view.splat(x), 1):
        return y
    return None


def mul_by_zero_int(node: Node, view: RewriteView) -> Replacement:
    """x * 0 -> 0 for integers (for floats NaN * 0 and inf * 0 are NaN)."""
    if not node.out.type.dtype.is_int:
        return None
    x, y = node.inputs
    for zero in (y, x):
        if _is(view.splat(zero), 0) and view.type_of(zero) == node.out.type:
            return zero
    return None


def add_zero(node: Node, view: RewriteView) -> Replacement:
    """x + 0 -> x and 0 + x -> x (integers; for floats only the zero -0.0 is an identity)."""
    x, y = node.inputs
    d = node.out.type.dtype
    if _is_zero_for(view.splat(y), d, True):
        return x
    if _is_zero_for(view.splat(x), d, True):
        return y
    return None


def sub_zero(node: Node, view: RewriteView) -> Replacement:
    """x - 0 -> x (for floats the zero must be +0.0: x - (-0.0) is x + 0.0)."""
    x, y = node.inputs
    d = node.out.type.dtype
    z = view.splat(y)
    if (d.is_int and (_is(z, 0) or _is_neg_zero(z))) or (d.is_float and _is(z, 0)):
        return x
    return None


def div_by_one(node: Node, view: RewriteView) -> Replacement:
    """x / 1 -> x."""
    x, y = node.inputs
    return x if _is(view.splat(y), 1) else None


def involution(node: Node, view: RewriteView) -> Replacement:
    """neg(neg(x)) -> x, logical_not(logical_not(x)) -> x (on ints logical_not is ~x: also an
    involution; neg wraps, so -(-INT_MIN) is INT_MIN again)."""
    inner = view.producer(node.inputs[0])
    if inner is None or inner.op != node.op:
        return None
    return inner.inputs[0]


def idempotent_binary(node: Node, view: RewriteView) -> Replacement:
    """max(x, x), min(x, x), and(x, x), or(x, x) -> x."""
    x, y = node.inputs
    return x if x == y else None


def sub_self_int(node: Node, view: RewriteView) -> Replacement:
    """x - x -> 0 for integers (inf - inf is NaN for floats)."""
    x, y = node.inputs
    t = node.out.type
    if x != y or not t.dtype.is_int:
        return None
    return [view.emit("constant", [], {"value": 0, "shape": t.shape, "dtype": t.dtype})]


def identity_movement(node: Node, view: RewriteView) -> Replacement:
    """reshape / broadcast_in_dim / transpose / cast that leave the type unchanged -> x."""
    x = node.inputs[0]
    if view.type_of(x) != node.out.type:
        return None
    if node.op == "transpose" and tuple(node.attr("perm")) != tuple(range(node.out.type.rank)):
        return None
    return x


def transpose_transpose(node: Node, view: RewriteView) -> Replacement:
    """transpose(transpose(x, p), q) -> transpose(x, p[q]) (identity_movement drops p[q] = id)."""
    inner = view.producer(node.inputs[0])
    if inner is None or inner.op != "transpose":
        return None
    p, q = tuple(inner.attr("perm")), tuple(node.attr("perm"))
    perm = tuple(p[j] for j in q)
    if perm == tuple(range(len(perm))):
        return inner.inputs[0]
    return [view.emit("transpose", [inner.inputs[0]], {"perm": perm})]


def reshape_reshape(node: Node, view: RewriteView) -> Replacement:
    """reshape(reshape(x)) -> reshape(x) (row-major reshapes compose)."""
    inner = view.producer(node.inputs[0])
    if inner is None or inner.op != "reshape":
        return None
    src = inner.inputs[0]
    if view.type_of(src) == node.out.type:
        return src
    return [view.emit("reshape", [src], {"shape": node.out.type.shape})]


def _through_transpose(view: RewriteView, operand: str, batch: tuple[int, ...],
                       contract: tuple[int, ...]) -> tuple[str, tuple[int, ...],
                                                           tuple[int, ...]] | None:
    """(source, batch, contract) naming ``operand``'s dims on the source of its transpose, or
    None when it is no transpose or when the transpose reorders free dims (the dot's result
    lists free dims in operand order, so reading the source would permute the result)."""
    t = view.producer(operand)
    if t is None or t.op != "transpose":
        return None
    perm = tuple(t.attr("perm"))
    free = [perm[i] for i in range(len(perm)) if i not in batch and i not in contract]
    if free != sorted(free):
        return None
    return t.inputs[0], tuple(perm[i] for i in batch), tuple(perm[i] for i in contract)


def dot_of_transpose(node: Node, view: RewriteView) -> Replacement:
    """dot_general(transpose(x, p), y) -> dot_general(x, y) with x's dims in the dimension
    numbers (the same for y): a transpose feeding a matmul is only a layout, and the matmul
    kernel reads its operand in whatever layout it is (MiniLM's head split: a strided GEMM
    instead of a copy)."""
    (lc, rc), (lb, rb) = node.attr("contract"), node.attr("batch")
    lhs, rhs = node.inputs
    left = _through_transpose(view, lhs, tuple(lb), tuple(lc))
    right = _through_transpose(view, rhs, tuple(rb), tuple(rc))
    if left is None and right is None:
        return None
    if left is not None:
        lhs, lb, lc = left
    if right is not None:
        rhs, rb, rc = right
    return [view.emit("dot_general", [lhs, rhs], {"contract": (tuple(lc), tuple(rc)),
                                                   "batch": (tuple(lb), tuple(rb))})]


def attention_in_place(node: Node, view: RewriteView) -> Replacement:
    """transpose(attention(transpose(xq), transpose(xk), transpose(xv)), heads) ->
    attention(xq, xk, xv, layout=bshd): the head split and merge of a transformer are only
    layouts; an attention kept whole (the CPU's kernel) reads the projections in place.
    Reached only where a target claims attention (elsewhere it was decomposed already)."""
    att = view.producer(node.inputs[0])
    if (tuple(node.attr("perm")) != HEADS_SWAP or att is None or att.op != "attention"
            or att.attr("layout") != "bhsd" or view.uses(att.out.name) != 1):
        return None
    sources = []
    for x in att.inputs[:3]:
        t = view.producer(x)
        if t is None or t.op != "transpose" or tuple(t.attr("perm")) != HEADS_SWAP:
            return None
        sources.append(t.inputs[0])
    attrs = {"mask": att.attr("mask"), "scale": att.attr("scale"), "layout": "bshd"}
    return [view.emit("attention", [*sources, *att.inputs[3:]], attrs)]


def select_known(node: Node, view: RewriteView) -> Replacement:
    """select(true, a, b) -> a, select(false, a, b) -> b, select(p, a, a) -> a."""
    p, a, b = node.inputs
    if a == b:
        return a
    pred = view.splat(p)
    if pred is True:
        return a
    if pred is False:
        return b
    return None


RULES: Rules = (
    ("mul", mul_by_one),
    ("mul", mul_by_zero_int),
    ("add", add_zero),
    ("sub", sub_zero),
    ("sub", sub_self_int),
    ("div", div_by_one),
    ("neg", involution),
    ("logical_not", involution),
    ("max", idempotent_binary),
    ("min", idempotent_binary),
    ("and", idempotent_binary),
    ("or", idempotent_binary),
    ("reshape", identity_movement),
    ("broadcast_in_dim", identity_movement),
    ("transpose", identity_movement),
    ("cast", identity_movement),
    ("transpose", transpose_transpose),
    ("reshape", reshape_reshape),
    ("select", select_known),
    ("dot_general", dot_of_transpose),
    ("transpose", attention_in_place),
)


@dataclass(frozen=True)
class AlgebraicSimplify:
    """Apply the exact identities in ``RULES`` to a fixpoint (``dce`` drops what they orphan)."""

    name: str = "algebraic_simplify"

    def run(self, g: Graph, ctx: PassContext) -> Graph:
        require_level(g, self.name)
        return rewrite(g, RULES, ctx)
