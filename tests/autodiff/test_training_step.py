"""A training step is ONE compiled graph (forward, backward, update) and its update matches a
numpy implementation of SGD-with-momentum and Adam (torch.optim's formulas)."""

from __future__ import annotations

import numpy as np
import pytest

import rlx_core as rlx
from rlx_core.optim import SGD, Adam, OptimizerError, compile_step, training_graph


def loss_fn(params, x, onehot):
    logits = rlx.nn.linear(x, params["w"], params["b"])
    return -(rlx.nn.log_softmax(logits) * onehot).sum(axis=-1).mean()


def numpy_grads(p, x, onehot):
    z = x @ p["w"].T + p["b"]
    e = np.exp(z - z.max(-1, keepdims=True))
    d = (e / e.sum(-1, keepdims=True) - onehot) / len(x)
    return {"w": d.T @ x, "b": d.sum(0)}


def _problem(seed: int = 11):
    # a generator per call: a module-level one made each test's data depend on which tests
    # ran before it in the same process (pytest-xdist shares them out differently per run)
    rng = np.random.default_rng(seed)
    params = {"w": rng.standard_normal((4, 6)) * 0.1, "b": np.zeros(4)}
    x = rng.standard_normal((8, 6))
    onehot = np.eye(4)[rng.integers(0, 4, 8)]
    return params, x, onehot


def test_training_step_is_one_graph() -> None:
    params, x, onehot = _problem()
    g = training_graph(loss_fn, Adam(1e-2), params, x, onehot)
    # outputs: loss, 2 new params, Adam state (m: 2, t, v: 2)
    assert len(g.outputs) == 1 + 2 + 5
    # differentiation works on MIR: the blocks are lowered, their provenance survives
    assert "dot_general" in g.op_counts()
    assert {"linear", "log_softmax"} <= {n.loc.origin_op for n in g.nodes}
    scopes = {n.loc.scope.split(".")[0] for n in g.nodes}
    assert "grad" in scopes  # the backward pass lives in the same graph
    step = compile_step(loss_fn, Adam(1e-2), params, x, onehot)
    assert len(step.executable.lir.outputs) == 8 and step.executable.lir.kernels


def test_sgd_momentum_matches_numpy() -> None:
    params, x, onehot = _problem()
    opt = SGD(lr=0.5, momentum=0.9)
    step = compile_step(loss_fn, opt, params, x, onehot)
    ref = {k: v.copy() for k, v in params.items()}
    vel = {k: np.zeros_like(v) for k, v in params.items()}
    for _ in range(3):
        step(x, onehot)
        g = numpy_grads(ref, x, onehot)
        for k in ref:
            vel[k] = 0.9 * vel[k] + g[k]
            ref[k] = ref[k] - 0.5 * vel[k]
    for k in ref:
        np.testing.assert_allclose(step.params[k], ref[k], rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(step.state["velocity"]["w"], vel["w"], rtol=1e-10)


def test_adam_matches_numpy() -> None:
    params, x, onehot = _problem()
    opt = Adam(lr=0.05, b1=0.8, b2=0.99, eps=1e-6)
    step = compile_step(loss_fn, opt, params, x, onehot)
    ref = {k: v.copy() for k, v in params.items()}
    m = {k: np.zeros_like(v) for k, v in params.items()}
    v = {k: np.zeros_like(v) for k, v in params.items()}
    for t in range(1, 4):
        step(x, onehot)
        g = numpy_grads(ref, x, onehot)
        for k in ref:
            m[k] = 0.8 * m[k] + 0.2 * g[k]
            v[k] = 0.99 * v[k] + 0.01 * g[k] ** 2
            mh, vh = m[k] / (1 - 0.8 ** t), v[k] / (1 - 0.99 ** t)
            ref[k] = ref[k] - 0.05 * mh / (np.sqrt(vh) + 1e-6)
    for k in ref:
        # t is f32, so the bias corrections are f32: their rounding scales the whole update
        # (about lr), not each parameter: 6e-8 (1.2e-6 * lr) seen, so an absolute 4e-6 * lr
        np.testing.assert_allclose(step.params[k], ref[k], rtol=1e-5, atol=2e-7)
    assert float(step.state["t"]) == 3.0
    assert step.losses[-1] < step.losses[0]


def test_optimizer_hyperparameters_are_checked() -> None:
    with pytest.raises(OptimizerError):
        SGD(lr=-1.0)
    with pytest.raises(OptimizerError):
        Adam(b1=1.0)
    with pytest.raises(OptimizerError, match="nesterov"):
        SGD(lr=0.1, nesterov=True)
