"""ONNX LinearAttention and CausalConvWithState (opset 27) through the importer, against
onnx.reference.ReferenceEvaluator, and the typed refusals."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="the onnx package is not installed")
from _one_node import check, model  # noqa: E402
from onnx import TensorProto, helper  # noqa: E402

from rlx_core.frontend.onnx_import import UnsupportedOp, import_model  # noqa: E402


def _la(rule: str, b: int, t: int, hq: int, hkv: int, dk: int, dv: int, past: bool,
        decay_per_head: bool = False, beta_shared: bool = False, dtype=np.float32,
        seed: int = 0, **attrs):
    rng = np.random.default_rng(seed)

    def arr(*shape: int, scale: float = 0.5) -> np.ndarray:
        return (rng.standard_normal(shape) * scale).astype(dtype)

    feeds = {"q": arr(b, t, hq * dk), "k": arr(b, t, hkv * dk), "v": arr(b, t, hkv * dv)}
    names = ["q", "k", "v", "", "", ""]
    if past:
        feeds["past"] = arr(b, hkv, dk, dv)
        names[3] = "past"
    if rule in ("gated", "gated_delta"):
        feeds["decay"] = -np.abs(arr(b, t, hkv if decay_per_head else hkv * dk)).astype(dtype)
        names[4] = "decay"
    if rule in ("delta", "gated_delta"):
        feeds["beta"] = (1 / (1 + np.exp(-arr(b, t, 1 if beta_shared else hkv)))).astype(dtype)
        names[5] = "beta"
    while not names[-1]:
        names.pop()
    node = helper.make_node("LinearAttention", names, ["y", "state"], update_rule=rule,
                            q_num_heads=hq, kv_num_heads=hkv, **attrs)
    graph = helper.make_graph(
        [node], "t",
        [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
         for k, v in feeds.items()],
        [helper.make_tensor_value_info(o, TensorProto.UNDEFINED, None) for o in ("y", "state")])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 27)])
    return m, {k: feeds[k] for k in names if k}


@pytest.mark.parametrize("rule,hq,hkv,past,per_head,shared", [
    ("linear", 2, 2, False, False, False),
    ("gated", 4, 2, True, True, False),
    ("delta", 2, 1, True, False, True),
    ("gated_delta", 4, 2, False, False, False),
])
def test_linear_attention_matches_reference(rule: str, hq: int, hkv: int, past: bool,
                                            per_head: bool, shared: bool) -> None:
    m, feeds = _la(rule, 2, 5, hq, hkv, 3, 4, past, per_head, shared)
    check(m, feeds, rtol=1e-5, atol=1e-6)


def test_linear_attention_long_sequence_and_explicit_scale() -> None:
    m, feeds = _la("gated_delta", 1, 70, 2, 2, 2, 3, True, seed=1, scale=0.25)
    check(m, feeds, rtol=1e-4, atol=1e-5)


def test_linear_attention_cpu() -> None:
    m, feeds = _la("gated_delta", 2, 3, 4, 2, 4, 4, True, seed=2)
    check(m, feeds, target="cpu", rtol=1e-5, atol=1e-6)


def test_linear_attention_refusals() -> None:
    m, feeds = _la("linear", 1, 2, 2, 2, 2, 2, False)
    next(a for a in m.graph.node[0].attribute if a.name == "update_rule").s = b"softmax"
    with pytest.raises(UnsupportedOp, match="update_rule"):
        import_model(m, static_inputs=feeds)
    m, feeds = _la("gated", 1, 2, 3, 2, 2, 2, False)
    with pytest.raises(UnsupportedOp, match="multiple"):
        import_model(m, static_inputs=feeds)


@pytest.mark.parametrize("k,act,bias,past", [(4, "none", False, False), (3, "silu", True, True),
                                             (1, "swish", True, False), (2, "none", False, True)])
def test_causal_conv_with_state_matches_reference(k: int, act: str, bias: bool,
                                                  past: bool) -> None:
    rng = np.random.default_rng(k)
    inputs = {"x": rng.standard_normal((2, 3, 6)).astype(np.float32),
              "w": rng.standard_normal((3, 1, k)).astype(np.float32)}
    if bias:
        inputs["b"] = rng.standard_normal(3).astype(np.float32)
    if past:
        inputs["p"] = rng.standard_normal((2, 3, k - 1)).astype(np.float32)
    m = model("CausalConvWithState", inputs, n_out=2, opset=27, activation=act)
    if past and not bias:  # past_state is input 3: leave the bias slot empty
        m.graph.node[0].input.insert(2, "")
    check(m, inputs, rtol=1e-5, atol=1e-6)


def test_causal_conv_with_state_cpu_and_refusal() -> None:
    rng = np.random.default_rng(9)
    inputs = {"x": rng.standard_normal((1, 4, 5)).astype(np.float32),
              "w": rng.standard_normal((4, 1, 3)).astype(np.float32),
              "b": rng.standard_normal(4).astype(np.float32),
              "p": rng.standard_normal((1, 4, 2)).astype(np.float32)}
    check(model("CausalConvWithState", inputs, n_out=2, opset=27, activation="silu"), inputs,
          target="cpu", rtol=1e-5, atol=1e-6)
    bad = model("CausalConvWithState", inputs, n_out=2, opset=27, activation="gelu")
    with pytest.raises(UnsupportedOp, match="activation"):
        import_model(bad, static_inputs=inputs)
