"""Every (op, dtype) a GPU capability table claims is one the renderer really renders.

The conformance suite runs the claims in dtypes a table marks ``native``; bool, i8, i16 and u8
are ``storage`` dtypes (kept in 32-bit words), so their claims were never exercised and the
WebGPU table claimed bool neg/sign/div/rem/pow, ordering compares and scatter_add that the
renderer rejected (RLX-K001) or WGSL refused (RLX-K002). Here, for every GPU dialect (WGSL,
OpenCL C, GLSL 4.30/4.50, HLSL, CUDA, HIP, MSL), one graph per claimed dtype holds one output
per claimed op and must render; on the targets that execute here the bool graph also runs and
must equal the numpy reference (the driver's compiler is the real check of the source).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import rlx_core as rlx
from rlx_core.ir import dtypes as dt
from rlx_core.ir.graph import Graph, TensorType
from rlx_core.ir.ops.mir import BINARY, COMPARE, REDUCE, UNARY
from rlx_core.targets.gpu_common.kernels import render_graph
from rlx_core.targets.registry import get_target
from tests.conformance.harness import accepts, check_mir, values
from tests.dispatch.graphs import GraphMaker

GPU = ("webgpu", "opencl", "opengl", "vulkan", "directx", "cuda", "rocm", "metal")
EXECUTING = ("webgpu", "opencl", "opengl", "vulkan", "directx")
SHAPE = (3, 5, 4)


def _table(name: str) -> Any:
    if name == "webgpu":
        from rlx_core.targets.webgpu.caps import CAPS

        return CAPS
    return get_target(name).table()


def _dialect(name: str) -> Any:
    if name == "webgpu":
        from rlx_core.targets.webgpu.wgsl import WGSL

        return WGSL
    return get_target(name).dialect


def _claimed(caps: Any, op: str, *dtypes: str) -> bool:
    claim = caps.claim_for(op)
    return claim is not None and all(d in claim.dtypes for d in dtypes)


def claimed_graph(caps: Any, d: str) -> tuple[Graph, list[np.ndarray], list[str]]:
    """One output per op the table claims in dtype ``d`` (and the op's types accept)."""
    rng = np.random.default_rng(24)
    m = GraphMaker()
    t = TensorType(dt.get(d), SHAPE)
    a, b = m.input("a", d, SHAPE), m.input("b", d, SHAPE)
    p, i = m.input("p", "bool", SHAPE), m.input("i", "i32", (2, 3))
    u = m.input("u", d, (3, 2, 3, 4))
    xs = [values(d, SHAPE, rng), values(d, SHAPE, rng, "nonzero"), values("bool", SHAPE, rng),
          np.array([[0, 3, -1], [2, 2, -4]], np.int32), values(d, (3, 2, 3, 4), rng)]
    if dt.get(d).is_float:
        xs[0] = values(d, SHAPE, rng, "positive")  # log/sqrt/pow of a negative is NaN noise
    outs, labels = [], []

    def add(op: str, ins: list[Any], types: list[TensorType], **attrs: Any) -> None:
        if _claimed(caps, op, d) and accepts(op, types, attrs):
            outs.append(m.op(op, ins, **attrs))
            labels.append(f"{op} {attrs}" if attrs else op)

    for op in (*UNARY, "logical_not"):
        add(op, [a], [t])
    for op in (*BINARY, *COMPARE):
        add(op, [a, b], [t, t])
    if _claimed(caps, "select", "bool"):
        add("select", [p, a, b], [TensorType(dt.bool_, SHAPE), t, t])
    for op in REDUCE:
        add(op, [a], [t], axes=(1,))
    add("argmax", [a], [t], axis=1, index_dtype=dt.i32)
    if _claimed(caps, "gather", "i32"):
        it = TensorType(dt.i32, (2, 3))
        add("gather", [a, i], [t, it], axis=1)
        add("scatter_add", [a, i, u], [t, it, TensorType(dt.get(d), (3, 2, 3, 4))], axis=1)
    add("transpose", [a], [t], perm=(2, 0, 1))
    add("concat", [a, b], [t, t], axis=1)
    add("pad", [a], [t], low=(1, 0, 2), high=(0, 2, 1), value=0)
    add("slice", [a], [t], start=(1, 0, 1), limit=(3, 5, 4), stride=(1, 2, 2))
    return m.graph(*outs), xs, labels


def _dtypes(caps: Any) -> list[str]:
    return [d for d in ("f32", "f16", "i32", "u32", "bool", "i8", "i16", "u8")
            if _claimed(caps, "add", d)]


@pytest.mark.parametrize("target", GPU)
def test_every_claim_renders(target: str) -> None:
    caps, dialect = _table(target), _dialect(target)
    done = 0
    for d in _dtypes(caps):
        g, _, labels = claimed_graph(caps, d)
        try:
            _, _, lir, _ = rlx.lower(g, target=target, record=False)
            render_graph(dialect, lir)
        except rlx.RlxError as err:
            pytest.fail(f"{target} claims {', '.join(labels)} in {d}, but: {err}")
        done += len(labels)
    assert done > 100


def test_bool_claims_of_the_webgpu_table() -> None:
    """The entries the table used to claim without a lowering are claimed, and render."""
    caps = _table("webgpu")
    for op in ("neg", "sign", "div", "rem", "pow", "lt", "le", "gt", "ge", "scatter_add"):
        assert _claimed(caps, op, "bool"), op
    _, _, labels = claimed_graph(caps, "bool")
    assert {"neg", "pow", "lt", "ge", "scatter_add {'axis': 1}"} <= set(labels)


@pytest.mark.parametrize("target", EXECUTING)
def test_bool_claims_execute_like_numpy(target: str) -> None:
    ok, why = get_target(target).available()
    if not ok:
        pytest.skip(f"{target} unavailable: {why}")
    g, xs, labels = claimed_graph(_table(target), "bool")
    check_mir(target, g, xs, labels)
