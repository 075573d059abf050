"""LegalizationError lists every illegal node with code, source line, routes tried and a hint."""

from __future__ import annotations

import pytest

from rlx_core.dispatch.capabilities import Constraint, OpClaim
from rlx_core.dispatch.errors import LegalizationError
from rlx_core.dispatch.legalize import legalize_graph
from rlx_core.dispatch.registry import caps_for
from rlx_core.passes.base import CompileOptions
from tests.dispatch.graphs import GraphMaker, make_caps


def _three_illegal() -> tuple:
    m = GraphMaker("student_model.py")
    xd = m.input("xd", "f64", (4,))
    ids = m.input("ids", "i64", (3,))
    table = m.input("table", "f32", (10, 8))
    h = m.input("h", "f16", (4,))
    x = m.input("x", "f32", (4,))
    ok = m.op("exp", [x], line=10)
    bad_f64 = m.op("tanh", [xd], line=11)  # webgpu emulates f64 arithmetic/exp/log, not tanh
    bad_i64 = m.op("gather", [table, ids], line=12, axis=0)
    bad_f16 = m.op("tanh", [h], line=13)
    return m.graph(ok, bad_f64, bad_i64, bad_f16), (bad_f64, bad_i64, bad_f16)


def test_three_illegal_nodes_are_all_listed_with_codes_lines_and_hints() -> None:
    g, (f64, i64, f16) = _three_illegal()
    with pytest.raises(LegalizationError) as info:
        legalize_graph(g, "webgpu")
    err = info.value
    assert err.code == "RLX-L000" and err.target == "webgpu"
    assert [f.decision.node for f in err.failures] == [f64.name, i64.name, f16.name]
    assert err.codes == ["RLX-L002", "RLX-L004", "RLX-L003"]
    lines = [f.decision.where for f in err.failures]
    assert lines == ["student_model.py:11", "student_model.py:12", "student_model.py:13"]
    hints = [f.decision.hint for f in err.failures]
    assert "cast to one of f32" in hints[0]
    assert "int32" in hints[1]
    assert "shader-f16" in hints[2]
    text = str(err)
    for want in ("student_model.py:11", "student_model.py:12", "student_model.py:13",
                 "RLX-L002", "RLX-L004", "RLX-L003", "function input", "native:", "fix:"):
        assert want in text
    # each failure says what every route tried said
    d = err.failures[1].decision
    assert [r.route for r in d.rejected] == ["native", "common-IR", "rewritten"]
    assert d.rejected[2].rule == "i64_to_i32"
    assert err.to_json()["failures"][0]["code"] == "RLX-L002"


def test_enabling_shader_f16_fixes_exactly_the_f16_node() -> None:
    g, (f64, i64, f16) = _three_illegal()
    caps = caps_for("webgpu").with_features("shader-f16")
    r = legalize_graph(g, caps, raise_errors=False)
    assert [f.decision.node for f in r.failures] == [f64.name, i64.name]
    assert r.decision(f16.name).route == "native"


def test_same_graph_is_fine_on_numpy_and_cpu_lacks_c64_sign() -> None:
    # the webgpu-illegal graph plus one c64 node: cpu has f64, i64 and f16 (rlx_core/targets/cpu/
    # caps.py) and c64 arithmetic, but not c64 sign (C64_OPS), so exactly the c64 node fails
    # there, with the dtype code
    m = GraphMaker("student_model.py")
    xd = m.input("xd", "f64", (4,))
    ids = m.input("ids", "i64", (3,))
    table = m.input("table", "f32", (10, 8))
    h = m.input("h", "f16", (4,))
    z = m.input("z", "c64", (4,))
    f64 = m.op("log", [xd], line=11)
    i64 = m.op("gather", [table, ids], line=12, axis=0)
    f16 = m.op("tanh", [h], line=13)
    c64 = m.op("sign", [z], line=14)
    g = m.graph(f64, i64, f16, c64)
    assert legalize_graph(g, "numpy").ok
    r = legalize_graph(g, "cpu", raise_errors=False)
    assert [(f.decision.node, f.decision.code) for f in r.failures] == [(c64.name, "RLX-L002")]
    assert r.failures[0].decision.where == "student_model.py:14"
    assert "real and imaginary" in r.failures[0].decision.hint
    assert all(r.decision(v.name).route != "unsupported" for v in (f64, i64, f16))


def test_failure_inside_a_decomposition_names_the_hir_origin() -> None:
    m = GraphMaker()
    ids, table = m.input("ids", "i64", (5,)), m.input("table", "f32", (9, 4))
    e = m.op("embedding", [ids, table], line=21)
    r = legalize_graph(m.graph(e), "webgpu", raise_errors=False)
    (f,) = r.failures
    d = f.decision
    assert (d.op, d.code, d.where) == ("embedding", "RLX-L004", "model.py:21")
    common = next(x for x in d.rejected if x.route == "common-IR")
    assert "gather" in common.reasons[0].message
    assert any(x.op == "gather" and x.route == "unsupported" and x.origin == e.name
               for x in r.decisions)


def test_limit_codes_binding_count_and_buffer_size() -> None:
    m = GraphMaker()
    parts = [m.input(f"p{i}", "f32", (2,)) for i in range(8)]
    cat = m.op("concat", parts, line=3, axis=0)  # 8 operands + 1 result > 8 bindings
    big = m.input("big", "f32", (32 * 1024 * 1024 + 1,))
    neg = m.op("neg", [big], line=4)
    r = legalize_graph(m.graph(cat, neg), "webgpu", raise_errors=False)
    assert [(f.decision.node, f.decision.code) for f in r.failures] == [
        (cat.name, "RLX-L005"), (neg.name, "RLX-L005")]
    # a live adapter with higher limits makes both legal
    caps = caps_for("webgpu").with_limits(max_storage_buffers=16, max_buffer_bytes=1 << 30,
                                          source="adapter")
    assert legalize_graph(m.graph(cat, neg), caps).ok


def test_constraint_violation_code() -> None:
    caps = make_caps(extra=(OpClaim(("transpose",), ("f32",), (Constraint("max_rank", limit=3),)),))
    m = GraphMaker()
    x = m.input("x", "f32", (1, 2, 3, 4))
    t = m.op("transpose", [m.input("y", "f32", (2, 3)) if False else x], perm=(3, 2, 1, 0))
    r = legalize_graph(m.graph(t), caps, raise_errors=False)
    (f,) = r.failures
    assert f.decision.code == "RLX-L006" and "rank 4" in f.decision.rejected[0].reasons[0].message


def test_force_native_without_a_native_claim_fails_with_the_policy_code() -> None:
    m = GraphMaker()
    s = m.op("silu", [m.input("x", "f32", (2, 5))], line=8)  # the CPU has no native silu
    with pytest.raises(LegalizationError) as info:
        legalize_graph(m.graph(s), "cpu", CompileOptions(policy={"silu": "force-native"}))
    (f,) = info.value.failures
    assert f.decision.code == "RLX-L007"
    assert "prefer-native" in f.decision.hint


def test_approximation_not_allowed_code() -> None:
    caps = make_caps(extra=(OpClaim(("gelu",), ("f32",),
                                    (Constraint("attr_in", "approximate", ("tanh",)),)),))
    m = GraphMaker()
    y = m.op("gelu", [m.input("x", "f32", (4,))], line=5)
    r = legalize_graph(m.graph(y), caps, CompileOptions(policy={"gelu": "force-native"}),
                       raise_errors=False)
    (f,) = r.failures
    assert f.decision.code == "RLX-L008" and "allow_approximate=True" in f.decision.hint


def test_unsupported_op_kind_code() -> None:
    from rlx_core.ir.ops import MIR_OPS

    caps = make_caps("mydev", mir=tuple(op for op in MIR_OPS if op != "scatter_add"))
    m = GraphMaker()
    x = m.input("x", "f32", (4,))
    idx = m.input("i", "i32", (2,))
    upd = m.input("u", "f32", (2,))
    s = m.op("scatter_add", [x, idx, upd], axis=0)
    r = legalize_graph(m.graph(s), caps, raise_errors=False)
    (f,) = r.failures
    assert f.decision.code == "RLX-L001" and "cpu" in f.decision.hint
    assert [x.route for x in f.decision.rejected] == ["native", "common-IR", "rewritten"]
