"""Scatters with every reduction, repeated indices included, against ONNX's reference."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="the onnx package is not installed")
from _one_node import check_exact as _check  # noqa: E402
from _one_node import model  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

from rlx_core.frontend.onnx_backend import backend_for  # noqa: E402
from rlx_core.frontend.onnx_import import UnsupportedOp  # noqa: E402

RNG = np.random.default_rng(11)


def _model(op: str, ins: dict[str, np.ndarray], opset: int = 18, **attrs):
    return model(op, ins, 1, opset, **attrs)


@pytest.mark.parametrize("red", ["mul", "max", "min", "add"])
def test_scatter_elements_repeated_indices(red: str) -> None:
    x = RNG.standard_normal((3, 4)).astype(np.float32)
    idx = np.array([[0, 0, 2, -1], [0, 1, 2, 2], [1, 1, 1, 1]], np.int64)
    upd = RNG.standard_normal(idx.shape).astype(np.float32)
    ins = {"x": x, "i": idx, "u": upd}
    _check(_model("ScatterElements", ins, axis=1, reduction=red), ins)


@pytest.mark.parametrize("red", ["mul", "max", "min", "none"])
def test_scatter_nd_rows_and_elements(red: str) -> None:
    x = RNG.integers(-9, 9, (4, 3, 2)).astype(np.int32)
    rows = np.array([[1], [3], [1], [-4]] if red != "none" else [[1], [3], [-4]], np.int64)
    upd = RNG.integers(-9, 9, (len(rows), 3, 2)).astype(np.int32)
    ins = {"x": x, "i": rows, "u": upd}
    _check(_model("ScatterND", ins, reduction=red), ins)
    elems = np.array([[0, 1, 1], [2, 2, 0], [0, 1, 1]] if red != "none"
                     else [[0, 1, 1], [2, 2, 0]], np.int64)
    ins = {"x": x, "i": elems, "u": RNG.integers(-9, 9, len(elems)).astype(np.int32)}
    _check(_model("ScatterND", ins, reduction=red), ins)


def test_scatter_nd_duplicates_without_reduction_are_rejected() -> None:
    ins = {"x": np.zeros(4, np.float32), "i": np.array([[1], [1]], np.int64),
           "u": np.ones(2, np.float32)}
    with pytest.raises(UnsupportedOp, match="duplicate"):
        backend_for("numpy").prepare(_model("ScatterND", ins)).run(list(ins.values()))


def test_old_scatter_and_tensor_scatter() -> None:
    ins = {"x": np.zeros((3, 3), np.float32), "i": np.array([[1, 0, 2], [0, 2, 1]], np.int64),
           "u": np.arange(6, dtype=np.float32).reshape(2, 3)}
    got = backend_for("numpy").prepare(_model("Scatter", ins, opset=10, axis=0)).run(
        list(ins.values()))[0]  # the reference has no Scatter: it is ScatterElements
    want = ReferenceEvaluator(_model("ScatterElements", ins, axis=0)).run(None, ins)[0]
    np.testing.assert_array_equal(got, want)
    cache = RNG.standard_normal((2, 2, 5, 3)).astype(np.float32)
    ins = {"c": cache, "u": RNG.standard_normal((2, 2, 3, 3)).astype(np.float32),
           "w": np.array([1, 4], np.int64)}
    _check(_model("TensorScatter", ins, opset=24, mode="circular"), ins)
