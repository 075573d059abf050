"""The numerics lens (rlx_explorer/views/numerics.py): per-node errors against the f64 oracle
on every target, where precision enters, ranges and histograms, and its place in the bundle,
the viewer and the HTML export."""

from __future__ import annotations

import json

import numpy as np
import pytest

import rlx_core as rlx
from rlx_core.models.mlp import init_mlp, mlp_logits
from rlx_core.quant import ptq
from rlx_explorer import explore
from rlx_explorer.assets import viewer_esm
from rlx_explorer.html_export import html_document
from rlx_explorer.views.numerics import numerics_view

RNG = np.random.default_rng(26)
W = (RNG.standard_normal((16, 8)) * 0.5).astype(np.float32)
X = RNG.standard_normal((4, 16)).astype(np.float32)


def _f16_matmul(x):
    return (x.astype("f16") @ W.astype(np.float16)).astype("f32")


def _rows(view: dict) -> dict[str, dict]:
    return {r["name"]: r for r in view["nodes"]}


def test_a_narrowing_cast_is_where_precision_enters() -> None:
    g = rlx.trace(_f16_matmul, X)
    v = numerics_view(g, (X,), ("numpy", "cpu"))
    assert v["present"] and v["targets"] == ["numpy", "cpu"] and v["oracle"] == "f64"
    rows = list(v["nodes"])
    casts = [r for r in rows if r["entry"].startswith("cast f32 -> f16")]
    assert len(casts) == 1
    cast = casts[0]
    for t in ("numpy", "cpu"):
        # f16 keeps 11 bits: the cast's relative error is within half an ulp, and > 0
        assert 0 < cast["errors"][t]["rel"] <= 2.0 ** -11
    out = rows[-1]
    assert out["errors"]["numpy"]["rel"] > 0 and out["worst_rel"] < 1e-2
    assert out["stats"]["min"] < out["stats"]["max"] and sum(out["stats"]["hist"]) == 4 * 8
    json.dumps(v)  # the bundle is JSON


def test_an_f32_graph_is_within_f32_rounding_of_the_f64_oracle() -> None:
    g = rlx.trace(lambda x: rlx.nn.relu(x @ W), X)
    v = numerics_view(g, (X,), ("numpy",))
    assert not any(r["entry"] for r in v["nodes"])
    assert all(r["worst_rel"] < 1e-6 for r in v["nodes"])


def test_quantized_graph_against_its_float_source_layer_by_layer() -> None:
    params = init_mlp((16, 32, 32, 4), seed=3)
    batches = [RNG.uniform(0, 1, (8, 16)).astype(np.float32) for _ in range(3)]
    g = rlx.trace(lambda x: mlp_logits(params, x), batches[0])
    q = ptq.quantize_static(g, data=batches, target="numpy")
    alone = numerics_view(q.graph, (batches[0],), ("numpy",))
    # without the source, the int8 chain has no real-valued oracle: said per node
    assert any("integer domain" in r["note"] for r in alone["nodes"])
    v = numerics_view(q.graph, (batches[0],), ("numpy", "cpu"), reference=g)
    rows = _rows(v)
    quant = [r for r in v["nodes"] if r["op"] == "quantize"]
    assert quant and quant[0]["entry"] == "quantize: rounds to u8" and quant[0]["quant"]
    lo, hi = quant[0]["clip"]["range"]
    assert lo <= 0 <= hi and 0 <= quant[0]["clip"]["clipped"] <= 1
    compared = [r for r in v["nodes"] if "of the reference graph" in r["note"]]
    ops = {r["note"].split("= ")[1].split()[0] for r in compared}
    assert {"max", "linear"} <= ops  # the relu'd layers (folded into requantize) and the last
    out = rows[q.graph.outputs[0]]
    for t in ("numpy", "cpu"):
        e = out["errors"][t]["rel"]
        assert 1e-4 < e < 0.05  # int8 error, and an int8-sized one
    assert out["errors"]["numpy"]["max_abs"] == pytest.approx(out["errors"]["cpu"]["max_abs"])
    assert out["growth"] is not None and out["upstream_rel"] > 0


def test_an_unavailable_target_is_listed_with_its_reason() -> None:
    g = rlx.trace(_f16_matmul, X)
    v = numerics_view(g, (X,), ("numpy", "no-such-target"))
    assert v["targets"] == ["numpy"] and "no-such-target" in v["unavailable"]
    assert v["unavailable"]["no-such-target"]


def test_large_graphs_are_refused_with_a_reason() -> None:
    g = rlx.trace(_f16_matmul, X)
    v = numerics_view(g, (X,), ("numpy",), max_nodes=1)
    assert not v["present"] and "at most 1" in v["reason"]


def test_bundle_viewer_and_html_export_carry_the_lens() -> None:
    ex = explore(_f16_matmul, X, targets=("numpy", "cpu"), numerics=True, run=False)
    b = ex.bundle
    nm = b["numerics"]
    assert nm["present"] and nm["targets"] == ["numpy", "cpu"]
    hir_ids = {n["id"] for n in b["levels"]["hir"]["nodes"]}
    assert all(r["id"] in hir_ids for r in nm["nodes"])  # rows select HIR nodes
    assert explore(_f16_matmul, X, run=False).bundle["numerics"] == {"present": False}
    esm = viewer_esm()
    assert "VIEWS.numerics" in esm and "function viewNumerics" in esm
    page = html_document(b)
    assert "rlx-data" in page and len(page) > 1000


def test_notebook_widget_carries_the_lens() -> None:
    pytest.importorskip("anywidget", reason="anywidget is not installed (pip install .[explorer])")
    ex = explore(_f16_matmul, X, targets=("numpy",), numerics=True, run=False)
    w = ex.widget()
    assert json.loads(w.data)["numerics"]["present"]
    assert "VIEWS.numerics" in w._esm  # the widget runs the same viewer parts


def test_qdq_model_oracle_keeps_the_clamp_a_relu_was_folded_into() -> None:
    """An ONNX QDQ model whose u8 zero point 0 stands for a relu (as ONNX Runtime writes
    it): the oracle saturates like the quantize, so only the rounding counts as error, and
    the clipped fraction (the negatives) is reported on the quantize node."""
    pytest.importorskip("onnx", reason="the onnx package is not installed")
    from onnx import helper, numpy_helper

    w = (RNG.standard_normal((16, 8)) * 0.3).astype(np.float32)
    inits = [numpy_helper.from_array(a, n) for n, a in (
        ("W", w), ("sx", np.array(0.03, np.float32)), ("zx", np.array(128, np.uint8)),
        ("sy", np.array(0.02, np.float32)), ("zy", np.array(0, np.uint8)))]
    nodes = [helper.make_node("QuantizeLinear", ["x", "sx", "zx"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "sx", "zx"], ["xd"]),
             helper.make_node("MatMul", ["xd", "W"], ["h"]),
             helper.make_node("QuantizeLinear", ["h", "sy", "zy"], ["hq"]),
             helper.make_node("DequantizeLinear", ["hq", "sy", "zy"], ["y"])]
    g = helper.make_graph(nodes, "qdq", [helper.make_tensor_value_info("x", 1, [4, 16])],
                          [helper.make_tensor_value_info("y", 1, [4, 8])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    x = (RNG.standard_normal((4, 16)) * 0.5).astype(np.float32)
    v = numerics_view(rlx.from_onnx(m), (x,), ("numpy", "cpu"))
    quant = [r for r in v["nodes"] if r["op"] == "quantize"]
    assert len(quant) == 2 and all(r["entry"] for r in quant)
    assert 0.2 < quant[1]["clip"]["clipped"] < 0.8  # about half of h is negative
    assert quant[1]["clip"]["range"][0] == 0.0
    out = v["nodes"][-1]
    for t in ("numpy", "cpu"):
        assert 0 < out["errors"][t]["rel"] < 0.05  # rounding only, not the relu
