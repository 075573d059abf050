"""Reverse-mode autodiff on MIR: one graph computing the output and its gradients.

    forward nodes (as they are)                  %loss = ...
    seed                                         %g_loss = constant 1.0
    for node in reversed(nodes on a path wrt -> loss):
        cotangents of the node's operands  +=  VJP_RULES[node.op](node, ..., g_out)

HIR graphs are first lowered to MIR with the common-IR decompositions (``to_mir``), so the
rules only need to cover the primitive vocabulary; the few HIR ops with rules of their own
(``rules.HIR_VJP_RULES``: softmax, log_softmax) stay whole, so the forward keeps a target's
kernel for them and the backward is a short MIR expression of their output.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from rlx_core.autodiff.rules import HIR_VJP_RULES, NO_GRAD, rule_for
from rlx_core.dispatch.decompositions import decomposition_for
from rlx_core.dispatch.lower import expand
from rlx_core.errors import RlxError
from rlx_core.ir.builder import Builder, NameGen
from rlx_core.ir.graph import Graph, Level, Loc, Node, Value
from rlx_core.ir.ops.hir import HIR_OPS


class GradError(RlxError):
    """A gradient was asked of something that has none (non-scalar output, integer input...)."""

    code = "RLX-A001"


class NoVJPRuleError(GradError):
    """A float-valued op on the path to the loss has no VJP rule."""

    code = "RLX-A002"


def to_mir(g: Graph) -> Graph:
    """Lower every HIR composite with its common-IR decomposition (target independent), except
    those with a VJP rule of their own (rules.HIR_VJP_RULES), which stay whole."""
    values = dict(g.values())
    names = NameGen(values)
    todo = list(g.nodes)
    out: list[Node] = []
    while todo:
        n = todo.pop(0)
        if n.op not in HIR_OPS or n.op in HIR_VJP_RULES:
            out.append(n)
            continue
        fn = decomposition_for(n.op)
        if fn is None:  # an op with no MIR form (qr, svd, a Krylov solve): kept whole; the
            out.append(n)  # backward pass reports RLX-A002 if the loss depends on it
            continue
        made = expand(n, values, names, fn)
        for m in made:
            values[m.out.name] = m.out
        todo = made + todo  # a decomposition may itself produce HIR ops
    whole = any(n.op in HIR_OPS for n in out)  # then still HIR, if only in those ops
    return g.with_nodes(out, level=Level.HIR if whole else Level.MIR)


def _on_path(g: Graph, wrt: Sequence[str], output: str) -> set[str]:
    """Values that depend on some ``wrt`` and that ``output`` depends on."""
    forward = set(wrt)
    for n in g.nodes:
        if any(i in forward for i in n.inputs):
            forward.add(n.out.name)
    needed = {output}
    for n in reversed(g.nodes):
        if n.out.name in needed:
            needed.update(n.inputs)
    return forward & needed


def backward(g: Graph, wrt: Sequence[str], output: str) -> tuple[Graph, tuple[str, ...]]:
    """``g`` (MIR) extended with the gradient of scalar ``output`` w.r.t. each of ``wrt``.

    Returns the new graph (outputs unchanged) and the names of the gradient values, in ``wrt``
    order. Backward nodes keep the provenance of the forward node they differentiate, with the
    scope ``grad`` prepended, so the explorer can tell forward from backward.
    """
    values = g.values()
    out_v = values.get(output)
    if out_v is None:
        raise GradError(f"no value named {output!r} in {g.name}")
    if out_v.type.shape != () or not out_v.type.dtype.is_float:
        raise GradError(f"gradients need a scalar float output, got {out_v.type}",
                        hint="reduce the loss to a scalar (e.g. .mean()) before taking grad")
    for w in wrt:
        t = values[w].type
        if not t.dtype.is_float:
            raise GradError(f"cannot differentiate with respect to {w} of type {t}",
                            hint="only float inputs have gradients; pass integer data as a "
                                 "non-differentiated argument (argnums)")
    names = NameGen(values)
    b = Builder(names)
    path = _on_path(g, wrt, output)
    cot: dict[str, Value] = {}
    b.loc = Loc(scope="grad")
    cot[output] = b.emit("constant", [], {"value": 1.0, "shape": (), "dtype": out_v.type.dtype})
    missing: list[str] = []
    for n in reversed(g.nodes):
        if n.out.name not in path or n.out.name not in cot or n.op in NO_GRAD:
            continue
        rule = rule_for(n.op)
        if rule is None:
            missing.append(n.op)
            continue
        scope = f"grad.{n.loc.scope}" if n.loc.scope else "grad"
        b.loc = replace(n.loc, scope=scope)
        ins = [values[i] for i in n.inputs]
        grads = rule(n, ins, n.out, cot[n.out.name], b)
        for name, gi in zip(n.inputs, grads, strict=False):
            if gi is None or name not in path:
                continue
            if gi.type != values[name].type:  # internal invariant of the rule table
                raise GradError(f"VJP rule of {n.op} made {gi.type} for {values[name].type}",
                                hint="please report this: the rule is wrong")
            cot[name] = b.emit("add", [cot[name], gi]) if name in cot else gi
    if missing:
        raise NoVJPRuleError(f"no VJP rule for: {', '.join(sorted(set(missing)))}",
                             hint="add a rule to rlx_core/autodiff/rules.py")
    grads_out: list[str] = []
    b.loc = Loc(scope="grad")
    for w in wrt:
        if w not in cot:  # the output does not depend on w: its gradient is zero
            t = values[w].type
            cot[w] = b.emit("constant", [], {"value": 0.0, "shape": t.shape, "dtype": t.dtype})
        grads_out.append(cot[w].name)
    return g.with_nodes(list(g.nodes) + b.nodes), tuple(grads_out)
