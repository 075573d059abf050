"""Apply one decomposition or rewrite to one node: the shared mechanics of every route.

The produced nodes carry the HIR node's provenance, and the last one is renamed to the node's
own result name so that the rest of the graph (and the graph outputs) need no renaming.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from rlx_core.errors import RlxError
from rlx_core.ir.builder import Builder, NameGen
from rlx_core.ir.graph import Node, Value


class LoweringBug(RlxError):
    """A decomposition produced a value of the wrong type: a bug in rlx, not in user code."""

    code = "RLX-L010"


def expand(node: Node, values: dict[str, Value], names: NameGen,
           fn: Callable[[Node, list[Value], Builder], Value]) -> list[Node]:
    """The nodes ``fn`` builds for ``node``; the last defines ``node.out.name``."""
    b = Builder(names, loc=node.loc.with_origin(node.loc.origin or node.out.name,
                                                node.loc.origin_op or node.op))
    result = fn(node, [values[i] for i in node.inputs], b)
    if result.type != node.out.type:
        raise LoweringBug(f"lowering {node.op} made {result.type}, expected {node.out.type}",
                          hint="please report this: the decomposition is wrong")
    nodes = list(b.nodes)
    produced = {n.out.name for n in nodes}
    if result.name not in produced:
        # the lowering is the identity on an operand: keep a node defining the name
        ident = b.emit("reshape", [result], {"shape": result.type.shape})
        nodes = list(b.nodes)
        result = ident
    last = [i for i, n in enumerate(nodes) if n.out.name == result.name][0]
    old, new = result.name, node.out.name
    renamed: list[Node] = []
    for i, n in enumerate(nodes):
        out = replace(n.out, name=new) if i == last else n.out
        ins = tuple(new if x == old else x for x in n.inputs)
        renamed.append(replace(n, out=out, inputs=ins))
    return renamed
