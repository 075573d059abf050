"""Eager mode (rlx ops on plain arrays outside a trace) and numpy's protocols on traced tensors."""

from __future__ import annotations

import numpy as np
import pytest

import rlx_core as rlx
from rlx_core.frontend import eager
from rlx_core.frontend.numpy_protocol import ConcreteValueError, NumpyInteropError

X = np.array([[1.0, -2.0, 3.0], [0.5, 0.0, -1.0]], np.float32)


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def test_nn_ops_compute_eagerly_on_numpy_arrays():
    np.testing.assert_allclose(rlx.nn.softmax(X), _softmax(X), rtol=1e-6)
    np.testing.assert_allclose(rlx.nn.relu(X), np.maximum(X, 0))
    w = np.arange(12, dtype=np.float32).reshape(4, 3)
    np.testing.assert_allclose(rlx.nn.linear(X, w), X @ w.T, rtol=1e-6)
    assert isinstance(rlx.nn.softmax(X), np.ndarray)


def test_functional_ops_compute_eagerly():
    np.testing.assert_allclose(rlx.maximum(X, 0.0), np.maximum(X, 0))
    np.testing.assert_allclose(rlx.exp(X), np.exp(X), rtol=1e-6)
    assert rlx.concat([X, X], axis=0).shape == (4, 3)
    assert rlx.reshape(X, (3, 2)).shape == (3, 2)
    np.testing.assert_array_equal(rlx.zeros((2, 2)), np.zeros((2, 2), np.float32))
    np.testing.assert_allclose(rlx.where(X > 0, X, 0.0), np.where(X > 0, X, 0))


def test_eager_cache_compiles_once_per_signature():
    eager._CACHE.clear()
    rlx.nn.softmax(X)
    rlx.nn.softmax(X + 1)
    assert len(eager._CACHE) == 1
    rlx.nn.softmax(X, axis=0)        # another static argument
    rlx.nn.softmax(X.astype(np.float64))  # another dtype
    assert len(eager._CACHE) == 3


def test_ops_inside_a_trace_still_record():
    g = rlx.trace(lambda x: rlx.nn.softmax(rlx.exp(x)), X)
    assert [n.op for n in g.nodes] == ["exp", "softmax"]


def test_numpy_ufuncs_and_functions_map_to_rlx_ops():
    def f(x):
        y = np.tanh(np.exp(x)) + np.maximum(x, 0)
        return np.sum(y, axis=1), np.where(x > 0, x, 0.0), np.add.reduce(x, axis=0), np.clip(x, -1, 1)

    got = rlx.compile(f, X, target="numpy")(X)
    y = np.tanh(np.exp(X)) + np.maximum(X, 0)
    want = (y.sum(1), np.where(X > 0, X, 0), X.sum(0), np.clip(X, -1, 1))
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-6)


def test_iteration_over_the_leading_axis():
    got = rlx.compile(lambda x: rlx.stack([r.sum() for r in x]), X, target="numpy")(X)
    np.testing.assert_allclose(got, X.sum(1), rtol=1e-6)


def test_iterating_a_scalar_names_the_fix():
    with pytest.raises(NumpyInteropError, match="0-d") as info:
        rlx.trace(lambda x: rlx.stack(list(x.sum())), X)
    assert info.value.code == "RLX-T010" and "x.shape" in info.value.hint


@pytest.mark.parametrize("fn, spelling", [
    (lambda x: np.einsum("ij->i", x), "x @ w"),
    (lambda x: np.log1p(x), "rlx.log(1 + x)"),
    (lambda x: np.arctan2(x, x), "rlx ops"),
])
def test_unmapped_numpy_calls_raise_typed_errors_with_the_rlx_spelling(fn, spelling):
    with pytest.raises(NumpyInteropError) as info:
        rlx.trace(fn, X)
    assert info.value.code == "RLX-T010" and spelling in info.value.hint


@pytest.mark.parametrize("fn", [lambda x: np.asarray(x), lambda x: float(x[0, 0])])
def test_concrete_values_of_a_traced_tensor_raise(fn):
    with pytest.raises(ConcreteValueError) as info:
        rlx.trace(fn, X)
    assert info.value.code == "RLX-T011" and "eager" in info.value.hint


def test_numpy_shape_functions_on_traced_tensors():
    def f(x):
        assert np.shape(x) == (2, 3) and np.ndim(x) == 2 and np.size(x) == 6
        return np.squeeze(np.expand_dims(x, 0), axis=0) * 2

    np.testing.assert_allclose(rlx.compile(f, X, target="numpy")(X), X * 2)
