"""Two 1x1 convolutions summed into one output as one kernel (HIR ``conv2d_pair``).

ResNet's first bottleneck block of each stage adds its projection shortcut (a 1x1 conv of the
block's input x, stride 1 or 2, BatchNorm folded) to its last 1x1 conv (of z, the 3x3's
output). Apart, the shortcut writes its output and the last 1x1 reads it back as its residual:
at 224x224 and batch 8, 25.7 MB each way in the first stage. passes/conv_epilogue.py makes the
pair where the CPU asks for it (``enabled``), and here it is one run of the blocked direct
kernel (conv_blocked.py's ``rlx_cb_conv2``) over K = [z; x sampled at the stride]::

    for each item (image, output rows), unit of 32 output channels, chunk of pixels:
        acc = 0
        for each K slice of z:  acc += z[pixels, slice] . w[slice, unit]     # the tile's K loop
        for each K slice of x:  acc += x[pixels * s, slice] . ws[slice, unit]
        y[pixels, unit] = act(acc + (b + bs))                           # the tile's epilogue

Each filter is packed on its own (prepack kind ``conv``); the tile's accumulators carry from
the first filter's slices to the second's through the thread's scratch (L1), as they do
between the slices of one long K. The sum's order differs from the unfused graph's
``(conv + b) + (shortcut + bs)`` by rounding only. ``RLX_CONV_PAIR=0`` keeps the two apart
(A/B timing), ``=all`` pairs every pair the rule admits.

Measured (ResNet-50, 224x224, 1 thread, thread CPU time, RLX_CONV_PAIR=0 against every pair,
in turns in one process under the FIFO lock, on a host running at ~half speed): the four
pairs' kernels together b1 8.45 ms apart, 8.46-8.54 as pairs; b8 74.5 -> 71.2 ms and 122.3 ->
113.2-116.4 (a slower spell). Writing the shortcut's output and reading it back costs less
than it seems: the first stage's 1x1 convs are bound by their FMAs (worth's table), and only
the second stage's pair, whose strided shortcut runs better chunk by chunk, gains at both
batches.
"""

from __future__ import annotations

from typing import Any

from rlx_core.ir.graph import Node
from rlx_core.targets.c_common import ctype_table as ct
from rlx_core.targets.c_common.kernels import KernelEnv
from rlx_core.targets.c_common.loops import Writer
from rlx_core.targets.cpu import conv_blocked
from rlx_core.targets.cpu.conv import ACT_CODES
from rlx_core.targets.cpu.env import env_choice

# both filters' bytes a pair runs chunk by chunk (rlx_cb_conv2's order; RLX_CB_FILTER_L2 for one
# conv), and the most a pair takes (worth): ResNet-50's second stage (128 + 256 -> 512, the
# shortcut at stride 2: 1.5 MB) went from unit by unit to chunk by chunk, which the strided
# shortcut needed (see worth)
PAIR_FILTER_L2 = 2 << 20


def mode() -> str:
    """``RLX_CONV_PAIR``: "0" no pairs (A/B timing), "all" every pair the rule admits (tests),
    else the rule table (worth); anything else is an ArgumentError."""
    return env_choice("RLX_CONV_PAIR", ("0", "all"))


def worth(o: int, c1: int, c2: int, stride2: int) -> bool:
    """Make the pair of an o-output 1x1 conv of c1 channels and a shortcut of c2 channels at
    stride ``stride2``? Only a strided shortcut whose filters together run chunk by chunk,
    and never a side of no input channels.
    ResNet-50, 224x224, 1 thread, per kernel (pair against the shortcut plus the last 1x1,
    each kernel's fastest call, in turns, FIFO, slowed host): stage 2 (128 + 256 -> 512, stride
    2) b1 2.54 -> 2.11 ms, b8 24.7 -> 19.2 ms; stage 1 (64 + 64 -> 256, stride 1) b1 1.47 ->
    1.54-1.56 (the accumulators cross the scratch between the two filters' K slices, where one
    conv of K = 64 starts them at the bias and stores them once); stages 3 and 4 (3.1 and
    6.3 MB of filters, unit by unit) b1 1.99 -> 2.22 and 2.46 -> 2.59-2.63 ms."""
    if min(c1, c2) == 0:  # a side of no channels: conv.py's kernels (the blocked one died of
        return False  # SIGFPE on it)
    if mode() == "all":
        return True
    return stride2 > 1 and o * (c1 + c2) * 4 <= PAIR_FILTER_L2


def rule(options: Any = None) -> Any:
    """The CPU's answer to passes/conv_epilogue.py (CpuTarget.conv_pairs): ``worth``, where the
    renderer runs the blocked direct kernel on prepacked filters (inplace.simd_convs); None
    with ``RLX_CONV_PAIR=0`` or ``RLX_CONV_BLOCKED=0``."""
    from rlx_core.errors import TargetUnavailableError
    from rlx_core.targets.cpu.inplace import simd_convs

    if mode() == "0" or conv_blocked.mode() == "0":
        return None
    try:
        return worth if simd_convs(options) else None
    except TargetUnavailableError:
        return None


def _geo(c: int, h: int, w: int, s: int, oh: int, ow: int) -> str:
    """rlx_conv_geo of a 1x1 window of stride s (unpadded, undilated) as a C initializer."""
    return f"{{{c}, {h}, {w}, 1, 1, {s}, {s}, 0, 0, 1, 1, {oh}, {ow}}}"


def emit_pair(env: KernelEnv, w: Writer, node: Node, packed: tuple[str, str], lay: int) -> str:
    """The kernel of a conv2d_pair (inputs z, w, b, x, ws, bs) on conv_blocked.emit_blocked's
    item loop; ``packed``: both filters' prepacked panels; ``lay``: layout.lay_of's bits (1 z,
    2 the output, 8 x NCHW8c). Returns conv_blocked.IMPL_PAIR."""
    z, wt, bias, x, ws, bs = (env.inputs[v] for v in node.inputs)
    out = env.outputs[node.name]
    n, c, h, wd = z.type.shape
    _, c2, h2, w2 = x.type.shape
    o = int(wt.type.shape[0])
    oh, ow = (int(v) for v in out.type.shape[2:])
    s1, s2 = (int(node.attr(a)[0]) for a in ("stride", "stride2"))
    d = node.type.dtype
    act = ACT_CODES[str(node.attr("act"))]
    tail = f"{act}, {ct.literal(float(node.attr('lo')), d)}, {ct.literal(float(node.attr('hi')), d)}"
    flops = n * o * oh * ow * (c + c2)
    second = conv_blocked.Second(x.ptr, ws.ptr, packed[1], bs.ptr, c2, h2 * w2,
                                 _geo(c2, h2, w2, s2, oh, ow), bool(lay & 8), PAIR_FILTER_L2)
    fold = conv_blocked.images_per_call(
        n, (c * h * wd + c2 * oh * w2) * 4, conv_blocked.packed_bytes(o, c + c2, 1, 1),
        bool(lay & 1) and bool(lay & 8))
    return conv_blocked.emit_blocked(env, w, packed[0], _geo(c, h, wd, s1, oh, ow), n, z.ptr,
                                     wt.ptr, c, h * wd, o, oh, ow, bias.ptr, None, out.ptr, tail,
                                     flops, lay & 3, second, fold)
