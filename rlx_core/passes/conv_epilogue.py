"""Fold a convolution's elementwise epilogue into the convolution: conv2d -> conv2d_fused.

Where a target keeps ``conv2d`` whole (the CPU's conv kernel, cpu/conv.py), what follows it in
a CNN is a residual add and a ReLU or ReLU6 (``max(y, 0)``, ``min(max(y, 0), 6)``): each an
elementwise kernel that reads the whole output back from memory and writes it again. These
rules move them into the convolution's store, one at a time, outermost last::

    add(conv2d(x, w, b), r)           -> conv2d_fused(x, w, b, r) {residual}
    max(conv2d_fused(...), lo)        -> conv2d_fused(...) {act=max, lo}
    min(conv2d_fused(...{max}), hi)   -> conv2d_fused(...) {act=clip, lo, hi}

``conv2d_fused`` computes ``act((conv + bias) + residual)``, the decomposition's order, so the
result is the one of the unfused graph.

Where the target asks for it (its ``conv_pairs(options)``: the CPU's blocked direct kernel,
where it pays), a residual that is itself a 1x1 convolution joins the one it is added to::

    add(conv2d(z, w, b), conv2d(x, ws, bs) {stride s})
                                      -> conv2d_pair(z, w, b, x, ws, bs) {stride2 s}

ResNet's projection shortcut: the first bottleneck block of each stage adds a 1x1 conv of
its input (stride 1 or 2, BatchNorm folded) to its last 1x1 conv. As a pair the two are one
kernel whose K runs over both inputs: the shortcut's output is never written nor read back
(at 224x224, batch 8: 25.7 MB each way in the first stage). Both 1x1, unpadded, undilated,
groups 1, with a bias, their filters graph parameters (the target packs them). A rule fires only when the convolution's result has
no other use (it is not stored) and the target claims ``conv2d_fused`` in the dtype; elsewhere
conv2d was decomposed already and nothing here matches.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rlx_core.ir.graph import Graph, Node
from rlx_core.passes.base import PassContext
from rlx_core.passes.rewrite_engine import (
    Replacement,
    RewriteView,
    RuleFn,
    Rules,
    require_level,
    rewrite,
)

GEOMETRY = ("stride", "padding", "dilation", "groups")


def _conv(view: RewriteView, name: str, act: tuple[str, ...], residual: bool | None) -> Node | None:
    """The conv2d / conv2d_fused producing ``name``, used once, with its act in ``act`` and
    (unless ``residual`` is None) that residual flag."""
    n = view.producer(name)
    if n is None or view.uses(name) != 1 or view.is_output(name):
        return None
    if n.op == "conv2d_pair":  # no residual of its own
        return n if residual is None and n.attr("act") in act else None
    if n.op == "conv2d":
        return n if "none" in act and not residual else None
    if n.op != "conv2d_fused" or n.attr("act") not in act:
        return None
    return n if residual is None or bool(n.attr("residual")) == residual else None


def _attrs(n: Node, **changes: Any) -> dict[str, Any]:
    a: dict[str, Any] = {k: n.attr(k) for k in GEOMETRY}
    if n.op == "conv2d_pair":
        a = n.a
    elif n.op == "conv2d_fused":
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
        return [view.emit(_fused(conv), list(conv.inputs),
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
        act = "clip" if conv.op != "conv2d" and conv.attr("act") == "max" else "min"
        return [view.emit(_fused(conv), list(conv.inputs),
                          _attrs(conv, act=act, hi=float(hi)))]
    return None


def _fused(conv: Node) -> str:
    """The op a convolution becomes with an act: a pair stays a pair."""
    return "conv2d_pair" if conv.op == "conv2d_pair" else "conv2d_fused"


def _one_by_one(view: RewriteView, name: str, params: frozenset[str]) -> Node | None:
    """The conv2d producing ``name``, used once, when a pair can take it: a 1x1 window,
    unpadded, undilated, groups 1, a bias, its filter a graph parameter."""
    n = view.producer(name)
    if (n is None or n.op != "conv2d" or view.uses(name) != 1 or view.is_output(name)
            or len(n.inputs) != 3 or n.inputs[1] not in params):
        return None
    if (tuple(view.type_of(n.inputs[1]).shape[2:]) != (1, 1) or int(n.attr("groups")) != 1
            or tuple(n.attr("padding")) != (0, 0) or tuple(n.attr("dilation")) != (1, 1)):
        return None
    return n


def pair_rule(params: frozenset[str], dtypes: tuple[str, ...],
              worth: Callable[[int, int, int, int], bool]) -> RuleFn:
    """The rule add(conv2d 1x1, conv2d 1x1) -> conv2d_pair for a graph of these ``params``
    (the filters the target can pack) in the dtypes the target claims the pair in, where the
    target finds it ``worth`` it (outputs, channels, shortcut channels, shortcut stride)."""

    def conv_pair(node: Node, view: RewriteView) -> Replacement:
        """add(conv2d(z, w, b), conv2d(x, ws, bs) {stride s}) -> conv2d_pair(z, w, b, x, ws,
        bs) {stride2 s}: both 1x1 (see _one_by_one), the same output type; the first the
        one of stride 1 where the other is strided."""
        if node.out.type.dtype.name not in dtypes or len(set(node.inputs)) != 2:
            return None
        a, b = (_one_by_one(view, v, params) for v in node.inputs)
        if a is None or b is None or a.type != node.out.type or b.type != node.out.type:
            return None
        if tuple(a.attr("stride")) != (1, 1):
            a, b = b, a
        o, c1 = view.type_of(a.inputs[1]).shape[:2]
        c2, s = view.type_of(b.inputs[1]).shape[1], tuple(b.attr("stride"))
        if s[0] != s[1] or not worth(int(o), int(c1), int(c2), int(s[0])):
            return None
        attrs = {**_attrs(a), "stride2": s, "packed": True}  # the cpu claims packed pairs only
        return [view.emit("conv2d_pair", [*a.inputs, *b.inputs], attrs)]

    return conv_pair


RULES: Rules = (("add", conv_residual), ("max", conv_max), ("min", conv_min))


def _claims_both(ctx: PassContext) -> bool:
    """Does the target claim conv2d_fused wherever it claims conv2d (same dtypes)? Then
    every conv2d left after legalization may become a conv2d_fused."""
    caps = getattr(ctx.target, "caps", None)
    if caps is None:
        return False
    conv, fused = caps.claim_for("conv2d"), caps.claim_for("conv2d_fused")
    return conv is not None and fused is not None and set(conv.dtypes) <= set(fused.dtypes)


def _rules(g: Graph, ctx: PassContext) -> Rules:
    """RULES, after the pair rule where the target asks for pairs (its conv_pairs) and claims
    conv2d_pair."""
    asks = getattr(ctx.target, "conv_pairs", None)
    claim = ctx.target.caps.claim_for("conv2d_pair")
    worth = asks(ctx.options) if asks is not None and claim is not None else None
    if worth is None:
        return RULES
    params = frozenset(v.name for v in g.params)
    return (("add", pair_rule(params, tuple(claim.dtypes), worth)), *RULES)


@dataclass(frozen=True)
class ConvEpilogue:
    """Apply ``RULES`` where the target claims ``conv2d_fused`` (then DCE drops the convs)."""

    name: str = "conv_epilogue"

    def run(self, g: Graph, ctx: PassContext) -> Graph:
        require_level(g, self.name)
        if not _claims_both(ctx) or not any(n.op == "conv2d" for n in g.nodes):
            return g
        return rewrite(g, _rules(g, ctx), ctx)
