"""Which CPU kernels may write their output over an input that dies there (the arena plan's
in-place shares, passes/plan_arena.py's in_place_shares; ``CpuTarget.arena_in_place``).

The plan offers a kernel's only output the slot of an input read only at the output
element's own index; the CPU takes the offer where its kernel reads that element before it
writes it, and writes nothing there before:

- an elementwise kernel: one loop, each element's operands loaded before its store (the
  rule runtime/donation.py already relies on);
- a fused convolution over its residual, on the blocked direct kernel (conv_blocked.py) with
  the output and the residual both NCHW8c (layout.py's plan, computed here as the renderer
  will): its K slices sum into the thread's scratch and the output is stored once, at the
  last slice, where the epilogue loads the residual's same lines (the fused tile) or in the
  store pass (rlx_cb_store_b: the same index in both). Not on Winograd, and not NCHW: the
  implicit GEMM there (conv.py) keeps its partial sums in the output, over the residual.

The 1x1 convs of small K with a residual are bound by the stream they write (conv_blocked's
docstring: 0.141 -> 0.119 ms with the stores left out, 64->256 at 28x28); over the residual
they write lines they have just read. ``RLX_ARENA_INPLACE=0`` turns the shares off (A/B).
"""

from __future__ import annotations

from typing import Any

from rlx_core.ir.graph import Graph, Kernel
from rlx_core.passes.plan_arena import InPlaceRule, aliases, liveness
from rlx_core.targets.cpu.env import env_flag


def enabled() -> bool:
    """False when ``RLX_ARENA_INPLACE=0`` (A/B timing)."""
    return env_flag("RLX_ARENA_INPLACE", True)


def simd_convs(options: Any) -> bool:
    """Will the renderer run the blocked direct kernel on prepacked filters (CpuTarget.build's
    prepack_conv)?"""
    from rlx_core.targets.cpu.prepack import prepack_enabled
    from rlx_core.targets.cpu.toolchain import find_compiler

    flags = getattr(options, "flags", None) or {}
    if not (prepack_enabled() and not flags.get("no_prepack")):
        return False
    comp = find_compiler()
    return bool(comp.avx2_fma or comp.avx512)


def blocked_convs(options: Any) -> bool:
    """Will the renderer run blocked layouts (simd_convs, and layout.py not turned off)?"""
    from rlx_core.targets.cpu import layout

    return layout.enabled() and simd_convs(options)


def conv_in_place(g: Graph, node: Any, blocked: set[str]) -> bool:
    """May this fused convolution write its output over its residual (both NCHW8c, on the
    blocked direct kernel, not Winograd)?"""
    from rlx_core.targets.cpu import conv

    res = node.inputs[-1]
    return (node.name in blocked and res in blocked and node.type.dtype.name == "f32"
            and int(node.attr("groups")) == 1
            and conv.winograd_tile_of(node, g.type_of(node.inputs[0]).shape,
                                      g.type_of(node.inputs[1]).shape) == 0)


def rule(g: Graph, options: Any) -> InPlaceRule | None:
    """The CPU's answer for ``g`` (an LIR graph before its arena plan), or None: no shares."""
    if not enabled():
        return None
    from rlx_core.targets.cpu import layout

    blocked: set[str] = set()
    if blocked_convs(options):
        views = aliases(g, liveness(g))
        blocked = layout.plan(g, layout.conv_kind_of(g), {*views, *views.values()})

    def allowed(k: Kernel, out: str, src: str) -> bool:
        if k.kind == "elementwise":
            return True
        return k.nodes[0].op == "conv2d_fused" and conv_in_place(g, k.nodes[0], blocked)

    return allowed
