"""AMP (rlx_core/quant/amp.py): the autocast pass keeps reductions, softmax and the loss in f32
and computes the matmuls in bf16/f16; the mixed-precision MNIST MLP training step tracks the
f32 one; dynamic loss scaling skips a step whose gradients are not finite."""

from __future__ import annotations

import numpy as np
import pytest

import rlx_core as rlx
from rlx_core.models.mlp import init_mlp, mlp_logits, mlp_loss
from rlx_core.quant import QuantConfigError, amp

RNG = np.random.default_rng(12)
X = RNG.uniform(0, 1, (32, 784)).astype(np.float32)
Y = RNG.integers(0, 10, 32).astype(np.int32)


@pytest.fixture(scope="module")
def params() -> dict:
    return init_mlp(seed=4)  # the MNIST MLP, 784-512-512-10


@pytest.mark.parametrize("dtype", ["bf16", "f16"])
def test_autocast_pass_policy(params: dict, dtype: str) -> None:
    g = rlx.trace(lambda x, y: mlp_loss(params, x, y), X, Y)
    low = amp.autocast(g, dtype)
    ops = [(n.op, n.type.dtype.name) for n in low.nodes]
    assert ("linear", dtype) in ops and ("linear", "f32") not in ops
    # every other float op (log_softmax, the reductions, the loss) stays f32
    assert all(d != dtype for op, d in ops if op not in ("linear", "cast"))
    assert any(op in ("log_softmax", "reduce_sum") for op, _ in ops)
    assert low.outputs and low.output_types()[0].dtype.name == "f32"
    # each rewritten node names its f32 source node (the numerics lens matches on it)
    src = {n.out.name for n in g.nodes}
    assert all(n.loc.origin in src for n in low.nodes)
    for target in ("numpy", "cpu"):
        want = float(rlx.compile(g, X, Y, target=target)(X, Y))
        got = float(rlx.compile(low, X, Y, target=target)(X, Y))
        assert got == pytest.approx(want, rel=2e-2 if dtype == "bf16" else 2e-3)


def test_autocast_rejects_other_dtypes(params: dict) -> None:
    g = rlx.trace(lambda x: mlp_logits(params, x), X)
    with pytest.raises(QuantConfigError, match="f16 or bf16"):
        amp.autocast(g, "f64")


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_mixed_precision_training_tracks_f32(params: dict, dtype: str) -> None:
    ref = rlx.optim.compile_step(mlp_loss, rlx.optim.SGD(0.05), params, X, Y, target="cpu")
    step = amp.compile_amp_step(mlp_loss, rlx.optim.SGD(0.05), params, X, Y, dtype=dtype,
                                target="cpu")
    assert step.scale == (2.0 ** 15 if dtype == "f16" else 1.0)
    losses = []
    for _ in range(4):
        losses.append((float(ref(X, Y)), float(step(X, Y))))
    for want, got in losses:
        assert got == pytest.approx(want, rel=1e-2 if dtype == "bf16" else 2e-3)
    assert losses[-1][1] < losses[0][1]  # it trains
    assert step.skipped == 0
    w_ref = ref.params["fc1"]["weight"]
    w_amp = step.params["fc1"]["weight"]
    assert np.abs(np.asarray(w_amp) - np.asarray(w_ref)).max() < 1e-3


def test_loss_scaler_skips_a_non_finite_step(params: dict) -> None:
    step = amp.compile_amp_step(mlp_loss, rlx.optim.Adam(1e-3), params, X, Y, dtype="f16",
                                target="cpu")
    step(X, Y)
    before = [np.array(a) for a in step._p]
    state_before = [np.array(a) for a in step._s]
    scale = step.scale
    bad = X.copy()
    bad[3, 5] = np.inf
    step(bad, Y)
    assert not step.last_finite and step.skipped == 1 and step.scale == scale / 2
    for a, b in zip(before, step._p, strict=True):  # parameters untouched
        np.testing.assert_array_equal(a, np.asarray(b))
    for a, b in zip(state_before, step._s, strict=True):  # and Adam's moments and step count
        np.testing.assert_array_equal(a, np.asarray(b))
    step(X, Y)
    assert step.last_finite and step.skipped == 1
    assert any(np.any(a != np.asarray(b)) for a, b in zip(before, step._p, strict=True))


def test_scaler_schedule() -> None:
    s = amp.DynamicLossScaler(scale=8.0, growth_interval=3)
    for finite, want in ((True, 8.0), (True, 8.0), (True, 16.0), (False, 8.0), (True, 8.0)):
        s.update(finite)
        assert s.scale == want
    assert s.skipped == 1
    for _ in range(20):
        s.update(False)
    assert s.scale == s.min_scale


def test_numerics_lens_compares_the_autocast_graph_with_its_source(params: dict) -> None:
    from rlx_explorer.views.numerics import numerics_view

    g = rlx.trace(lambda x: mlp_logits(params, x), X[:4])
    low = amp.autocast(g, "bf16")
    v = numerics_view(low, (X[:4],), ("numpy",), reference=g)
    entries = [r for r in v["nodes"] if r["entry"]]
    assert entries and all(r["entry"] == "cast f32 -> bf16" for r in entries)
    out = v["nodes"][-1]
    assert "of the reference graph" in out["note"]
    assert 0 < out["errors"]["numpy"]["rel"] < 3e-2
