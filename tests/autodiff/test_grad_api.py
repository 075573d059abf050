"""rlx.grad / rlx.value_and_grad: pytrees, argnums, aux, one graph, typed errors."""

from __future__ import annotations

import numpy as np
import pytest

import rlx_core as rlx
from rlx_core.autodiff import GradError, grad_graph
from rlx_core.ir.graph import Level

RNG = np.random.default_rng(3)


def _softmax_regression_loss(params, x, onehot):
    logits = rlx.nn.linear(x, params["w"], params["b"])
    return -(rlx.nn.log_softmax(logits) * onehot).sum(axis=-1).mean()


def _numpy_grads(w, b, x, onehot):
    z = x @ w.T + b
    p = np.exp(z - z.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    d = (p - onehot) / len(x)
    return d.T @ x, d.sum(0)


def test_value_and_grad_of_a_dict_of_params_matches_the_closed_form() -> None:
    w, b = RNG.standard_normal((4, 6)), RNG.standard_normal(4)
    x = RNG.standard_normal((5, 6))
    onehot = np.eye(4)[RNG.integers(0, 4, 5)]
    loss, g = rlx.value_and_grad(_softmax_regression_loss)({"w": w, "b": b}, x, onehot)
    gw, gb = _numpy_grads(w, b, x, onehot)
    assert set(g) == {"w", "b"}
    np.testing.assert_allclose(g["w"], gw, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(g["b"], gb, rtol=1e-10, atol=1e-12)
    z = x @ w.T + b
    ref = -(((z - z.max(-1, keepdims=True)) - np.log(np.exp(z - z.max(-1, keepdims=True))
                                                     .sum(-1, keepdims=True))) * onehot)
    assert np.isclose(loss, ref.sum(-1).mean())


def test_grad_argnums_tuple_and_has_aux() -> None:
    def f(x, y):
        s = (x * y).sum()
        return s * s, s

    x, y = RNG.standard_normal(3), RNG.standard_normal(3)
    (gx, gy), aux = rlx.grad(f, argnums=(0, 1), has_aux=True)(x, y)
    s = (x * y).sum()
    np.testing.assert_allclose(gx, 2 * s * y, rtol=1e-12)
    np.testing.assert_allclose(gy, 2 * s * x, rtol=1e-12)
    assert np.isclose(aux, s)


def test_grad_inside_a_compiled_function_is_one_graph() -> None:
    w = RNG.standard_normal((3, 3))

    def sgd_step(w, x):
        g = rlx.grad(lambda w: (rlx.tanh(x @ w) ** 2).mean())(w)
        return w - 0.1 * g

    x = RNG.standard_normal((2, 3))
    exe = rlx.compile(sgd_step, w, x)
    want_g = 2 * (x.T @ (np.tanh(x @ w) * (1 - np.tanh(x @ w) ** 2))) / 6
    np.testing.assert_allclose(exe(w, x), w - 0.1 * want_g, rtol=1e-10)
    assert exe.lir.level is Level.LIR and len(exe.lir.outputs) == 1
    # backward nodes are marked as such for the explorer
    assert any(n.loc.scope.startswith("grad") for n in exe.hir.nodes)


def test_grad_graph_outputs_value_then_gradients() -> None:
    g = grad_graph(lambda a, b: (a * b).sum(), np.ones(3), np.ones(3), argnums=(0, 1))
    assert len(g.outputs) == 3
    assert [t.shape for t in g.output_types()] == [(), (3,), (3,)]


def test_unused_argument_has_zero_gradient() -> None:
    gx, gy = rlx.grad(lambda x, y: (x * x).sum(), argnums=(0, 1))(np.ones(2), np.ones(2))
    np.testing.assert_array_equal(gy, np.zeros(2))
    np.testing.assert_array_equal(gx, 2 * np.ones(2))


def test_closed_over_weights_get_no_gradient_but_are_used() -> None:
    w = RNG.standard_normal((5, 5))  # large enough to become a parameter, not a constant
    g = rlx.grad(lambda x: (x @ w).sum())(np.ones((2, 5)))
    np.testing.assert_allclose(g, np.tile(w.sum(1), (2, 1)), rtol=1e-12)


def test_errors_are_typed() -> None:
    with pytest.raises(GradError, match="scalar float output"):
        rlx.grad(lambda x: x * 2)(np.ones(3))
    with pytest.raises(GradError, match="cannot differentiate"):
        rlx.grad(lambda i: i.astype("f32").sum())(np.arange(3, dtype=np.int32))
    with pytest.raises(GradError, match="argnums"):
        rlx.grad(lambda x: x.sum(), argnums=2)(np.ones(3))
    with pytest.raises(GradError, match="has_aux"):
        rlx.grad(lambda x: x.sum(), has_aux=True)(np.ones(3))
