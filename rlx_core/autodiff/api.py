"""``rlx.grad`` and ``rlx.value_and_grad``: the forward and backward pass in ONE graph.

Inside a trace (``rlx.compile``, ``rlx.jit``, a training step) the transformed function inlines
its forward nodes and their backward nodes into the graph being traced, so forward, backward
and an optimizer update compile together. Called on arrays outside any trace, it compiles that
one graph for ``target`` and runs it.

    loss, grads = rlx.value_and_grad(loss_fn)(params, x, y)    # params: a pytree of arrays
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from rlx_core.autodiff.pytree import TreeDef, flatten, unflatten
from rlx_core.autodiff.reverse import GradError, backward, to_mir
from rlx_core.frontend import tracer
from rlx_core.frontend.tracer import TraceContext, type_of_example
from rlx_core.ir.builder import Builder, NameGen
from rlx_core.ir.graph import Graph, Value, ValueKind

Argnums = int | Sequence[int]


def _argnum_tuple(argnums: Argnums, n_args: int) -> tuple[int, ...]:
    nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
    for a in nums:
        if not isinstance(a, int) or not -n_args <= a < n_args:
            raise GradError(f"argnums {argnums!r} out of range for {n_args} argument(s)",
                            hint="argnums counts positional arguments from 0")
    return tuple(a % n_args for a in nums)


def _leaf_ranges(args: tuple[Any, ...]) -> tuple[list[Any], TreeDef, list[range]]:
    """All leaves of ``args``, the structure, and which leaves belong to each argument."""
    leaves, tdef = flatten(args)
    ranges, start = [], 0
    for child in tdef.children:
        ranges.append(range(start, start + child.num_leaves))
        start += child.num_leaves
    return leaves, tdef, ranges


def _outer_values(ctx: TraceContext) -> dict[str, Value]:
    table = {v.name: v for v in ctx.inputs}
    table.update({v.name: v for v in ctx.params})
    table.update({n.out.name: n.out for n in ctx.builder.nodes})
    return table


def _trace_inner(fn: Callable[..., Any], tdef: TreeDef, types: list[Any], outer: TraceContext,
                 has_aux: bool) -> tuple[Graph, list[str], Any, list[Value]]:
    """Trace ``fn`` alone (its own graph) on symbolic leaves.

    Returns the HIR graph, the input names per leaf, the aux structure (None without aux) and
    the outer values ``fn`` closed over (tensors of the enclosing trace): those become extra,
    non-differentiated inputs of the inner graph, bound back to themselves when inlined.
    """
    from rlx_core.frontend.tensor import Tensor

    name = getattr(fn, "__name__", "fn")
    inner = TraceContext(f"grad_{name}")
    # names never collide with the enclosing trace's, so closed-over values stay unambiguous
    inner.names = NameGen(outer.names._taken)  # noqa: SLF001 (same package)
    inner.builder = Builder(inner.names)
    inner.scopes = list(outer.scopes)
    with tracer._active(inner):
        leaves = [Tensor(inner.add_input(f"arg{i}", t)) for i, t in enumerate(types)]
        result = fn(*unflatten(tdef, leaves))
        aux_def = None
        aux_leaves: list[Any] = []
        if has_aux:
            if not isinstance(result, tuple) or len(result) != 2:
                raise GradError(f"{name} was declared has_aux=True but did not return "
                                "(loss, aux)", hint="return a pair: the scalar loss and aux")
            result, aux = result
            aux_leaves, aux_def = flatten(aux)
        for out in [result, *aux_leaves]:
            if not isinstance(out, Tensor):
                raise GradError(f"{name} returned {type(out).__name__}, not a traced tensor",
                                hint="return rlx tensors computed from the arguments")
        defined = {v.name for v in inner.inputs} | {v.name for v in inner.params}
        defined |= {n.out.name for n in inner.builder.nodes}
        outer_vals = _outer_values(outer)
        free: list[Value] = []
        for n in inner.builder.nodes:
            for i in n.inputs:
                if i not in defined and i in outer_vals:
                    free.append(outer_vals[i])
                    defined.add(i)
        inner.inputs.extend(Value(v.name, v.type, ValueKind.INPUT) for v in free)
        hir = inner.finish([result.value] + [a.value for a in aux_leaves])
    return hir, [v.name for v in hir.inputs[:len(types)]], aux_def, free


def _inline(g: Graph, mapping: dict[str, Value], ctx: TraceContext) -> dict[str, Value]:
    """Re-emit ``g``'s nodes into the active trace; inputs/params already mapped."""
    start = len(ctx.builder.nodes)
    for p in g.params:
        mapping[p.name] = ctx.add_param(g.param_data[p.name], name=p.name)
    for n in g.nodes:
        mapping[n.out.name] = ctx.builder.emit(n.op, [mapping[i] for i in n.inputs],
                                               dict(n.attrs), loc=n.loc)
    # provenance names the inner graph's values; point it at their inlined counterparts
    nodes = ctx.builder.nodes
    for k in range(start, len(nodes)):
        loc = nodes[k].loc
        if loc.origin in mapping:
            nodes[k] = replace(nodes[k], loc=replace(loc, origin=mapping[loc.origin].name))
    return mapping


def _traced_value_and_grad(fn: Callable[..., Any], args: tuple[Any, ...], argnums: Argnums,
                           has_aux: bool) -> Any:
    from rlx_core.frontend import ops
    from rlx_core.frontend.tensor import Tensor

    ctx = tracer.current()
    nums = _argnum_tuple(argnums, len(args))
    leaves, tdef, ranges = _leaf_ranges(args)
    outer = [ops.asarray(x) for x in leaves]
    hir, in_names, aux_def, free = _trace_inner(fn, tdef, [t.value.type for t in outer], ctx,
                                                has_aux)
    wrt_leaves = [i for a in nums for i in ranges[a]]
    mir, grads = backward(to_mir(hir), [in_names[i] for i in wrt_leaves], hir.outputs[0])
    mapping = {name: t.value for name, t in zip(in_names, outer, strict=False)}
    mapping.update({v.name: v for v in free})
    mapping = _inline(mir, mapping, ctx)
    loss = Tensor(mapping[hir.outputs[0]])
    grad_leaves = [Tensor(mapping[gname]) for gname in grads]
    per_arg, k = [], 0
    for a in nums:
        n = len(ranges[a])
        per_arg.append(unflatten(tdef.children[a], grad_leaves[k:k + n]))
        k += n
    grads_tree = per_arg[0] if isinstance(argnums, int) else tuple(per_arg)
    if has_aux:
        aux = unflatten(aux_def, [Tensor(mapping[o]) for o in hir.outputs[1:]])
        return (loss, aux), grads_tree
    return loss, grads_tree


def _eager(fn: Callable[..., Any], args: tuple[Any, ...], argnums: Argnums, has_aux: bool,
           target: str) -> Any:
    """Compile the value-and-grad graph for these argument shapes and run it once."""
    import rlx_core.api as api

    leaves, tdef = flatten(args)
    holder: dict[str, TreeDef] = {}

    def value_and_grad_flat(*flat: Any) -> Any:
        out = _traced_value_and_grad(fn, unflatten(tdef, list(flat)), argnums, has_aux)
        outs, odef = flatten(out)
        holder["out"] = odef
        return tuple(outs)

    value_and_grad_flat.__name__ = f"value_and_grad_{getattr(fn, '__name__', 'fn')}"
    exe = api.compile(value_and_grad_flat, *leaves, target=target)
    res = exe(*leaves)
    res = list(res) if isinstance(res, tuple) else [res]
    return unflatten(holder["out"], res)


def value_and_grad(fn: Callable[..., Any], argnums: Argnums = 0, has_aux: bool = False,
                   target: str = "numpy") -> Callable[..., Any]:
    """A function returning ``(fn(*args), gradient of fn w.r.t. args[argnums])``.

    ``fn`` must return a scalar float (or ``(scalar, aux)`` with ``has_aux``). Arguments may be
    pytrees (tuples, lists, dicts) of arrays; the gradient has the same structure. ``target`` is
    used only when called outside a trace.
    """

    def wrapped(*args: Any) -> Any:
        if getattr(tracer._state, "ctx", None) is not None:
            return _traced_value_and_grad(fn, args, argnums, has_aux)
        return _eager(fn, args, argnums, has_aux, target)

    wrapped.__name__ = f"value_and_grad_{getattr(fn, '__name__', 'fn')}"
    wrapped.__doc__ = fn.__doc__
    return wrapped


def grad(fn: Callable[..., Any], argnums: Argnums = 0, has_aux: bool = False,
         target: str = "numpy") -> Callable[..., Any]:
    """The gradient of scalar ``fn`` w.r.t. ``args[argnums]`` (see ``value_and_grad``)."""
    vg = value_and_grad(fn, argnums, has_aux, target)

    def wrapped(*args: Any) -> Any:
        (value, grads) = vg(*args)
        if has_aux:
            return grads, value[1]
        return grads

    wrapped.__name__ = f"grad_{getattr(fn, '__name__', 'fn')}"
    wrapped.__doc__ = fn.__doc__
    return wrapped


def grad_graph(fn: Callable[..., Any], *example_args: Any, argnums: Argnums = 0) -> Graph:
    """The one graph ``value_and_grad(fn)`` compiles: outputs are the value, then the gradient
    leaves (for inspection, printing and the explorer)."""
    leaves, tdef = flatten(example_args)
    for x in leaves:
        type_of_example(x)  # typed error early for unusable example arguments

    def value_and_grad_flat(*flat: Any) -> Any:
        out = _traced_value_and_grad(fn, unflatten(tdef, list(flat)), argnums, False)
        return tuple(flatten(out)[0])

    value_and_grad_flat.__name__ = f"value_and_grad_{getattr(fn, '__name__', 'fn')}"
    return tracer.trace(value_and_grad_flat, *leaves)
