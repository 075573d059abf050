"""Common-subexpression elimination: nodes with equal (op, inputs, attrs) compute one value.

The first such node (in graph order) is kept and later ones forward to it, so the result is
deterministic. Attributes are compared by their text form, which tells ``0.0`` from ``-0.0``
and lets two NaN constants merge; constants are merged like any other node. Every op in MIR
and HIR is pure; ``send``/``recv`` (ir/ops/collective.py EFFECT_OPS) are never merged.
"""

from __future__ import annotations

from dataclasses import dataclass

from rlx_core.ir.graph import Graph, Node
from rlx_core.ir.ops.collective import EFFECT_OPS
from rlx_core.ir.printer import fmt_attr
from rlx_core.passes.base import PassContext
from rlx_core.passes.rewrite_engine import Replacement, RewriteView, RuleFn, require_level, rewrite

Key = tuple[str, tuple[str, ...], tuple[tuple[str, str], ...]]


def node_key(node: Node) -> Key:
    """What makes two nodes compute the same value."""
    return (node.op, node.inputs, tuple((k, fmt_attr(v)) for k, v in node.attrs))


def _merge_rule() -> RuleFn:
    first: dict[Key, str] = {}

    # one table per run: the engine sees every node's inputs already renamed, so a merge
    # cascades to the users of merged nodes within the same sweep
    def merge_equal_nodes(node: Node, view: RewriteView) -> Replacement:
        """A node equal to an earlier one -> that earlier node's value."""
        if node.op in EFFECT_OPS:
            return None  # two equal recvs are two messages
        key = node_key(node)
        kept = first.setdefault(key, node.out.name)
        return None if kept == node.out.name else kept

    return merge_equal_nodes


@dataclass(frozen=True)
class CSE:
    """Merge equal nodes, keeping the first; merged nodes are removed, not left for ``dce``."""

    name: str = "cse"

    def run(self, g: Graph, ctx: PassContext) -> Graph:
        require_level(g, self.name)
        return rewrite(g, ((None, _merge_rule()),), ctx)
