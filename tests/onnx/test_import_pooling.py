"""MaxPool's Indices output and integer inputs, MaxUnpool and Upsample against ONNX's
reference."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="the onnx package is not installed")
from _one_node import check_exact as _check  # noqa: E402
from _one_node import model  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

from rlx_core.frontend.onnx_backend import backend_for  # noqa: E402

RNG = np.random.default_rng(2)


def _model(op: str, ins: dict[str, np.ndarray], outs: list[str], opset: int = 22, **attrs):
    return model(op, ins, len(outs), opset, **attrs)


@pytest.mark.parametrize("order", [0, 1])
@pytest.mark.parametrize("dtype", [np.float32, np.int8, np.uint8])
def test_maxpool_indices_with_ties_and_padding(order: int, dtype: type) -> None:
    # few distinct values, so windows hold ties; the first maximal tap must be named
    x = RNG.integers(0, 3, (2, 3, 6, 5)).astype(dtype)
    ins = {"x": x}
    _check(_model("MaxPool", ins, ["y", "i"], kernel_shape=[3, 2], strides=[2, 2],
                  pads=[1, 1, 1, 0], storage_order=order), ins)


def test_integer_maxpool_pads_never_win() -> None:
    x = np.full((1, 1, 4, 4), -128, np.int8)
    x[0, 0, 1, 2] = -127
    model = _model("MaxPool", {"x": x}, ["y"], kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    got = backend_for("numpy").prepare(model).run([x])[0]
    # the reference pads integers with NaN and fails; the windows' maxima by hand
    want = np.array([[max(x[0, 0, max(i - 1, 0):i + 2, max(j - 1, 0):j + 2].ravel())
                      for j in range(4)] for i in range(4)], np.int8)
    np.testing.assert_array_equal(got[0, 0], want)


def test_maxunpool_round_trip_and_output_shape() -> None:
    x = RNG.standard_normal((1, 2, 4, 4)).astype(np.float32)
    pool = _model("MaxPool", {"x": x}, ["y", "i"], kernel_shape=[2, 2], strides=[2, 2])
    y, i = ReferenceEvaluator(pool).run(None, {"x": x})
    ins = {"y": y, "i": i}
    _check(_model("MaxUnpool", ins, ["u"], kernel_shape=[2, 2], strides=[2, 2]), ins)
    ins = {"y": y, "i": i, "s": np.array([1, 2, 5, 5], np.int64)}
    _check(_model("MaxUnpool", ins, ["u"], kernel_shape=[2, 2], strides=[2, 2]), ins)


def test_maxunpool_repeated_index_keeps_the_last_value() -> None:
    ins = {"y": np.array([[[[1.0, 2.0]]]], np.float32),
           "i": np.array([[[[3, 3]]]], np.int64)}
    _check(_model("MaxUnpool", ins, ["u"], kernel_shape=[2, 2], strides=[2, 2]), ins)


def test_upsample_nearest() -> None:
    x = RNG.standard_normal((1, 2, 2, 3)).astype(np.float32)
    ins = {"x": x, "s": np.array([1, 1, 2, 3], np.float32)}
    _check(_model("Upsample", ins, ["y"], opset=9, mode="nearest"), ins)
