"""Policies: force-common moves every claimed kind to common-IR (results still match numpy);
per-kind, per-compile, global and environment settings; the what-if diff."""

from __future__ import annotations

import numpy as np
import pytest

from rlx_core.dispatch import policy as pol
from rlx_core.dispatch.decompositions import DECOMPOSITIONS
from rlx_core.dispatch.explain import what_if
from rlx_core.dispatch.legalize import legalize_graph
from rlx_core.dispatch.policy import PolicyError, parse_policy, resolve_policy, set_policy
from rlx_core.ir.ops import HIR_OPS
from rlx_core.passes.base import CompileOptions
from tests.dispatch.graphs import GraphMaker, make_caps, random_inputs
from tests.dispatch.oracle import run_graph

ALL_COMPOSITES = make_caps("composites", composites=tuple(HIR_OPS))


def _model():
    """A small transformer-ish block touching most composites."""
    m = GraphMaker("block.py")
    x = m.input("x", "f32", (2, 4, 8))
    w1, b1 = m.input("w1", "f32", (8, 8)), m.input("b1", "f32", (8,))
    g, bt = m.input("g", "f32", (8,)), m.input("bt", "f32", (8,))
    ids, table = m.input("ids", "i32", (2, 4)), m.input("table", "f32", (6, 8))
    e = m.op("embedding", [ids, table], line=1)
    h = m.op("add", [x, e], line=2)
    h = m.op("layer_norm", [h, g, bt], line=3)
    h = m.op("linear", [h, w1, b1], line=4)
    h = m.op("gelu", [h], line=5)
    r = m.op("rms_norm", [h, g], line=6)
    q = m.op("reshape", [r], line=7, shape=(2, 1, 4, 8))
    a = m.op("attention", [q, q, q], line=8, mask="causal")
    s = m.op("softmax", [a], line=9)
    ls = m.op("log_softmax", [s], line=10, axis=2)
    si = m.op("silu", [ls], line=11)
    return m.graph(si)


@pytest.fixture(autouse=True)
def _clean_policy(monkeypatch):
    monkeypatch.delenv(pol.ENV_VAR, raising=False)
    previous = set_policy(None)
    yield
    set_policy(previous)


def test_prefer_native_keeps_claimed_composites_native() -> None:
    g = _model()
    r = legalize_graph(g, ALL_COMPOSITES)
    routes = {d.op: d.route for d in r.top_level()}
    assert all(routes[op] == "native" for op in routes)


def test_force_common_moves_every_claimed_kind_and_still_matches_numpy() -> None:
    g = _model()
    r = legalize_graph(g, ALL_COMPOSITES, CompileOptions(policy="force-common"))
    for d in r.top_level():
        if d.op in DECOMPOSITIONS:
            assert d.route == "common-IR", d.op
            assert d.rejected[0].reasons[0].code == "RLX-L007"
        else:  # primitives without a decomposition are the common IR itself
            assert d.route == "native"
    assert not set(r.graph.op_counts()) & set(HIR_OPS)
    rng = np.random.default_rng(3)
    xs = random_inputs(g, rng)
    (want,) = run_graph(g, xs)
    (got,) = run_graph(r.graph, xs)
    np.testing.assert_allclose(got, want, rtol=5e-5, atol=5e-5)


def test_force_common_on_cpu_moves_primitives_with_a_decomposition() -> None:
    m = GraphMaker()
    x = m.input("x", "f32", (3, 4))
    y = m.op("logistic", [m.op("rsqrt", [m.op("exp", [x])])])
    g = m.graph(y)
    before = legalize_graph(g, "cpu")
    after = legalize_graph(g, "cpu", CompileOptions(policy="force-common"))
    assert [d.route for d in before.top_level()] == ["native"] * 3
    assert [d.route for d in after.top_level()] == ["native", "common-IR", "common-IR"]
    xs = random_inputs(g, np.random.default_rng(0))
    np.testing.assert_allclose(run_graph(after.graph, [np.abs(xs[0])])[0],
                               run_graph(g, [np.abs(xs[0])])[0], rtol=1e-6)


def test_per_kind_policy_moves_only_that_kind() -> None:
    g = _model()
    r = legalize_graph(g, ALL_COMPOSITES, CompileOptions(policy={"softmax": "force-common"}))
    routes = {d.op: d.route for d in r.top_level()}
    assert routes["softmax"] == "common-IR"
    assert routes["layer_norm"] == routes["attention"] == "native"


def test_what_if_reports_the_kinds_that_moved() -> None:
    g = _model()
    diff = what_if(g, target="cpu", before=None, after={"conv2d": "force-native",
                                                        "gelu": "force-native"})
    moved = {m.kind: (m.before, m.after) for m in diff.moved}
    assert list(moved) == ["gelu"]
    assert moved["gelu"][0]["common-IR"] == 1 and moved["gelu"][1]["unsupported"] == 1
    assert diff.ready_before and not diff.ready_after
    assert "gelu: 1 common-IR -> 1 unsupported" in diff.to_text()


def test_sources_and_precedence(monkeypatch) -> None:
    monkeypatch.setenv(pol.ENV_VAR, "force-common;gelu=force-native")
    r = resolve_policy(None)
    assert r.name_for("softmax") == "force-common" and r.name_for("gelu") == "force-native"
    set_policy({"softmax": "prefer-native"})  # global beats the environment
    r = resolve_policy(None)
    assert r.name_for("softmax") == "prefer-native" and r.name_for("linear") == "force-common"
    r = resolve_policy({"default": "force-native", "linear": "prefer-native"})  # compile wins
    assert r.name_for("softmax") == "force-native" and r.name_for("linear") == "prefer-native"
    assert r.name_for("gelu") == "force-native"


def test_environment_policy_applies_to_a_compile(monkeypatch) -> None:
    monkeypatch.setenv(pol.ENV_VAR, "force-common")
    r = legalize_graph(_model(), ALL_COMPOSITES)
    assert {d.route for d in r.top_level() if d.op in HIR_OPS} == {"common-IR"}


def test_text_form_and_bad_policies() -> None:
    p = parse_policy("force-common; softmax=prefer-native, gelu=force-native")
    assert p.default == "force-common"
    assert p.per_kind == (("gelu", "force-native"), ("softmax", "prefer-native"))
    for bad in ("fastest", {"softmax": "native"}, 3):
        with pytest.raises(PolicyError) as info:
            parse_policy(bad)
        assert info.value.code == "RLX-L009"


def test_bad_environment_policy_is_a_typed_error(monkeypatch) -> None:
    monkeypatch.setenv(pol.ENV_VAR, "force-everything")
    with pytest.raises(PolicyError, match="RLX_POLICY"):
        resolve_policy(None)
