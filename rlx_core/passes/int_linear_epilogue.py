"""Fold what follows an int8 linear into its store: GELU and a residual add.

After the folds of passes/dynamic_int_linear.py and passes/static_int_linear.py, a
transformer layer's int8 linears are one kernel each, but what reads them is not: the FFN's
first linear feeds a GELU, the attention output and the FFN's second linear a residual add,
three elementwise kernels a layer that read the linear's output back from memory and write it
again (the f32 GEMM takes them into its store). The rules here move them into the int8
linear's store (cpu/igemm_packed.py), one at a time::

    gelu(op(...)) {approximate none}   -> op(...) {act=gelu}
    add(op(...), r)                    -> op(..., r) {residual}       (r shaped like the output)

for ``op`` ``dynamic_int_linear`` or ``static_int_linear``. The op computes ``act(y) +
residual``, the order of the unfused graph, so the result is the one it computes (up to the
f32 rounding of the target's GELU, the same function either way). A rule fires only when the
linear's result has no other use and is no graph output, and only where the target's claim
of the op lists the attribute value (an ``attr_in`` constraint, cpu/caps.py): a target that
claims the op without its epilogue keeps the GELU and the add as they are.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rlx_core.ir.graph import Graph, Node
from rlx_core.passes.base import PassContext
from rlx_core.passes.rewrite_engine import Replacement, RewriteView, Rules, require_level, rewrite

OPS = ("dynamic_int_linear", "static_int_linear")


def _linear(view: RewriteView, name: str) -> Node | None:
    """The int8 linear producing ``name``, used only here, with no residual yet."""
    n = view.producer(name)
    if (n is None or n.op not in OPS or view.uses(name) != 1 or view.is_output(name)
            or n.attr("residual")):
        return None
    return n


def claimed(caps: Any, op: str, key: str, value: Any) -> bool:
    """Does the target's claim of ``op`` list ``value`` for attribute ``key`` (an
    ``attr_in`` constraint)? A claim without one says nothing of the epilogue: not folded."""
    claim = caps.claim_for(op) if caps is not None else None
    return claim is not None and any(c.kind == "attr_in" and c.key == key and value in c.values
                                     for c in claim.constraints)


def _rules(caps: Any) -> Rules:
    """RULES narrowed to what the target's claims list (per op, per attribute)."""
    def gelu(node: Node, view: RewriteView) -> Replacement:
        lin = _linear(view, node.inputs[0])
        return (fold_gelu(node, view) if lin is not None
                and claimed(caps, lin.op, "act", "gelu") else None)

    def residual(node: Node, view: RewriteView) -> Replacement:
        if not any((lin := _linear(view, y)) is not None
                   and claimed(caps, lin.op, "residual", True) for y in node.inputs):
            return None
        return fold_residual(node, view)

    for fn, of in ((gelu, fold_gelu), (residual, fold_residual)):
        fn.__name__, fn.__doc__ = of.__name__, of.__doc__
    return (("gelu", gelu), ("add", residual))


def fold_gelu(node: Node, view: RewriteView) -> Replacement:
    """gelu(op) -> op {act=gelu} (the exact, erf form)."""
    lin = _linear(view, node.inputs[0])
    if lin is None or lin.attr("act") != "none" or node.attr("approximate") != "none":
        return None
    return [view.emit(lin.op, list(lin.inputs), {**dict(lin.attrs), "act": "gelu"})]


def fold_residual(node: Node, view: RewriteView) -> Replacement:
    """add(op, r) -> op(..., r) {residual}: r as large as the output (not a broadcast or a
    constant, which would then be materialised)."""
    for y, r in (node.inputs, node.inputs[::-1]):
        lin = _linear(view, y)
        if lin is None or r == y or view.type_of(r) != node.out.type:
            continue
        src = view.producer(r)
        if src is not None and src.op in ("broadcast_in_dim", "constant"):
            continue
        return [view.emit(lin.op, [*lin.inputs, r], {**dict(lin.attrs), "residual": True})]
    return None


RULES: Rules = (("gelu", fold_gelu), ("add", fold_residual))


@dataclass(frozen=True)
class IntLinearEpilogue:
    """Apply ``RULES`` to the int8 linears whose claim lists the epilogue (cpu/caps.py's
    ``attr_in`` constraints on ``act`` and ``residual``)."""

    name: str = "int_linear_epilogue"

    def run(self, g: Graph, ctx: PassContext) -> Graph:
        require_level(g, self.name)
        caps = getattr(ctx.target, "caps", None)
        if caps is None or not any(n.op in OPS and caps.claim_for(n.op) is not None
                                   for n in g.nodes):
            return g
        return rewrite(g, _rules(caps), ctx)
