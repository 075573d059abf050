"""The kernels view links generated GPU lines to LIR nodes by the renderers' node comments.

Every GPU dialect ends each statement in ``// %name ...`` (gpu_common); the view links a line
to exactly the nodes its comment names and leaves scaffolding lines unlinked. The graph's
arguments are named like the renderer's locals (``t0``, ``b1``, ``e2``), which the old
name matching linked to every line that happened to use such a local.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

import rlx_core as rlx
from rlx_core.targets.gpu_common.expr import safe
from rlx_core.targets.gpu_common.kernels import render_graph
from rlx_core.targets.registry import get_target
from rlx_explorer.views.graphs import graph_view
from rlx_explorer.views.kernels import kernels_view

GPU = ("webgpu", "opencl", "opengl", "vulkan", "directx", "cuda", "rocm", "metal")


def model(t0, b1, e2):  # noqa: ANN001, ANN201 - traced
    h = rlx.nn.gelu(t0 @ b1 + e2)
    return rlx.nn.softmax(h, axis=-1).sum(axis=-1)


ARGS = (np.ones((4, 8), np.float32), np.ones((8, 16), np.float32),
        np.ones((16,), np.float32))


def _dialect(name: str):  # noqa: ANN202
    if name == "webgpu":
        from rlx_core.targets.webgpu.wgsl import WGSL

        return WGSL
    return get_target(name).dialect


def _check_view(target: str, lir: rlx.ir.graph.Graph, sources: dict[str, str]) -> int:
    """Every line's links are exactly the nodes its comment names; returns the linked lines."""
    lv = graph_view(lir)
    name_of = {n["id"]: n["name"] for n in lv["nodes"]}
    view = kernels_view(target, lir, lv, sources)
    linked = 0
    for k, lk in zip(view["kernels"], lir.kernels, strict=False):
        text = sources[lk.name].splitlines()
        assert len(k["lines"]) == len(text)
        seen: set[str] = set()
        for line, src in zip(k["lines"], text, strict=True):
            at = src.find("//")
            named = re.findall(r"%([A-Za-z0-9_.]+)", src[at:]) if at >= 0 else []
            assert [safe(name_of[i]) for i in line["nodes"]] == list(dict.fromkeys(named)), \
                (target, src)
            linked += bool(line["nodes"])
            seen |= set(line["nodes"])
        # every node the kernel computes has a line of its own (splat constants become
        # literals and broadcasts index maps: those have none)
        ops = {n["id"] for n in lv["nodes"] if n["name"] in {x.name for x in lk.nodes}
               and n.get("op") not in ("constant", "broadcast_in_dim")}
        assert ops <= seen, (target, lk.name, ops - seen)
    return linked


@pytest.mark.parametrize("target", GPU)
def test_every_gpu_dialect_links_lines_by_node_comment(target: str) -> None:
    _, _, lir, _ = rlx.lower(model, *ARGS, target=target, record=False)
    sources = {k.name: k.source for k in render_graph(_dialect(target), lir)}
    assert _check_view(target, lir, sources) > 0


def test_a_compiled_gpu_program_links_exactly() -> None:
    """The same through rlx.compile on an executing GPU target (the view the explorer shows)."""
    for target in ("opencl", "webgpu", "vulkan", "opengl"):
        ok, _ = get_target(target).available()
        if ok:
            break
    else:
        pytest.skip("no executing GPU target on this machine")
    exe = rlx.compile(model, *ARGS, target=target)
    assert _check_view(target, exe.lir, exe.sources) > 0


def test_sources_without_node_comments_fall_back_to_names() -> None:
    """The cpu target's C carries no node comments: lines still link by value name."""
    exe = rlx.compile(model, *ARGS, target="cpu")
    lv = graph_view(exe.lir)
    view = kernels_view("cpu", exe.lir, lv, exe.sources)
    assert any(ln["nodes"] for k in view["kernels"] for ln in k["lines"])
