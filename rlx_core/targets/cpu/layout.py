"""Which activations the CPU keeps in NCHW8c (channels in blocks of 8, each pixel's 8 channels
contiguous) between kernels: a plan made once per LIR graph, before its kernels are written.

The blocked direct convolution (conv_blocked.py) computes in NCHW8c. With NCHW between all
kernels, every blocked conv copied its input into blocks and transposed its output back
(8 x 8 register transposes): about 20% of a 1x1 conv's time, enough that the GEMM kept the
1x1 convs. Here a value stays NCHW8c from the kernel that writes it to every kernel that
reads it, when all of them have a blocked form:

- a convolution on the blocked direct kernel reads its input, writes its output and reads
  its residual each in either layout, chosen apart: it is where a chain of blocked kernels
  starts and ends (the first conv after the image transposes its input, the last before the
  classifier head writes NCHW, adding a blocked residual through the same transposes; were
  the residual tied to the output, ResNet's last stage would be NCHW back to its start);
- a depthwise conv (channel multiplier 1) and a max / average pooling: input, output and
  residual in one layout;
- a concat on the channel axis of inputs whose channels are whole blocks: one image's
  channels [c0, c0 + ci) are the same bytes in both layouts (c0 a multiple of 8), so the
  copy is unchanged and its inputs and output just share one layout.

A value with 8k channels (its bytes are the same count in both layouts, so the arena plan is
untouched) is blocked unless something pins it to NCHW: a graph input, output or parameter,
a kernel without a blocked form reading or writing it (or a view of it: reshapes alias), or
a tie to a pinned value. Ties (one layout for several values) are kept by union-find.
"""

from __future__ import annotations

from collections.abc import Callable

from rlx_core.ir.graph import Graph, Kernel, Node
from rlx_core.targets.cpu.env import env_flag

BLOCK = 8  # channels per block (one ymm of f32)
CONV_OPS = ("conv2d", "conv2d_fused")
POOL_OPS = ("max_pool2d", "avg_pool2d")

# how a convolution node can run blocked: "direct" (groups 1, conv_blocked's tile: input
# free, output and residual tied), "dw" (depthwise, all tied) or None (NCHW only)
ConvKind = Callable[[Node], str | None]


class _Sets:
    """Union-find over value names."""

    def __init__(self) -> None:
        self.up: dict[str, str] = {}

    def find(self, v: str) -> str:
        self.up.setdefault(v, v)
        while self.up[v] != v:
            self.up[v] = self.up[self.up[v]]
            v = self.up[v]
        return v

    def tie(self, vs: list[str]) -> None:
        for a in vs[1:]:
            self.up[self.find(a)] = self.find(vs[0])


def _residual(node: Node) -> str | None:
    return node.inputs[-1] if node.op == "conv2d_fused" and node.attr("residual") else None


def _blockable(g: Graph, name: str) -> bool:
    t = g.type_of(name)
    return t.dtype.name == "f32" and t.rank == 4 and t.shape[1] % BLOCK == 0 and t.size > 0


def _ties(k: Kernel, g: Graph, conv_kind: ConvKind) -> tuple[list[list[str]], list[str]] | None:
    """The kernel's blocked form: (groups of values that share one layout, values free to
    be either), or None when it has none (every value it touches stays NCHW)."""
    if len(k.nodes) != 1:
        return None
    node = k.nodes[0]
    out = node.name
    if node.op == "conv2d_pair":  # the blocked direct kernel (conv_pair.py): inputs free
        return [[out]], [node.inputs[0], node.inputs[3]]
    if node.op in CONV_OPS:
        kind = conv_kind(node)
        res = _residual(node)
        tied = [out] + ([res] if res else [])
        if kind == "direct":
            return [[out]], [node.inputs[0]] + ([res] if res else [])
        if kind == "dw":
            return [[node.inputs[0], *tied]], []
        return None
    if node.op in POOL_OPS and node.type.dtype.name == "f32":
        return [[node.inputs[0], out]], []
    if node.op == "concat" and int(node.attr("axis")) == 1 and node.type.rank == 4:
        if all(_blockable(g, v) for v in (*node.inputs, out)):
            return [[*node.inputs, out]], []
    return None


def conv_kind_of(g: Graph) -> ConvKind:
    """How each convolution of ``g`` may run inside a chain of NCHW8c kernels: "direct" (the
    blocked kernel), "dw" (the blocked depthwise one) or None; f32 with a parameter filter."""
    from rlx_core.targets.cpu import conv_blocked, depthwise

    params = {v.name for v in g.params}

    def kind(node: Node) -> str | None:
        wname = node.inputs[1]
        if node.type.dtype.name != "f32" or wname not in params:
            return None
        c = int(g.type_of(node.inputs[0]).shape[1])
        o, _, kh, kw = g.type_of(wname).shape
        groups = int(node.attr("groups"))
        if conv_blocked.in_chain(c, groups, kh, kw):
            return "direct"
        return "dw" if depthwise.in_chain(c, o, groups, kh, kw) else None

    return kind


def plan(g: Graph, conv_kind: ConvKind, views: set[str] | None = None) -> set[str]:
    """The values of ``g`` (an LIR graph with kernels) to keep in NCHW8c. ``views``: the
    values on either side of a reshape that shares its input's bytes (None: the arena plan's
    aliases). A value the plan writes over another (BufferSlot.over) takes its layout: the
    in-place rule (inplace.py) allows only pairs this plan puts in one layout anyway."""
    sets = _Sets()
    pinned: set[str] = {v.name for v in (*g.inputs, *g.params)} | set(g.outputs)
    candidates: set[str] = set()
    for k in g.kernels:
        form = _ties(k, g, conv_kind)
        touched = [*k.inputs, *k.outputs]
        if form is None:
            pinned.update(touched)
            continue
        tied, free = form
        covered = {v for grp in tied for v in grp} | set(free)
        pinned.update(v for v in touched if v not in covered)  # e.g. a filter or bias
        for grp in tied:
            sets.tie(grp)
        candidates |= covered
    if views is None:
        views = {v for s in (g.plan.slots if g.plan else ()) if s.alias for v in (s.value, s.alias)}
    pinned |= views  # a reshape's view shares its root's bytes: both stay NCHW
    for out, src in (g.plan.written_over() if g.plan else {}).items():
        sets.tie([out, src])
    pinned |= {v for v in candidates if not _blockable(g, v)}
    bad = {sets.find(v) for v in pinned}
    return {v for v in candidates if sets.find(v) not in bad}


def lay_of(node: Node, blocked: set[str]) -> int:
    """The ``lay`` bits of a convolution (conv.emit_conv): 1 its input is NCHW8c, 2 its
    output is, 4 its residual is; a conv2d_pair's: 8 its second input (conv_pair.py)."""
    res = _residual(node)
    second = node.inputs[3] if node.op == "conv2d_pair" else None
    return (int(node.inputs[0] in blocked) | 2 * int(node.name in blocked)
            | 4 * int(res is not None and res in blocked)
            | 8 * int(second is not None and second in blocked))


def enabled() -> bool:
    """False when ``RLX_CPU_LAYOUT=0``: every value NCHW, each blocked conv converts its own
    input and output (A/B timing)."""
    return env_flag("RLX_CPU_LAYOUT", True)
