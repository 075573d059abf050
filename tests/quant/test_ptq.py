"""PTQ end to end on a small MLP: the graph it produces (integer ops, inspectable), its
accuracy against f32, the CPU running it bit for bit like the numpy reference, and the typed
errors of bad calibration input."""

from __future__ import annotations

import numpy as np
import pytest

import rlx_core as rlx
from rlx_core.models.mlp import init_mlp, mlp_logits
from rlx_core.quant import CalibrationError, QuantConfigError, ptq


@pytest.fixture(scope="module")
def model():
    params = init_mlp((16, 32, 32, 4), seed=3)
    rng = np.random.default_rng(0)
    batches = [rng.uniform(0, 1, (8, 16)).astype(np.float32) for _ in range(4)]
    g = rlx.trace(lambda x: mlp_logits(params, x), batches[0])
    return g, batches


def _run(g, x, target="numpy"):
    return np.asarray(rlx.compile(g, target=target)(x))


def test_static_ptq_graph_is_an_integer_chain(model):
    g, batches = model
    q = ptq.quantize_static(g, data=batches, target="numpy")
    ops = q.graph.op_counts()
    assert "linear" not in ops and ops["int_linear"] == 3 and ops["requantize"] == 2
    assert ops["quantize"] == 1  # only the graph input: the layers hand int8 to each other
    assert [r.requantized for r in q.layers] == [True, True, False]
    assert [r.fused_relu for r in q.layers] == [True, True, False]
    text = str(q)
    assert "int_linear" in text and "requantize" in text  # the text form shows every step
    x = batches[1]
    want, got = _run(g, x), _run(q.graph, x)
    assert np.abs(got - want).max() < 0.05 * np.abs(want).max()


@pytest.mark.parametrize("method", ["percentile", "mse", "entropy"])
def test_every_calibration_method_quantizes(model, method):
    g, batches = model
    q = ptq.quantize_static(g, data=batches, method=method, target="numpy",
                            activation_dtype="i8", activation_scheme="symmetric")
    x = batches[2]
    want, got = _run(g, x), _run(q.graph, x)
    # (a few hundred calibration values: entropy clips hardest on so few)
    assert np.abs(got - want).max() < 0.2 * np.abs(want).max()


def test_dynamic_ptq_and_cpu_is_bit_exact_with_numpy(model):
    g, batches = model
    qd = ptq.quantize_dynamic(g)
    assert qd.graph.op_counts()["int_linear"] == 3 and "requantize" not in qd.graph.op_counts()
    x = batches[3]
    want = _run(g, x)
    assert np.abs(_run(qd.graph, x) - want).max() < 0.05 * np.abs(want).max()
    ok, why = rlx.api.get_target("cpu").available()
    if not ok:
        pytest.skip(f"cpu: {why}")
    qs = ptq.quantize_static(g, data=batches, target="numpy")
    assert np.array_equal(_run(qs.graph, x, "cpu"), _run(qs.graph, x, "numpy"))


def test_bad_calibration_input_is_typed(model):
    g, batches = model
    with pytest.raises(CalibrationError) as e:
        ptq.quantize_static(g, data=[], target="numpy")
    assert e.value.hint
    with pytest.raises(QuantConfigError):
        ptq.quantize_static(g, data=[batches[0][:3]], target="numpy")
    with pytest.raises(QuantConfigError):
        ptq.quantize_static(g, data=batches, method="kl", target="numpy")


def test_int4_weight_only_ptq(model):
    g, batches = model
    q = ptq.quantize_int4_weights(g, group=16)
    assert q.graph.op_counts()["int4_linear"] == 3 and "linear" not in q.graph.op_counts()
    x = batches[0]
    want = _run(g, x)
    assert np.abs(_run(q.graph, x) - want).max() < 0.1 * np.abs(want).max()
    with pytest.raises(rlx.quant.GroupSizeError):
        ptq.quantize_int4_weights(g, group=32)  # the first layer has 16 inputs


def test_dynamic_ptq_per_token_scales(model):
    """granularity="token": one activation scale per row, checked against the rule written out
    in numpy (3-D input: the rows are every position); the cpu runs it like numpy; a kept
    layer stays f32; an unknown granularity is a typed error."""
    g, _ = model
    params = init_mlp((16, 32, 32, 4), seed=3)
    rng = np.random.default_rng(1)
    x = rng.uniform(0, 1, (2, 5, 16)).astype(np.float32)
    x[0, 0] *= 50.0  # one row with an outlier: per-tensor scales would flatten the others
    g3 = rlx.trace(lambda a: mlp_logits(params, a), x)
    for wb, ab in ((7, 7), (8, 8)):  # 7-bit codes (the AVX2 default), then exact 8-bit
        q = ptq.quantize_dynamic(g3, granularity="token", weight_bits=wb, activation_bits=ab)
        assert q.graph.op_counts()["int_linear"] == 3
        assert all(r.mode == "dynamic-token" for r in q.layers)
        h = x.reshape(10, 16)
        qw, qa = np.float32(2 ** (wb - 1) - 1), np.float32(2 ** (ab - 1) - 1)
        for i, name in enumerate(sorted(params, key=lambda k: int(k.removeprefix("fc")))):
            w, b = params[name]["weight"], params[name]["bias"]
            sw = (np.abs(w).max(axis=1) / qw).astype(np.float32)
            wq = np.clip(np.round(w / sw[:, None]), -qw, qw).astype(np.int64)
            sx = (np.maximum(np.abs(h).max(axis=1), np.float32(1e-30)) / qa)
            xq = np.clip(np.round(h / sx[:, None]), -128, 127).astype(np.int64)
            assert np.abs(xq).max() <= qa
            h = ((xq @ wq.T).astype(np.float32) * sw) * sx[:, None].astype(np.float32) + b
            if i < 2:
                h = np.maximum(h, 0)
        got = _run(q.graph, x)
        np.testing.assert_allclose(got.reshape(10, 4), h, rtol=1e-5, atol=1e-5)
    want = _run(g3, x).reshape(10, 4)
    tensor = _run(ptq.quantize_dynamic(g3).graph, x).reshape(10, 4)
    # the small rows keep their precision per token, not per tensor
    assert np.abs(got.reshape(10, 4) - want)[1:].max() < np.abs(tensor - want)[1:].max()
    ok, why = rlx.api.get_target("cpu").available()
    if ok:
        np.testing.assert_allclose(_run(q.graph, x, "cpu"), got, rtol=1e-5, atol=1e-6)
    kept = ptq.quantize_dynamic(g3, granularity="token", keep_f32=(q.layers[0].weight,))
    assert kept.graph.op_counts()["int_linear"] == 2 and kept.graph.op_counts()["linear"] == 1
    with pytest.raises(QuantConfigError) as e:
        ptq.quantize_dynamic(g, granularity="channel")
    assert e.value.hint
