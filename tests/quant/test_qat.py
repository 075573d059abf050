"""QAT's fake_quantize: its reference forward, and its gradients (STE for x, LSQ for the
scale, the exact one for the zero point) against hand formulas and finite differences where
the forward is differentiable."""

from __future__ import annotations

import numpy as np
import pytest

import rlx_core as rlx
from rlx_core import quant as Q
from rlx_core.targets.numpy_ref import quant_semantics as ref


def _loss(qmin, qmax, axis):
    def f(x, s, z, g):
        return (Q.fake_quantize(x, s, z, qmin, qmax, axis) * g).sum()

    return f


def test_forward_hand_values():
    x = np.array([0.04, 0.05, 0.16, -1.0, 5.0], np.float32)
    got = rlx.compile(lambda v: Q.fake_quantize(v, 0.1, 0.0, -8, 7), x)(x)
    # 0.4 -> 0, 0.5 -> 0 (half to even), 1.6 -> 2, -10 -> -8 (clipped), 50 -> 7 (clipped)
    want = np.float32([0, 0, 2, -8, 7]) * np.float32(0.1)
    assert np.array_equal(got, want)
    ref_out = ref.fake_quantize({"qmin": -8, "qmax": 7, "axis": -1}, x, np.float32(0.1),
                                np.float32(0.0))
    assert np.array_equal(ref_out, want)


@pytest.mark.parametrize("axis", [None, 1])
def test_gradients_match_ste_and_lsq(axis):
    rng = np.random.default_rng(0)
    x = (rng.normal(size=(4, 3)) * 2).astype(np.float32)
    shape = () if axis is None else (3,)
    s = np.full(shape, 0.05, np.float32) if axis is None else np.float32([0.05, 0.1, 0.2])
    z = np.full(shape, 2.0, np.float32)
    g = rng.normal(size=(4, 3)).astype(np.float32)
    qmin, qmax = -16, 15
    dx, ds, dz = rlx.grad(_loss(qmin, qmax, axis), argnums=(0, 1, 2))(x, s, z, g)
    sb = s if axis is None else s[None, :]
    zb = z if axis is None else z[None, :]
    v = x / sb
    q = np.round(v) + zb
    below, above = q < qmin, q > qmax
    inside = ~(below | above)
    assert below.any() and above.any() and inside.any()  # every branch is exercised
    np.testing.assert_allclose(dx, np.where(inside, g, 0.0), rtol=1e-6)
    ds_elem = np.where(below, qmin - zb, np.where(above, qmax - zb, np.round(v) - v))
    red = None if axis is None else 0
    np.testing.assert_allclose(ds, (g * ds_elem).sum(axis=red), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(dz, (g * np.where(inside, 0.0, -sb)).sum(axis=red), rtol=1e-5)


def test_finite_differences_where_the_forward_is_differentiable():
    """In the clipped region the forward is (q_lim - z) * s: linear in s and z, so their
    gradients are checked by central differences; inside the range it does not depend on z
    (gradient 0), which the differences confirm too."""
    rng = np.random.default_rng(1)
    g = rng.normal(size=(6,)).astype(np.float64)
    x = np.array([3.0, -4.0, 5.0, -6.0, 2.5, 7.0], np.float32)  # all clipped at s = 0.1
    s, z = np.float32(0.1), np.float32(1.0)
    qmin, qmax = -8, 7
    _, ds, dz = rlx.grad(_loss(qmin, qmax, None), argnums=(0, 1, 2))(x, s, z,
                                                                    g.astype(np.float32))

    def f(s_, z_, xs=x):  # the forward in f64, so the differences resolve 1e-4 steps
        xs = xs.astype(np.float64)
        q = np.clip(np.round(xs / s_) + z_, qmin, qmax)
        return float((((q - z_) * s_) * g[:len(xs)]).sum())

    h = 1e-4
    s, z = float(s), float(z)  # steps taken in f64, not rounded to f32
    assert float(ds) == pytest.approx((f(s + h, z) - f(s - h, z)) / (2 * h), rel=1e-4)
    assert float(dz) == pytest.approx((f(s, z + h) - f(s, z - h)) / (2 * h), rel=1e-4)
    xin = np.array([0.12, -0.33, 0.21], np.float32)  # inside: no dependence on z
    _, _, dz_in = rlx.grad(_loss(qmin, qmax, None), argnums=(0, 1, 2))(
        xin, s, z, np.ones(3, np.float32))
    assert float(dz_in) == 0.0
    assert abs(f(s, z + h, xin) - f(s, z - h, xin)) / (2 * h) < 1e-9


def test_qat_mlp_trains_and_converts_to_the_int8_chain():
    """LSQ fine-tuning through compile_step, then the learned scales in a true int8 graph
    whose logits follow the fake-quantized forward's."""
    from rlx_core.models.mlp import init_mlp
    from rlx_core.optim import Adam, compile_step
    from rlx_core.quant import qat

    rng = np.random.default_rng(0)
    x = rng.uniform(0, 1, (16, 12)).astype(np.float32)
    y = rng.integers(0, 3, 16).astype(np.int32)
    qp = qat.init_qat(init_mlp((12, 20, 3), seed=1), [1.0, 1.5])
    step = compile_step(qat.qat_mlp_loss, Adam(1e-2), qp, x, y, target="numpy")
    losses = [float(step(x, y)) for _ in range(12)]
    assert losses[-1] < losses[0]
    before = qp["fc1"]["w_log_scale"]
    assert not np.array_equal(np.asarray(step.params["fc1"]["w_log_scale"]), before)  # learned
    q = qat.convert_qat_mlp(step.params, x)
    assert q.graph.op_counts()["int_linear"] == 2 and q.graph.op_counts()["requantize"] == 1
    fq = np.asarray(rlx.compile(lambda v: qat.qat_mlp_logits(step.params, v), x)(x))
    got = np.asarray(rlx.compile(q.graph)(x))
    assert np.abs(got - fq).max() < 0.02 * np.abs(fq).max() + 1e-3


def test_qat_cnn_trains_and_converts_to_int_conv2d():
    """Two fake-quantized convolutions (per-channel weights along the filters) and a linear:
    LSQ steps through compile_step lower the loss and move the conv scales; the converted
    graph is int_conv2d -> requantize twice, a flatten of integers, int_linear, and its
    logits follow the fake-quantized forward's."""
    from rlx_core.optim import Adam, compile_step
    from rlx_core.quant import qat

    rng = np.random.default_rng(0)
    x = rng.uniform(0, 1, (8, 1, 8, 8)).astype(np.float32)
    y = rng.integers(0, 3, 8).astype(np.int32)
    f32 = {"conv1": {"weight": rng.normal(0, 0.5, (4, 1, 3, 3)), "bias": rng.normal(0, .1, 4)},
           "conv2": {"weight": rng.normal(0, 0.3, (4, 4, 3, 3)), "bias": rng.normal(0, .1, 4)},
           "fc1": {"weight": rng.normal(0, 0.3, (3, 16)), "bias": np.zeros(3)}}
    f32 = {k: {n: v.astype(np.float32) for n, v in p.items()} for k, p in f32.items()}
    qp = qat.init_qat(f32, [1.0, 2.0, 2.0])
    assert qp["conv2"]["w_log_scale"].shape == (4,)  # one step size per filter
    step = compile_step(qat.cnn_loss(), Adam(1e-2), qp, x, y, target="numpy")
    losses = [float(step(x, y)) for _ in range(10)]
    assert losses[-1] < losses[0]
    assert not np.array_equal(np.asarray(step.params["conv1"]["w_log_scale"]),
                              qp["conv1"]["w_log_scale"])
    q = qat.convert_qat(step.params, x)
    ops_ = q.graph.op_counts()
    assert ops_["int_conv2d"] == 2 and ops_["int_linear"] == 1 and ops_["requantize"] == 2
    assert "conv2d" not in ops_ and "linear" not in ops_
    fq = np.asarray(rlx.compile(lambda v: qat.qat_logits(step.params, v), x)(x))
    got = np.asarray(rlx.compile(q.graph)(x))
    assert np.abs(got - fq).max() < 0.03 * np.abs(fq).max() + 1e-3
