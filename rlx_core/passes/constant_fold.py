"""Constant folding: a node whose operands are all ``constant`` nodes becomes one constant.

Evaluation is pure Python (``const_eval``): elementwise unary/binary/compare/select/cast on
splats or on tuples of at most ``MAX_ELEMENTS`` elements, movement ops (broadcast_in_dim,
reshape, transpose, slice) of splats of any size and of small tuples, and small ``iota``.
A splat stays a splat, so ``broadcast_in_dim`` of a scalar constant to a large shape costs
nothing. Ops whose result is not exactly defined (see const_eval) are left alone.
"""

from __future__ import annotations

from dataclasses import dataclass

from rlx_core.ir.graph import Graph, Node
from rlx_core.passes.base import PassContext
from rlx_core.passes.const_eval import NotFoldable, eval_op, read_constant
from rlx_core.passes.rewrite_engine import Replacement, RewriteView, Rules, require_level, rewrite

# ops the folder never evaluates: reductions, contractions and indexing can be large and are
# cheap to leave for the target; ``constant`` is already folded
_SKIP = frozenset({"constant"})


def fold_constant_operands(node: Node, view: RewriteView) -> Replacement:
    """``op(constant, ...)`` -> ``constant`` holding the evaluated result."""
    if node.op in _SKIP:
        return None
    operands = []
    for name in node.inputs:
        producer = view.producer(name)
        data = read_constant(producer) if producer is not None else None
        if data is None:
            return None
        operands.append(data)
    try:
        result = eval_op(node.op, node.a, operands, node.out.type)
    except NotFoldable:
        return None
    return [view.emit("constant", [], result.attrs())]


RULES: Rules = ((None, fold_constant_operands),)


@dataclass(frozen=True)
class ConstantFold:
    """Fold constant subexpressions (run ``dce`` afterwards to drop the dead operands)."""

    name: str = "constant_fold"

    def run(self, g: Graph, ctx: PassContext) -> Graph:
        require_level(g, self.name)
        return rewrite(g, RULES, ctx)
