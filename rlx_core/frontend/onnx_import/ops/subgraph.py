"""Control-flow bodies (an If branch, a Loop or Scan body) inlined into the graph being imported.

rlx graphs are static, so control flow is imported by converting the body once per use (one
unrolled iteration, one taken branch) through ``inline_graph``; its names are local to each
inlining, so an unrolled body can be inlined any number of times. Also here: the unrolling
budget, the side-effect check a speculative If needs, and stacking per-step values."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rlx_core.frontend.onnx_import import dtypes as odt
from rlx_core.frontend.onnx_import.context import NodeCtx
from rlx_core.frontend.onnx_import.errors import Reject
from rlx_core.frontend.onnx_import.ops.inline_graph import inline_graph
from rlx_core.ir.graph import Value

# An unrolled body is emitted once per iteration; past this many node copies the graph is too
# big to compile in reasonable time, so the node is refused instead.
MAX_UNROLLED_NODES = 20000

# ops whose result is not a function of their inputs: a branch holding one cannot be computed
# speculatively and selected afterwards
_NONDETERMINISTIC = ("RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike",
                     "Multinomial", "Bernoulli")


def body_size(graph: Any) -> int:
    """Node count of ``graph`` including nested subgraphs (for the unrolling budget)."""
    total = 0
    for node in graph.node:
        total += 1
        for sub in _subgraphs(node):
            total += body_size(sub)
    return total


def has_side_effects(graph: Any) -> bool:
    """True when some node of ``graph`` (or of a nested subgraph) is random."""
    for node in graph.node:
        if node.op_type in _NONDETERMINISTIC:
            return True
        if any(has_side_effects(sub) for sub in _subgraphs(node)):
            return True
    return False


def check_unroll(n: NodeCtx, graph: Any, count: int) -> None:
    """Refuse unrolling ``graph`` ``count`` times when the copies would be too many."""
    size = body_size(graph) * count
    if size > MAX_UNROLLED_NODES:
        raise Reject(f"unrolling {count} iterations of a {body_size(graph)}-node body makes "
                     f"{size} nodes (limit {MAX_UNROLLED_NODES}); rlx graphs are static")


def _subgraphs(node: Any) -> list[Any]:
    from onnx import AttributeProto

    out = []
    for a in node.attribute:
        if a.type == AttributeProto.GRAPH:
            out.append(a.g)
        elif a.type == AttributeProto.GRAPHS:
            out.extend(a.graphs)
    return out


def inline(n: NodeCtx, graph: Any, bindings: Sequence[Value], what: str) -> list[Value]:
    """Emit the nodes of ``graph`` with its formal inputs bound to ``bindings`` (in order) and
    return its outputs (``inline_graph``, after checking the inputs' declared element types).
    Any node the body cannot convert exactly rejects the enclosing node."""
    if len(bindings) != len(graph.input):
        raise Reject(f"{what} declares {len(graph.input)} inputs, the node gives "
                     f"{len(bindings)}")
    for vi, v in zip(graph.input, bindings, strict=True):
        _check_declared(vi, v, what)
    return inline_graph(n, graph, list(bindings), what)


def _check_declared(vi: Any, v: Value, what: str) -> None:
    """A body input's declared element type (when it has one) must be what it is bound to."""
    t = vi.type
    if t.WhichOneof("value") not in (None, "tensor_type"):
        raise Reject(f"{what}: input {vi.name!r} is a {t.WhichOneof('value')}; only tensors "
                     f"are supported")
    elem = t.tensor_type.elem_type if t.WhichOneof("value") else 0
    if elem and odt.to_rlx(elem) != v.type.dtype:
        raise Reject(f"{what}: input {vi.name!r} is declared "
                     f"{odt.onnx_type_name(elem)} but bound to {v.type}")


def stack(n: NodeCtx, vals: Sequence[Value], axis: int) -> Value:
    """Stack same-typed values along a new ``axis`` (concat's arity is bounded, so many
    values are concatenated in groups)."""
    first = vals[0].type
    for v in vals:
        if v.type != first:
            raise Reject(f"scan output changes type across iterations ({first} then {v.type})")
    shape = list(first.shape)
    shape.insert(axis, 1)
    parts = [n.reshape(v, shape) for v in vals]
    return concat_many(n, parts, axis)


def concat_many(n: NodeCtx, vals: Sequence[Value], axis: int) -> Value:
    vals = list(vals)
    while len(vals) > 1:
        vals = [vals[i] if len(vals[i:i + 64]) == 1 else
                n.emit("concat", vals[i:i + 64], {"axis": axis})
                for i in range(0, len(vals), 64)]
    return vals[0]
