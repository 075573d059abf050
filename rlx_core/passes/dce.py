"""Dead-code elimination: keep only the nodes the graph outputs depend on."""

from __future__ import annotations

from dataclasses import dataclass

from rlx_core.ir.graph import Graph, Node
from rlx_core.ir.ops.collective import EFFECT_OPS
from rlx_core.passes.base import PassContext
from rlx_core.passes.rewrite_engine import require_level


def dead_node(node: Node) -> None:
    """A node no output depends on is dropped (the rule recorded for each one removed)."""


def live_names(g: Graph) -> set[str]:
    """Names of every value some output depends on (walking producers back from the outputs),
    and of every node with an effect (``send``/``recv``: the peer rank waits for them)."""
    producers = g.producers()
    live: set[str] = set()
    todo = list(g.outputs) + [n.out.name for n in g.nodes if n.op in EFFECT_OPS]
    while todo:
        name = todo.pop()
        if name in live:
            continue
        live.add(name)
        node = producers.get(name)
        if node is not None:
            todo.extend(node.inputs)
    return live


@dataclass(frozen=True)
class DCE:
    """Drop unreachable nodes; inputs and parameters stay (they are the function's signature)."""

    name: str = "dce"

    def run(self, g: Graph, ctx: PassContext) -> Graph:
        require_level(g, self.name)
        live = live_names(g)
        kept = [n for n in g.nodes if n.out.name in live]
        if len(kept) == len(g.nodes):
            return g.with_nodes(g.nodes)
        if ctx.trace is not None:
            for n in g.nodes:
                if n.out.name not in live:
                    ctx.record(dead_node, [n], [], node=n.out.name)
        return g.with_nodes(kept)
