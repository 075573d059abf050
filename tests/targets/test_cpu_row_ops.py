"""Row kernels (rlx_core/targets/c_common/row_ops.py): the CPU keeps softmax, log_softmax,
layer_norm and rms_norm whole in f32 and f64. Each is checked against float64 numpy, against
the same graph compiled through the common-IR decomposition (force-common), on rows and inner
axes, on shapes big enough that the team splits the rows, and on NaN and infinite rows."""

from __future__ import annotations

import numpy as np
import pytest

import rlx_core as rlx
from rlx_core.targets.cpu.target import CpuTarget
from tests.targets.checks import impl_set

cpu_ok, cpu_why = CpuTarget().available()
pytestmark = pytest.mark.skipif(not cpu_ok, reason=f"cpu target unavailable: {cpu_why}")

LABEL = {"softmax": "row-softmax", "log_softmax": "row-log-softmax",
         "layer_norm": "row-layer-norm", "rms_norm": "row-rms-norm"}


def _ref(op: str, x: np.ndarray, axis: int, w=None, b=None, eps: float = 1e-5) -> np.ndarray:
    x = x.astype(np.float64)
    if op in ("softmax", "log_softmax"):
        s = x - x.max(axis=axis, keepdims=True)
        t = np.exp(s).sum(axis=axis, keepdims=True)
        return s - np.log(t) if op == "log_softmax" else np.exp(s) / t
    if op == "layer_norm":
        c = x - x.mean(axis=-1, keepdims=True)
        y = c / np.sqrt((c * c).mean(axis=-1, keepdims=True) + eps)
    else:
        y = x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + eps)
    return y * w + (b if b is not None else 0.0)


def _fn(op: str, axis: int, w=None, b=None, eps: float = 1e-5):
    def f(x):
        if op in ("softmax", "log_softmax"):
            return getattr(rlx.nn, op)(x, axis=axis)
        if op == "layer_norm":
            return rlx.nn.layer_norm(x, rlx.param(w, "w"), rlx.param(b, "b"), eps=eps)
        return rlx.nn.rms_norm(x, rlx.param(w, "w"), eps=eps)
    return f


CASES = [  # (op, shape, axis): rows, an inner axis, team-sized, and a 1-long row
    ("softmax", (6, 128), -1), ("softmax", (3, 200, 5), 1), ("softmax", (64, 12, 128), -1),
    ("softmax", (7, 1), -1), ("log_softmax", (5, 33), -1), ("log_softmax", (4, 9, 3), 0),
    ("log_softmax", (512, 300), 1), ("layer_norm", (10, 384), -1),
    ("layer_norm", (256, 257), -1), ("rms_norm", (9, 64), -1), ("rms_norm", (300, 512), -1),
    # rows narrower than row_ops.LANES: sixteen rows side by side, a shorter last block
    ("log_softmax", (128, 10), -1), ("softmax", (37, 10), -1), ("softmax", (16, 15), -1),
    ("log_softmax", (4099, 3), -1),
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("op,shape,axis", CASES, ids=[f"{c[0]}-{'x'.join(map(str, c[1]))}"
                                                      for c in CASES])
def test_row_op_is_native_and_matches_numpy(op: str, shape: tuple, axis: int,
                                            dtype: str) -> None:
    rng = np.random.default_rng(len(shape) * 100 + shape[-1])
    x = (rng.standard_normal(shape) * 3).astype(dtype)
    w = rng.standard_normal(shape[-1]).astype(dtype)
    b = rng.standard_normal(shape[-1]).astype(dtype)
    f = _fn(op, axis, w, b)
    exe = rlx.compile(f, x, target="cpu", record=False)
    assert LABEL[op] in impl_set(exe), impl_set(exe)
    got = np.asarray(exe(x))
    tol = 2e-6 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(got, _ref(op, x, axis, w, b if op == "layer_norm" else None),
                               rtol=tol, atol=tol)
    # the common-IR decomposition computes the same steps (its sums may add in another
    # order): they agree to a few ulps
    common = rlx.compile(f, x, target="cpu", policy="force-common", record=False)
    assert LABEL[op] not in impl_set(common)
    ulps = 16 * np.finfo(dtype).eps
    np.testing.assert_allclose(got, np.asarray(common(x)), rtol=ulps, atol=ulps)


@pytest.mark.parametrize("width", [40, 10])
@pytest.mark.parametrize("op", ["softmax", "log_softmax", "layer_norm", "rms_norm"])
def test_nan_and_infinite_rows_propagate_as_in_the_decomposition(op: str, width: int) -> None:
    x = np.random.default_rng(3).standard_normal((6, width)).astype(np.float32)
    x[1, 5] = np.nan
    x[2, :] = -np.inf
    x[3, 7] = np.inf
    x[4, :] = np.finfo(np.float32).min  # a fully masked attention row
    w, b = np.ones(width, np.float32), np.zeros(width, np.float32)
    f = _fn(op, -1, w, b)
    got = np.asarray(rlx.compile(f, x, target="cpu", record=False)(x))
    want = np.asarray(rlx.compile(f, x, target="cpu", policy="force-common", record=False)(x))
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    ok = ~np.isnan(want)
    np.testing.assert_allclose(got[ok], want[ok], rtol=1e-6, atol=1e-6)
    assert np.isnan(got[1]).all()  # one NaN poisons its row, and only its row
    assert not np.isnan(got[0]).any() and not np.isnan(got[5]).any()
    if op == "softmax":
        np.testing.assert_allclose(got[4], 1 / width, rtol=1e-6)  # uniform, as the reference


def test_a_cross_entropy_training_step_keeps_the_row_log_softmax() -> None:
    """log_softmax stays whole through differentiation (autodiff/rules.HIR_VJP_RULES), so the
    MLP's training step runs the row kernel forward, and its parameters after a few steps
    are the numpy target's."""
    from rlx_core.models.mlp import init_mlp, mlp_loss
    from rlx_core.optim import SGD, compile_step

    rng = np.random.default_rng(4)
    x = rng.standard_normal((64, 20)).astype(np.float32)
    y = rng.integers(0, 10, 64).astype(np.int32)
    steps = {t: compile_step(mlp_loss, SGD(0.1), init_mlp((20, 16, 10), seed=1), x, y, target=t)
             for t in ("cpu", "numpy")}
    decided = [d for d in steps["cpu"].executable.trace.decisions if d["op"] == "log_softmax"]
    assert [d["route"] for d in decided] == ["native"], decided
    for _ in range(3):
        losses = {t: s(x, y) for t, s in steps.items()}
    assert abs(losses["cpu"] - losses["numpy"]) < 1e-5
    got, want = steps["cpu"].params, steps["numpy"].params
    for layer in want:
        for name in want[layer]:
            np.testing.assert_allclose(np.asarray(got[layer][name]),
                                       np.asarray(want[layer][name]), rtol=1e-5, atol=1e-6)


def test_attention_reaches_the_row_softmax() -> None:
    """attention's decomposition emits the HIR softmax, which the CPU keeps whole (in f64:
    f32 attention has a kernel of its own, cpu/attention.py)."""
    rng = np.random.default_rng(5)
    q, k, v = (rng.standard_normal((2, 3, 16, 8)) for _ in range(3))
    exe = rlx.compile(lambda a, b, c: rlx.nn.attention(a, b, c), q, k, v, target="cpu",
                      record=False)
    assert "row-softmax" in impl_set(exe)
    s = np.einsum("bhqd,bhkd->bhqk", q, k) / np.sqrt(8)
    p = np.exp(s - s.max(-1, keepdims=True))
    want = np.einsum("bhqk,bhkd->bhqd", p / p.sum(-1, keepdims=True), v)
    np.testing.assert_allclose(np.asarray(exe(q, k, v)), want, rtol=1e-12, atol=1e-12)


def test_other_dtypes_keep_the_common_ir_route() -> None:
    """f16 is not claimed: the dispatch record says native was refused and why."""
    x = np.random.default_rng(1).standard_normal((4, 8)).astype(np.float16)
    exe = rlx.compile(lambda a: rlx.nn.softmax(a), x, target="cpu")
    assert "row-softmax" not in impl_set(exe)
    d = next(d for d in exe.trace.decisions if d["op"] == "softmax")
    assert d["route"] == "common-IR" and d["rejected"][0]["route"] == "native"
    why = d["rejected"][0]["reasons"][0]
    assert "not f16" in why["message"] and "f32" in why["hint"]
    got = np.asarray(exe(x)).astype(np.float64)
    np.testing.assert_allclose(got, _ref("softmax", x, -1), rtol=2e-3, atol=2e-3)
