"""ONNX RNN, GRU, LSTM (unrolled over the static sequence) and ReverseSequence through the
importer, against onnx.reference.ReferenceEvaluator (or numpy where the reference ignores an
attribute), and the typed refusals."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="the onnx package is not installed")
from _one_node import check  # noqa: E402
from onnx import TensorProto, helper  # noqa: E402

from rlx_core.frontend.onnx_backend import backend_for  # noqa: E402
from rlx_core.frontend.onnx_import import UnsupportedOp, import_model  # noqa: E402

GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}


def _rnn(op: str, seq: int, batch: int, inp: int, hid: int, direction: str = "forward",
         layout: int = 0, bias: bool = True, init: bool = True, peep: bool = False,
         seed: int = 0, **attrs) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    dirs = 2 if direction == "bidirectional" else 1
    g = GATES[op]

    def arr(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape) * 0.5).astype(np.float32)

    xs = (batch, seq, inp) if layout else (seq, batch, inp)
    hs = (batch, dirs, hid) if layout else (dirs, batch, hid)
    feeds = {"X": arr(*xs), "W": arr(dirs, g * hid, inp), "R": arr(dirs, g * hid, hid)}
    names = ["X", "W", "R", "", "", ""]
    if bias:
        feeds["B"] = arr(dirs, 2 * g * hid)
        names[3] = "B"
    if init:
        feeds["initial_h"] = arr(*hs)
        names[5] = "initial_h"
    if op == "LSTM":
        names += ["", ""]
        if init:
            feeds["initial_c"] = arr(*hs)
            names[6] = "initial_c"
        if peep:
            feeds["P"] = arr(dirs, 3 * hid)
            names[7] = "P"
    while names and not names[-1]:
        names.pop()
    outs = ["Y", "Y_h"] + (["Y_c"] if op == "LSTM" else [])
    node = helper.make_node(op, names, outs, hidden_size=hid, direction=direction,
                            layout=layout, **attrs)
    graph = helper.make_graph(
        [node], "t",
        [helper.make_tensor_value_info(k, TensorProto.FLOAT, v.shape) for k, v in feeds.items()],
        [helper.make_tensor_value_info(o, TensorProto.UNDEFINED, None) for o in outs])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 22)])
    # the feeds in the node's input order (check() passes them positionally)
    order = [n for n in names if n]
    return m, {k: feeds[k] for k in order}


CASES = [
    ("RNN", "forward", 0, {}),
    ("RNN", "bidirectional", 1, {}),
    ("GRU", "reverse", 0, {}),
    ("GRU", "bidirectional", 0, {"linear_before_reset": 1}),
    ("GRU", "forward", 1, {"linear_before_reset": 1}),
    ("LSTM", "forward", 0, {}),
    ("LSTM", "bidirectional", 1, {}),
    ("LSTM", "reverse", 0, {}),
]


@pytest.mark.parametrize("op,direction,layout,attrs", CASES)
def test_recurrent_matches_reference(op: str, direction: str, layout: int, attrs) -> None:
    m, feeds = _rnn(op, 4, 3, 2, 5, direction, layout, **attrs)
    check(m, feeds, rtol=1e-5, atol=1e-6)


def test_lstm_peepholes_without_bias_or_initial_state() -> None:
    m, feeds = _rnn("LSTM", 3, 2, 4, 3, "bidirectional", bias=False, init=False, peep=True)
    check(m, feeds, rtol=1e-5, atol=1e-6)


def test_gru_cpu() -> None:
    m, feeds = _rnn("GRU", 5, 2, 3, 4, "bidirectional", 0, linear_before_reset=1, seed=4)
    check(m, feeds, target="cpu", rtol=1e-5, atol=1e-6)


def test_lstm_cpu() -> None:
    m, feeds = _rnn("LSTM", 5, 2, 3, 4, "forward", 1, peep=True, seed=5)
    check(m, feeds, target="cpu", rtol=1e-5, atol=1e-6)


def test_rnn_clip_and_relu_against_numpy() -> None:
    # the reference ignores clip and activations; this is the spec's formula
    m, feeds = _rnn("RNN", 4, 2, 3, 5, clip=0.3, activations=["Relu"], seed=6)
    y, y_h = backend_for("numpy").prepare(m, "CPU").run(list(feeds.values()))
    x, w, r, b, h = (feeds[k] for k in ("X", "W", "R", "B", "initial_h"))
    h = h[0]
    ys = []
    for t in range(4):
        pre = x[t] @ w[0].T + h @ r[0].T + b[0, :5] + b[0, 5:]
        h = np.maximum(np.clip(pre, -0.3, 0.3), 0)
        ys.append(h)
    np.testing.assert_allclose(y[:, 0], np.stack(ys), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(y_h[0], h, rtol=1e-5, atol=1e-6)


def test_full_sequence_lens_are_accepted_partial_ones_refused() -> None:
    m, feeds = _rnn("RNN", 3, 2, 2, 4)
    node = m.graph.node[0]
    node.input[4] = "sequence_lens"
    m.graph.input.append(helper.make_tensor_value_info("sequence_lens", TensorProto.INT32,
                                                       [2]))
    full = dict(feeds, sequence_lens=np.array([3, 3], np.int32))
    import_model(m, static_inputs=full)
    with pytest.raises(UnsupportedOp, match="partial sequences"):
        import_model(m, static_inputs=dict(feeds, sequence_lens=np.array([3, 1], np.int32)))


@pytest.mark.parametrize("attrs,match", [
    ({"activations": ["Sigmoid", "Affine"]}, "Affine"),
    ({"activations": ["Sigmoid", "Tanh"], "activation_alpha": [0.5, 0.5]}, "activation_alpha"),
    ({"input_forget": 1}, "input_forget"),
])
def test_unsupported_recurrent_attributes_are_refused(attrs, match: str) -> None:
    op = "LSTM" if "input_forget" in attrs else "GRU"
    m, feeds = _rnn(op, 2, 1, 2, 3, **attrs)
    with pytest.raises(UnsupportedOp, match=match):
        import_model(m, static_inputs=feeds)


@pytest.mark.parametrize("batch_axis,time_axis", [(0, 1), (1, 0)])
def test_reverse_sequence_matches_reference(batch_axis: int, time_axis: int) -> None:
    x = np.arange(4 * 5 * 2, dtype=np.float32).reshape(
        (4, 5, 2) if batch_axis == 0 else (5, 4, 2))
    lens = np.array([5, 1, 0, 3], np.int64)
    node = helper.make_node("ReverseSequence", ["x", "lens"], ["y"], batch_axis=batch_axis,
                            time_axis=time_axis)
    graph = helper.make_graph(
        [node], "t", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape),
                      helper.make_tensor_value_info("lens", TensorProto.INT64, [4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, x.shape)])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 10)])
    check(m, {"x": x, "lens": lens})
