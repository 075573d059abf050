"""The static probe: per-target route counts, compile-ready, text and JSON, without kernels."""

from __future__ import annotations

import json

import numpy as np

from rlx_core.dispatch.explain import explain
from tests.dispatch.graphs import GraphMaker


def _graph():
    m = GraphMaker("probe.py")
    x = m.input("x", "f32", (2, 8))
    w = m.input("w", "f32", (4, 8))
    xd = m.input("xd", "f64", (3,))
    h = m.op("linear", [x, w], line=2)
    g = m.op("gelu", [h], line=3)
    e = m.op("erf", [g], line=4)
    d = m.op("tanh", [xd], line=5)  # f64: webgpu emulates arithmetic, exp, log; not tanh
    table = m.input("table", "f32", (6, 8))
    ids = m.op("iota", [], line=6, shape=(3,), dim=0, dtype="i64")  # provably small: narrowed
    rows = m.op("embedding", [ids, table], line=7)
    return m.graph(e, d, rows)


def test_counts_per_kind_and_compile_ready_per_target() -> None:
    r = explain(_graph(), targets="all")
    from rlx_core.dispatch.registry import caps_names

    # every table the static probe knows, the three original ones first
    assert r.targets[:3] == ["numpy", "cpu", "webgpu"] and r.targets == list(caps_names())
    assert r.compile_ready("numpy") and r.compile_ready("cpu")
    assert not r.compile_ready("webgpu")
    c = r.counts("webgpu")
    assert c["linear"] == {"native": 0, "common-IR": 1, "rewritten": 0, "unsupported": 0}
    assert c["iota"]["rewritten"] == 1 and c["tanh"]["unsupported"] == 1
    assert r.counts("cpu")["erf"]["native"] == 1
    # every listed target runs kernels here (cpu through generated C since the C target landed)
    assert {t: r.verification[t] for t in ("numpy", "cpu", "webgpu")} == \
        {"numpy": "executes", "cpu": "executes", "webgpu": "executes"}
    assert r.verification["hexagon"] == "executes (emulated)"
    assert r.verification["directx"] == "executes (via SPIR-V)"


def test_text_is_a_compact_table_with_failures_and_fixes() -> None:
    text = explain(_graph(), targets=["cpu", "webgpu"]).to_text()
    assert "target cpu (executes)  policy prefer-native  compile-ready: yes" in text
    assert "compile-ready: no" in text
    assert "native    common-IR    rewritten  unsupported" in text
    assert "probe.py:5" in text and "RLX-L002" in text and "cast to one of f32" in text


def test_json_is_serialisable_and_complete() -> None:
    data = explain(_graph(), targets="webgpu").to_json()
    json.dumps(data)
    t = data["targets"]["webgpu"]
    assert t["compile_ready"] is False and t["failures"][0]["where"] == "probe.py:5"
    assert {d["route"] for d in t["decisions"]} >= {"common-IR", "rewritten", "native",
                                                     "unsupported"}


def test_policy_and_features_change_the_probe() -> None:
    m = GraphMaker()
    h = m.input("h", "f16", (4,))
    g = m.graph(m.op("tanh", [h]))
    assert not explain(g, targets="webgpu").compile_ready("webgpu")
    assert explain(g, targets="webgpu", features=("shader-f16",)).compile_ready("webgpu")
    soft = GraphMaker()
    s = soft.graph(soft.op("silu", [soft.input("x", "f32", (2, 3))]))  # no native silu on cpu
    r = explain(s, targets="cpu", policy="force-native")
    assert r.routes("cpu") == {s.outputs[0]: "unsupported"}


def test_explain_traces_a_function() -> None:
    import rlx_core as rlx

    def f(x, w):
        return rlx.nn.softmax(x @ w, axis=-1)

    r = rlx.explain(f, np.ones((2, 3), np.float32), np.ones((3, 4), np.float32), targets="all")
    assert all(r.compile_ready(t) for t in r.targets)
    assert r.counts("numpy")["softmax"]["common-IR"] == 1


def test_example_models_report(capsys) -> None:
    from pathlib import Path

    from rlx_core.cli import main

    models = Path(__file__).resolve().parents[2] / "examples" / "models"
    assert main(["explain", str(models / "illegal_f64.py"), "--target", "webgpu"]) == 1
    out = capsys.readouterr().out
    assert "compile-ready: no" in out and "RLX-L002" in out and "RLX-L004" in out
    assert main(["explain", str(models / "illegal_f64.py"), "--target", "cpu"]) == 0
