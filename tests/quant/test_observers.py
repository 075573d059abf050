"""Observers and calibration methods against hand-computed ranges and scales, and their
typed errors."""

from __future__ import annotations

import numpy as np
import pytest

from rlx_core import quant as Q
from rlx_core.quant.int4 import quantize_int4
from rlx_core.quant.observers import (
    EntropyObserver,
    MinMaxObserver,
    MSEObserver,
    PercentileObserver,
    kl_threshold,
    make_observer,
    roundtrip_mse,
)


def test_minmax_per_tensor_and_per_channel_hand_values():
    o = MinMaxObserver("i8", "symmetric")
    o.observe(np.array([[-1.0, 0.5], [2.0, -0.25]], np.float32))
    o.observe(np.array([[-3.0, 0.0]], np.float32))
    p = o.qparams()
    assert float(p.scale) == np.float32(3.0 / 127) and int(p.zero_point) == 0
    o = MinMaxObserver("u8", "asymmetric", axis=1)
    o.observe(np.array([[-1.0, 0.5], [2.0, 2.5]], np.float32))
    p = o.qparams()
    # column 0: [-1, 2] -> scale 3/255, zp round(1 / (3/255)) = 85; column 1: [0, 2.5] -> zp 0
    assert p.scale.tolist() == [np.float32(3.0 / 255), np.float32(2.5 / 255)]
    assert p.zero_point.tolist() == [85, 0]


def test_percentile_hand_values():
    x = np.arange(1, 1001, dtype=np.float32)  # 1..1000
    o = PercentileObserver("i8", "symmetric", percentile=99.0)
    o.observe(x)
    lo, hi = o.range()
    assert hi == pytest.approx(np.percentile(x, 99.0)) == pytest.approx(990.01)
    o = PercentileObserver("u8", "asymmetric", percentile=90.0, axis=0)
    o.observe(np.stack([x, -x]))
    lo, hi = o.range()
    assert lo.tolist() == pytest.approx([100.9, -900.1]) and hi.tolist() == pytest.approx(
        [900.1, -100.9])


def test_mse_clips_a_heavy_tail_and_beats_minmax():
    rng = np.random.default_rng(0)
    x = rng.laplace(size=12000).astype(np.float32)  # heavy tails: clipping them pays (all kept)
    mse, mm = MSEObserver("i8"), MinMaxObserver("i8")
    mse.observe(x)
    mm.observe(x)
    amax = float(np.abs(x).max())
    lo, hi = mse.range()
    assert float(hi[0]) < amax and float(lo[0]) == -float(hi[0])

    def err(lo, hi):
        return float(roundtrip_mse(x[None], np.atleast_1d(lo), np.atleast_1d(hi), "i8",
                                   "symmetric", False)[0])

    assert err(lo, hi) < err(*mm.range())
    # and it is the best of its grid: brute force over the same candidates
    assert err(lo, hi) == pytest.approx(min(err(-amax * i / 100, amax * i / 100)
                                            for i in range(1, 101)))


def test_entropy_threshold_hand_values():
    # all mass in the first bins: any threshold past the data loses nothing, the first one
    # considered (levels bins) is chosen
    hist = np.zeros(2048)
    hist[:10] = 100
    assert kl_threshold(hist, 2048.0, 128) == pytest.approx(128.5)
    rng = np.random.default_rng(1)
    x = rng.normal(size=50000).astype(np.float32)
    x[:3] = [60.0, -55.0, 58.0]  # outliers far out
    o = EntropyObserver("i8")
    o.observe(x)
    lo, hi = o.range()
    assert 2.0 < float(hi[0]) < 20.0 and float(lo[0]) == -float(hi[0])


@pytest.mark.parametrize("method", ["minmax", "percentile", "mse", "entropy"])
def test_every_method_per_channel_and_asymmetric(method):
    rng = np.random.default_rng(2)
    w = (rng.normal(size=(6, 200)) * np.arange(1, 7)[:, None]).astype(np.float32)
    o = make_observer(method, dtype="i8", scheme="asymmetric", axis=0)
    o.observe(w)
    p = o.qparams()
    assert p.scale.shape == (6,) and np.all(p.scale > 0)
    assert p.scale[5] > 2 * p.scale[0]  # the wider channel gets the larger scale
    lo, hi = Q.params.qrange_of("i8")
    assert np.all((p.zero_point >= lo) & (p.zero_point <= hi))


def test_bad_input_is_typed_with_a_hint():
    with pytest.raises(Q.CalibrationError) as e:
        MSEObserver().qparams()
    assert e.value.hint
    with pytest.raises(Q.QuantAxisError):
        MinMaxObserver(axis=-3).observe(np.zeros((2, 3)))
    with pytest.raises(Q.GroupSizeError) as e:
        quantize_int4(np.zeros((2, 96)), group=128)
    assert "32" in e.value.hint
    with pytest.raises(Q.QuantConfigError):
        MinMaxObserver(scheme="affine")
    with pytest.raises(Q.QuantConfigError):
        PercentileObserver(percentile=20)


def test_int4_roundtrip_hand_values():
    w = np.array([[-8.0, 4.0] * 16, [1.0, 2.0] * 16], np.float32)  # (2, 32)
    q = quantize_int4(w, group=32)
    assert q.packed.shape == (2, 16) and q.scale.tolist() == [[1.0], [-0.25]]
    assert np.array_equal(q.dequantize(), w)  # every value is a code times its scale
    q1 = quantize_int4(np.abs(w) + 1.0, group=32, zero_point=True)
    assert q1.zero.tolist() == [[0], [0]] and np.abs(q1.dequantize() - (np.abs(w) + 1)).max() \
        <= q1.scale.max() / 2 + 1e-6


def test_int4_range_search_never_worse_than_min_max():
    """search=True picks, per group, the range (and least-squares scale) with the least
    round-trip error: never above min-max's, below it on heavy-tailed weights, and exact
    values stay exact."""
    rng = np.random.default_rng(4)
    w = (rng.standard_t(4, (16, 128)) * 0.05).astype(np.float32)
    for zp in (False, True):
        plain, searched = quantize_int4(w, 32, zp), quantize_int4(w, 32, zp, search=True)
        e0 = ((plain.dequantize() - w) ** 2).reshape(16, 4, 32).sum(-1)
        e1 = ((searched.dequantize() - w) ** 2).reshape(16, 4, 32).sum(-1)
        assert (e1 <= e0 * (1 + 1e-5) + 1e-12).all() and e1.sum() < 0.97 * e0.sum()
        assert searched.packed.shape == plain.packed.shape
    exact = np.array([[-8.0, 4.0] * 16, [1.0, 2.0] * 16], np.float32)
    assert np.array_equal(quantize_int4(exact, 32, search=True).dequantize(), exact)
