"""Each route taken on some target, with its decision record checked (and numerics where the
route changes the computation)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from rlx_core.compile_trace import CompileTrace
from rlx_core.dispatch.capabilities import Constraint, OpClaim
from rlx_core.dispatch.legalize import legalize_graph
from rlx_core.ir.ops import HIR_OPS, MIR_OPS
from rlx_core.ir.printer import fmt_node
from rlx_core.ir.verifier import verify
from rlx_core.passes.base import CompileOptions, PassContext
from rlx_core.passes.legalize import Legalize
from rlx_core.targets.c_common.row_ops import ROW_OPS
from tests.dispatch.graphs import GraphMaker, make_caps, random_inputs, single
from tests.dispatch.oracle import run_graph


def _check_same(g, mir, seed=0, tol=2e-5):
    rng = np.random.default_rng(seed)
    xs = random_inputs(g, rng)
    for got, want in zip(run_graph(mir, xs), run_graph(g, xs), strict=True):
        assert got.dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


def test_native_route_on_cpu_records_the_node_itself() -> None:
    g = single("dot_general", [("f32", (2, 3)), ("f32", (3, 4))], contract=((1,), (0,)))
    r = legalize_graph(g, "cpu")
    (d,) = r.decisions
    assert (d.route, d.rule, d.target, d.op) == ("native", "", "cpu", "dot_general")
    assert d.produced == (fmt_node(r.graph.nodes[0]),)
    assert "dot_general(%a0, %a1)" in d.produced[0]
    assert d.rejected == () and d.where == "model.py:7"
    assert d.cost.flops == 2 * 2 * 4 * 3 and d.cost.nodes == 1


def test_common_ir_route_lists_the_decomposition_and_why_native_was_refused() -> None:
    g = single("softmax", [("f32", (4, 5))])
    r = legalize_graph(g, "webgpu")  # the CPU keeps softmax whole (test_cpu_row_ops.py)
    d = r.decision(g.nodes[0].out.name)
    assert (d.route, d.rule) == ("common-IR", "softmax")
    assert [rej.route for rej in d.rejected] == ["native"]
    assert d.rejected[0].reasons[0].code == "RLX-L001"
    assert any("reduce_max" in line for line in d.produced)
    assert len(d.produced) == len(r.graph.nodes)
    # the nested primitives have their own (native) decisions under the HIR node
    nested = [x for x in r.decisions if x.depth == 1]
    assert nested and all(x.parent == d.node and x.route == "native" for x in nested)
    _check_same(g, r.graph)


# a device without an erf instruction (WGSL has none either; its renderer hides a polynomial)
NO_ERF = make_caps("noerf", mir=tuple(op for op in MIR_OPS if op != "erf"))


def test_rewritten_route_erf_polynomial_without_native_erf() -> None:
    g = single("erf", [("f32", (64,))])
    r = legalize_graph(g, NO_ERF)
    d = r.decisions[0]
    assert (d.route, d.rule) == ("rewritten", "erf_polynomial")
    routes = [(rej.route, rej.reasons[0].code) for rej in d.rejected]
    assert routes == [("native", "RLX-L001"), ("common-IR", "RLX-L001")]
    assert "erf" not in r.graph.op_counts()
    xs = [np.linspace(-4, 4, 64, dtype=np.float32)]
    (got,) = run_graph(r.graph, xs)
    want = np.array([math.erf(v) for v in xs[0]], dtype=np.float32)
    np.testing.assert_allclose(got, want, atol=3e-7)


def test_gelu_is_common_ir_with_a_nested_erf_rewrite() -> None:
    g = single("gelu", [("f32", (3, 8))])
    r = legalize_graph(g, NO_ERF)
    top = r.decisions[0]
    assert (top.route, top.rule) == ("common-IR", "gelu")
    (erf,) = [d for d in r.decisions if d.op == "erf"]
    assert (erf.route, erf.rule, erf.parent) == ("rewritten", "erf_polynomial", top.node)
    _check_same(g, r.graph, tol=1e-6)


def test_gelu_erf_to_tanh_needs_allow_approximate() -> None:
    claim = OpClaim(("gelu",), ("f32",), (Constraint("attr_in", "approximate", ("tanh",)),))
    caps = make_caps(extra=(claim,))
    g = single("gelu", [("f32", (3, 8))])
    pol = {"gelu": "force-native"}
    r = legalize_graph(g, caps, CompileOptions(policy=pol, allow_approximate=True))
    d = r.decisions[0]
    assert (d.route, d.rule) == ("rewritten", "gelu_erf_to_tanh")
    assert d.rejected[0].reasons[0].code == "RLX-L006"  # native claims only the tanh form
    assert r.graph.nodes[-1].op == "gelu" and r.graph.nodes[-1].attr("approximate") == "tanh"
    verify(r.graph, native_composites=caps.native_composites())
    _check_same(g, r.graph, tol=2e-3)  # the tanh form is within ~1e-3 of exact gelu


def test_conv2d_im2col_matmul_rewrite_under_force_native() -> None:
    g = single("conv2d", [("f32", (2, 4, 6, 5)), ("f32", (6, 2, 3, 3)), ("f32", (6,))],
               stride=(1, 2), padding=(1, 1), groups=2)
    # opencl: native matmuls, no conv kernel (cpu keeps conv2d whole, cpu/conv.py)
    r = legalize_graph(g, "opencl", CompileOptions(policy={"conv2d": "force-native"}))
    d = r.decisions[0]
    assert (d.route, d.rule, d.policy) == ("rewritten", "conv2d_im2col_matmul", "force-native")
    assert [x.route for x in d.rejected] == ["native"]
    dots = [n for n in r.graph.nodes if n.op == "dot_general"]
    assert len(dots) == 1 and dots[0].attr("contract") == ((2,), (1,))
    _check_same(g, r.graph)


def test_attention_rewrite_keeps_softmax_as_a_block() -> None:
    caps = make_caps(composites=("softmax",))
    g = single("attention", [("f32", (1, 2, 4, 8)), ("f32", (1, 2, 6, 8)), ("f32", (1, 2, 6, 8))])
    r = legalize_graph(g, caps, CompileOptions(policy={"attention": "force-native"}))
    d = r.decisions[0]
    assert (d.route, d.rule) == ("rewritten", "attention_matmul_softmax")
    assert r.graph.op_counts()["softmax"] == 1  # native on this target
    (sm,) = [x for x in r.decisions if x.op == "softmax"]
    assert sm.route == "native" and sm.parent == d.node
    _check_same(g, r.graph)


def test_i64_indices_narrowed_to_i32_when_provably_in_range() -> None:
    m = GraphMaker()
    table = m.input("table", "f32", (10, 4))
    ids = m.op("iota", [], line=3, shape=(2, 5), dim=1, dtype="i64")
    two = m.op("constant", [], line=4, value=2, shape=(2, 5), dtype="i64")
    ids2 = m.op("add", [ids, two], line=5)  # [2, 6]: still provably small
    out = m.op("embedding", [ids2, table], line=6)
    g = m.graph(out)
    r = legalize_graph(g, "webgpu")
    by = {d.node: d for d in r.top_level()}
    for v in (ids, two, ids2):
        assert (by[v.name].route, by[v.name].rule) == ("rewritten", "i64_to_i32")
        assert by[v.name].rejected[0].reasons[0].code == "RLX-L004"
    assert by[out.name].route == "common-IR"
    assert all(v.type.dtype.name != "i64" for v in r.graph.values().values())
    _check_same(g, r.graph)


def test_c64_matmul_to_real_matmuls() -> None:
    caps = make_caps(dtypes=("f32", "c64"), extra=(OpClaim(("dot_general",), ("f32",)),),
                     mir=tuple(op for op in MIR_OPS if op != "dot_general"))
    m = GraphMaker()
    a, b = m.input("a", "c64", (3, 4)), m.input("b", "c64", (4, 2))
    y = m.op("dot_general", [a, b], contract=((1,), (0,)))
    g = m.graph(y)
    r = legalize_graph(g, caps)
    d = r.decisions[0]
    assert (d.route, d.rule) == ("rewritten", "c64_matmul_to_real")
    assert d.rejected[0].reasons[0].code == "RLX-L002"
    assert sum(n.op == "dot_general" for n in r.graph.nodes) == 4
    rng = np.random.default_rng(1)
    xa = (rng.standard_normal((3, 4)) + 1j * rng.standard_normal((3, 4))).astype(np.complex64)
    xb = (rng.standard_normal((4, 2)) + 1j * rng.standard_normal((4, 2))).astype(np.complex64)
    (got,) = run_graph(r.graph, [xa, xb])
    np.testing.assert_allclose(got, xa @ xb, rtol=1e-5, atol=1e-5)


def test_int4_matmul_unpack_widen_matmul() -> None:
    caps = make_caps(dtypes=("i32",), extra=(OpClaim(("cast",), ("i4", "i8", "i32")),),
                     mir=tuple(op for op in MIR_OPS if op != "cast"))
    m = GraphMaker()
    a, b = m.input("a", "i4", (3, 5)), m.input("b", "i4", (5, 2))
    g = m.graph(m.op("dot_general", [a, b], contract=((1,), (0,))))
    r = legalize_graph(g, caps)
    d = r.decisions[0]
    assert (d.route, d.rule) == ("rewritten", "int4_matmul_unpack")
    dots = [n for n in r.graph.nodes if n.op == "dot_general"]
    assert dots[0].out.type.dtype.name == "i32"
    rng = np.random.default_rng(2)
    xa = rng.integers(-8, 8, (3, 5)).astype(np.int8)
    xb = rng.integers(-8, 8, (5, 2)).astype(np.int8)
    (got,) = run_graph(r.graph, [xa, xb])
    (want,) = run_graph(g, [xa, xb])  # the reference's i4 matmul (wraps in i4)
    np.testing.assert_array_equal(got, want)
    exact = xa.astype(np.int64) @ xb.astype(np.int64)
    np.testing.assert_array_equal(got, ((exact + 8) % 16) - 8)


def test_native_composite_stays_and_verifies() -> None:
    caps = make_caps(composites=tuple(HIR_OPS))
    g = single("layer_norm", [("f32", (2, 6)), ("f32", (6,)), ("f32", (6,))])
    r = legalize_graph(g, caps)
    assert r.decisions[0].route == "native"
    assert r.graph.nodes == g.nodes
    verify(r.graph, native_composites=caps.native_composites())


def test_legalize_pass_records_decisions_in_the_trace() -> None:
    g = single("silu", [("f32", (2, 3))])
    trace = CompileTrace()
    from rlx_core.targets.registry import get_target

    ctx = PassContext(CompileOptions(target="numpy"), target=get_target("numpy"), trace=trace)
    mir = Legalize().run(g, ctx)
    assert mir.level.value == "mir"
    assert [d["op"] for d in trace.decisions] == ["silu", "logistic", "mul"]
    assert trace.decisions[0]["route"] == "common-IR"
    json.dumps(trace.to_json())  # decisions are plain JSON
    assert ctx.legalized.decisions[0].rule == "silu"  # also kept on the context, untraced


def test_untraced_legalize_records_nothing() -> None:
    g = single("silu", [("f32", (2, 3))])
    ctx = PassContext(CompileOptions(target="cpu"), target=None, trace=None)
    Legalize().run(g, ctx)
    assert ctx.legalized.target == "cpu"


@pytest.mark.parametrize("target", ["numpy", "cpu", "webgpu"])
def test_every_hir_op_legalizes_on_every_target_in_f32(target) -> None:
    from tests.dispatch.test_decompositions import CASES

    for op, specs, attrs in CASES:
        specs = [("i32", s) if d == "i64" else (d, s) for d, s in specs]
        g = single(op, specs, **attrs)
        r = legalize_graph(g, target, raise_errors=False)
        if op in ("requantize", "int_linear") and target == "webgpu":
            # the GPU int8 kernels (gpu_common/int8.py): requantize's fixed-point multiply in
            # 32-bit limbs (its decomposition needs i64 products, which WGSL lacks)
            assert r.ok and r.decisions[0].route == "native", (op, r.failures)
            continue
        # the CPU keeps its row ops (c_common/row_ops.py), attention (cpu/attention.py) and
        # the int8 and int4 matmuls (cpu/igemm.py, i4gemm.py; dynamic_int_linear's per-token
        # quantize + int8 GEMM + dequantize in one kernel) and the convolutions
        # (cpu/conv.py) and pooling (cpu/pool.py, f32: an int8 max pool decomposes) whole;
        # the rest decomposes, conv2d_pair too: the cpu claims only the pairs conv_epilogue
        # makes from the filters it prepacks (packed=True), not a graph's own
        native = (*ROW_OPS, "attention", "int_linear", "int4_linear", "dynamic_int_linear",
                  "static_int_linear", "requantized_int_linear",
                  "conv2d", "conv2d_fused",
                  "max_pool2d", "avg_pool2d")
        int_pool = op.endswith("pool2d") and specs[0][0] != "f32"
        want = "native" if target == "cpu" and op in native and not int_pool else "common-IR"
        assert r.ok and r.decisions[0].route == want, (op, target)
