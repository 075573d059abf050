"""Fold a convolution's elementwise epilogue into the convolution: conv2d -> conv2d_fused.

Where a target keeps ``conv2d`` whole (the CPU's conv kernel, cpu/conv.py), what follows it in
a CNN is a residual add and a ReLU or ReLU6 (``max(y, 0)``, ``min(max(y, 0), 6)``): each an
elementwise kernel that reads the whole output back from memory and writes it again. These
rules move them into the convolution's store, one at a time, outermost last::

    add(conv2d(x, w, b), r)           -> conv2d_fused(x, w, b, r) {residual}
    max(conv2d_fused(...), lo)        -> conv2d_fused(...) {act=max, lo}
    min(conv2d_fused(...{max}), hi)   -> conv2d_fused(...) {act=clip, lo, hi}

``conv2d_fused`` computes ``act((conv + bias) + residual)``, the decomposition's order, so the
result is the one of the unfused graph. A rule fires only when the convolution's result has
no other use (it is not stored) and the target claims ``conv2d_fused`` in the dtype; elsewhere
conv2d was decomposed already and nothing here matches.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rlx_core.ir.graph import Graph, Node
from rlx_core.passes.base import PassContext
from rlx_core.passes.rewrite_engine import Replacement, RewriteView, Rules, require_level, rewrite

GEOMETRY = ("stride", "padding", "dilation", "groups")


def _conv(view: RewriteView, name: str, act: tuple[str, ...], residual: bool | None) -> Node | None:
    """The conv2d / conv2d_fused producing ``name``, used once, with its act in ``act`` and
    (unless ``residual`` is None) that residual flag."""
    n = view.producer(name)
    if n is None or view.uses(name) != 1 or view.is_output(name):
        return None
    if n.op == "conv2d":
        return n if "none" in act and not residual else None
    if n.op != "conv2d_fused" or n.attr("act") not in act:
        return None
    return n if residual is None or bool(n.attr("residual")) == residual else None


def _attrs(n: Node, **changes: Any) -> dict[str, Any]:
    a: dict[str, Any] = {k: n.attr(k) for k in GEOMETRY}
    if n.op == "conv2d_fused":
        a.update({k: n.attr(k) for k in ("act", "lo", "hi", "residual")})
    a.update(changes)
    return a


def conv_residual(node: Node, view: RewriteView) -> Replacement:
    """add(conv, r) -> conv2d_fused(..., r) {residual}: r as large as the output (not a
    broadcast, which would then be materialised)."""
    for c, r in (node.inputs, node.inputs[::-1]):
        conv = _conv(view, c, ("none",), False)
        if conv is None or r == c or view.type_of(r) != node.out.type:
            continue
        src = view.producer(r)
        if src is not None and src.op in ("broadcast_in_dim", "constant"):
            continue
        return [view.emit("conv2d_fused", [*conv.inputs, r], _attrs(conv, residual=True))]
    return None


def conv_max(node: Node, view: RewriteView) -> Replacement:
    """max(conv, lo) -> conv2d_fused {act=max, lo} (ReLU: lo = 0)."""
    for c, k in (node.inputs, node.inputs[::-1]):
        conv = _conv(view, c, ("none",), None)
        lo = view.splat(k)
        if conv is None or isinstance(lo, bool) or not isinstance(lo, int | float):
            continue
        return [view.emit("conv2d_fused", list(conv.inputs),
                          _attrs(conv, act="max", lo=float(lo)))]
    return None


def conv_min(node: Node, view: RewriteView) -> Replacement:
    """min(conv, hi) -> conv2d_fused {act=min, hi}; min(conv {act=max}, hi) -> {act=clip}
    (ReLU6: lo = 0, hi = 6)."""
    for c, k in (node.inputs, node.inputs[::-1]):
        conv = _conv(view, c, ("none", "max"), None)
        hi = view.splat(k)
        if conv is None or isinstance(hi, bool) or not isinstance(hi, int | float):
            continue
        act = "clip" if conv.op == "conv2d_fused" and conv.attr("act") == "max" else "min"
        return [view.emit("conv2d_fused", list(conv.inputs),
                          _attrs(conv, act=act, hi=float(hi)))]
    return None


RULES: Rules = (("add", conv_residual), ("max", conv_max), ("min", conv_min))


def _claims_both(ctx: PassContext) -> bool:
    """Does the target claim conv2d_fused wherever it claims conv2d (same dtypes)? Then
    every conv2d left after legalization may become a conv2d_fused."""
    caps = getattr(ctx.target, "caps", None)
    if caps is None:
        return False
    conv, fused = caps.claim_for("conv2d"), caps.claim_for("conv2d_fused")
    return conv is not None and fused is not None and set(conv.dtypes) <= set(fused.dtypes)


@dataclass(frozen=True)
class ConvEpilogue:
    """Apply ``RULES`` where the target claims ``conv2d_fused`` (then DCE drops the convs)."""

    name: str = "conv_epilogue"

    def run(self, g: Graph, ctx: PassContext) -> Graph:
        require_level(g, self.name)
        if not _claims_both(ctx) or not any(n.op == "conv2d" for n in g.nodes):
            return g
        return rewrite(g, RULES, ctx)
