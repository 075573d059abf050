"""Legalize: HIR -> MIR for one target, choosing a route (native / common-IR / rewritten) for
every node. The routing lives in rlx_core/dispatch/legalize.py; this file is the pass wrapper.
"""

from __future__ import annotations

from dataclasses import dataclass

from rlx_core.dispatch.legalize import legalize_graph
from rlx_core.ir.graph import Graph
from rlx_core.passes.base import PassContext


@dataclass(frozen=True)
class Legalize:
    """Lower every node to a route the target accepts, or raise LegalizationError listing all
    illegal nodes. Decision records go to ``ctx.trace.decisions`` when tracing is on; the whole
    result (graph + decisions) is also left on ``ctx.legalized`` for explain and tests."""

    name: str = "legalize"

    def run(self, g: Graph, ctx: PassContext) -> Graph:
        # a target with a strict model check of its own (cortex-m: int8 only) runs it first,
        # so its errors name every offending HIR node with a fix in the target's terms
        check = getattr(ctx.target, "check_hir", None)
        if callable(check):
            check(g)
        result = legalize_graph(g, ctx.target, ctx.options, ctx.trace)
        ctx.legalized = result  # type: ignore[attr-defined]
        return result.graph
