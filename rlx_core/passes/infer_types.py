"""Type inference: re-run every op's shape/dtype rule and rebuild each node's result type.

Use it after editing a graph by hand or after a frontend that builds nodes without the
Builder: types flow from the inputs through the rules, attributes get their defaults, and an
ill-typed node raises the rule's own typed error (ShapeError, DTypeError, ...) naming it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from rlx_core.errors import IRParseError, RlxError, VerifyError
from rlx_core.ir.builder import infer_type
from rlx_core.ir.graph import Graph, Node, TensorType, Value, freeze_attrs
from rlx_core.ir.printer import context
from rlx_core.passes.base import PassContext
from rlx_core.passes.rewrite_engine import require_level


def _named(err: RlxError, g: Graph, node: Node) -> RlxError:
    """The same kind of error, its message naming the node and showing the IR around it."""
    message = f"%{node.out.name} = {node.op}(...) at {node.loc.where}: {err.message}\n" + context(
        g, node.out.name
    )
    if isinstance(err, IRParseError):  # a different constructor; never raised by op rules
        return VerifyError(message, hint=err.hint)
    try:
        return type(err)(message, hint=err.hint, code=err.code)
    except TypeError:
        return RlxError(message, hint=err.hint, code=err.code)


def retype_node(node: Node, types: dict[str, TensorType]) -> Node:
    """``node`` with completed attributes and the type its rule gives for ``types``."""
    attrs, out_type = infer_type(node.op, [types[i] for i in node.inputs], node.a)
    return replace(
        node, out=Value(node.out.name, out_type, node.out.kind), attrs=freeze_attrs(attrs)
    )


@dataclass(frozen=True)
class InferTypes:
    """Recompute every result type from the graph inputs down."""

    name: str = "infer_types"

    def run(self, g: Graph, ctx: PassContext) -> Graph:
        require_level(g, self.name)
        types: dict[str, TensorType] = {v.name: v.type for v in (*g.inputs, *g.params)}
        nodes: list[Node] = []
        for n in g.nodes:
            missing = [i for i in n.inputs if i not in types]
            if missing:
                raise VerifyError(
                    f"%{n.out.name} = {n.op}(...) uses %{missing[0]} before it is defined\n"
                    + context(g, n.out.name),
                    hint="nodes must be in topological order; define operands first",
                )
            try:
                new = retype_node(n, types)
            except RlxError as err:
                raise _named(err, g, n) from None
            if ctx.trace is not None and new != n:
                ctx.record(retype_node, [n], [new], node=n.out.name)
            types[n.out.name] = new.out.type
            nodes.append(new)
        return g.with_nodes(nodes)
