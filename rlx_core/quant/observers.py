"""Observers: they watch a tensor's values during calibration and choose its QParams.

Four methods, each per tensor (``axis=None``) or per channel (``axis``), symmetric or
asymmetric, for i8, u8, i4 (and i16):

- ``minmax``: the observed [min, max].
- ``percentile``: the ``percentile``-th percentile of |x| (symmetric) or the two tails
  (asymmetric), which ignores rare outliers.
- ``mse``: the clipping range, among ``GRID`` shrinkings of the min-max one, whose
  quantize-dequantize round trip has the least mean squared error on the observed values.
- ``entropy``: TensorRT's KL calibration: the threshold ``t`` over a 2048-bin histogram of
  |x| whose reference distribution (outliers folded into the last bin) and its quantized
  version (``qmax + 1`` levels) have the least KL divergence. Asymmetric ranges are the
  observed ones clipped to [-t, t].

Percentile, MSE and entropy keep a bounded sample of the values (``max_samples`` per
channel, taken evenly from every batch), so calibrating over many batches stays small.
"""

from __future__ import annotations

from typing import Any

from rlx_core.quant.errors import CalibrationError, QuantConfigError
from rlx_core.quant.params import SCHEMES, QParams, check_axis, qparams_from_range, qrange_of

METHODS = ("minmax", "percentile", "mse", "entropy")
GRID = 100  # candidate clipping ranges the MSE search tries: (i / GRID) * range, i in 1..GRID
BINS = 2048  # entropy histogram bins


class Observer:
    """Collects statistics of one tensor; ``qparams()`` turns them into scale and zero point."""

    method = "minmax"

    def __init__(self, dtype: str = "i8", scheme: str = "symmetric", axis: int | None = None,
                 narrow: bool = False, max_samples: int = 1 << 18, bits: int | None = None):
        if scheme not in SCHEMES:
            raise QuantConfigError(f"unknown scheme {scheme!r}", hint=f"use one of {SCHEMES}")
        qrange_of(dtype, narrow, bits)  # validates the dtype and the code width
        self.dtype, self.scheme, self.axis, self.narrow = dtype, scheme, axis, narrow
        self.bits = bits
        self.max_samples = max_samples
        self.batches = 0
        self._lo: Any = None
        self._hi: Any = None
        self._samples: list[Any] = []
        self._kept = 0

    # ---- collecting ------------------------------------------------------------------------
    def _rows(self, x: Any) -> Any:
        """x as (channels, values): one row per channel, or one row for a per-tensor observer."""
        import numpy as np

        x = np.asarray(x, dtype=np.float32)
        if self.axis is None:
            return x.reshape(1, -1)
        ax = check_axis(self.axis, x.ndim)
        return np.moveaxis(x, ax, 0).reshape(x.shape[ax], -1)

    def observe(self, x: Any) -> None:
        """Record one batch of values."""
        import numpy as np

        rows = self._rows(x)
        if rows.size == 0:
            return
        lo, hi = rows.min(axis=1), rows.max(axis=1)
        if self._lo is not None and lo.shape != self._lo.shape:
            raise QuantConfigError(
                f"the observed tensor changed its channel count ({self._lo.shape[0]} -> "
                f"{lo.shape[0]})", hint="use one observer per tensor")
        self._lo = lo if self._lo is None else np.minimum(self._lo, lo)
        self._hi = hi if self._hi is None else np.maximum(self._hi, hi)
        self.batches += 1
        if self.method != "minmax":
            self._keep(rows)

    def _keep(self, rows: Any) -> None:
        import numpy as np

        budget = max(1, self.max_samples // 16)  # per batch, so later batches still count
        take = rows if rows.shape[1] <= budget else rows[:, np.linspace(
            0, rows.shape[1] - 1, budget).astype(np.int64)]
        self._samples.append(take)
        self._kept += take.shape[1]
        if self._kept > 2 * self.max_samples:  # thin out evenly, keep the bound
            allv = np.concatenate(self._samples, axis=1)
            self._samples = [allv[:, ::2]]
            self._kept = self._samples[0].shape[1]

    def samples(self) -> Any:
        import numpy as np

        return np.concatenate(self._samples, axis=1)

    # ---- choosing --------------------------------------------------------------------------
    def _need_data(self) -> None:
        if self._lo is None:
            raise CalibrationError(
                f"the {self.method} observer saw no data",
                hint="pass a non-empty calibration iterator (a few hundred samples is typical)")

    def range(self) -> tuple[Any, Any]:
        """(lo, hi) per channel that qparams() quantizes; subclasses clip it."""
        self._need_data()
        return self._lo, self._hi

    def qparams(self) -> QParams:
        import numpy as np

        lo, hi = self.range()
        if self.axis is None:
            lo, hi = np.asarray(lo).reshape(()), np.asarray(hi).reshape(())
        return qparams_from_range(lo, hi, self.dtype, self.scheme, self.axis, self.narrow,
                                  self.bits)


class MinMaxObserver(Observer):
    """The calibration range from the smallest and largest values seen."""

    method = "minmax"


class PercentileObserver(Observer):
    """The calibration range clipped at a percentile of the values seen (of their magnitudes
    when symmetric), so rare outliers saturate instead of widening the scale."""

    method = "percentile"

    def __init__(self, *args: Any, percentile: float = 99.99, **kw: Any):
        super().__init__(*args, **kw)
        if not 50.0 < percentile <= 100.0:
            raise QuantConfigError(f"percentile {percentile} is out of (50, 100]",
                                   hint="99.9 to 99.999 is typical")
        self.percentile = percentile

    def range(self) -> tuple[Any, Any]:
        import numpy as np

        self._need_data()
        s = self.samples()
        if self.scheme == "symmetric":
            t = np.percentile(np.abs(s), self.percentile, axis=1)
            return -t, t
        return (np.percentile(s, 100.0 - self.percentile, axis=1),
                np.percentile(s, self.percentile, axis=1))


def roundtrip_mse(s: Any, lo: Any, hi: Any, dtype: str, scheme: str, narrow: bool,
                  bits: int | None = None) -> Any:
    """Mean squared quantize-dequantize error of each row of ``s`` (channels x values) under
    the per-channel range [lo, hi]."""
    import numpy as np

    p = qparams_from_range(lo, hi, dtype, scheme, None, narrow, bits)
    qmin, qmax = qrange_of(dtype, narrow, bits)
    scale = p.scale.astype(np.float32)[:, None]
    zp = p.zero_point.astype(np.float32)[:, None]
    q = np.clip(np.round(s / scale) + zp, qmin, qmax)
    return (((q - zp) * scale - s) ** 2).mean(axis=1)


class MSEObserver(Observer):
    """The calibration range whose quantize-dequantize round trip has the least mean squared
    error over the values seen."""

    method = "mse"

    def range(self) -> tuple[Any, Any]:
        import numpy as np

        self._need_data()
        s = self.samples()  # (C, n)
        lo, hi = np.minimum(self._lo, 0.0), np.maximum(self._hi, 0.0)
        if self.scheme == "symmetric":
            hi = np.maximum(-lo, hi)
            lo = -hi
        best_err = np.full(s.shape[0], np.inf)
        best_lo, best_hi = lo.copy(), hi.copy()
        for i in range(1, GRID + 1):  # the first (smallest) range wins ties
            f = i / GRID
            err = roundtrip_mse(s, lo * f, hi * f, self.dtype, self.scheme, self.narrow,
                                self.bits)
            better = err < best_err
            best_err = np.where(better, err, best_err)
            best_lo = np.where(better, lo * f, best_lo)
            best_hi = np.where(better, hi * f, best_hi)
        return best_lo, best_hi


def kl_threshold(hist: Any, edges_max: float, levels: int) -> float:
    """TensorRT's entropy calibration on a histogram of |x| over [0, edges_max]: the
    threshold whose clipped reference and ``levels``-level quantized distributions have the
    least KL divergence."""
    import numpy as np

    hist = np.asarray(hist, np.float64)
    nbins = hist.size
    width = edges_max / nbins
    best_kl, best_i = np.inf, nbins
    for i in range(levels, nbins + 1):
        ref = hist[:i].copy()
        ref[i - 1] += hist[i:].sum()  # outliers folded into the last kept bin
        nonzero = hist[:i] != 0
        # merge the i bins into `levels` groups, spread each group's mass over its nonzero bins
        groups = np.floor(np.arange(i) * levels / i).astype(np.int64)
        mass = np.bincount(groups, weights=hist[:i], minlength=levels)
        count = np.bincount(groups, weights=nonzero.astype(np.float64), minlength=levels)
        q = np.where(nonzero, mass[groups] / np.maximum(count[groups], 1), 0.0)
        p_sum, q_sum = ref.sum(), q.sum()
        if p_sum == 0 or q_sum == 0:
            continue
        p, qn = ref / p_sum, q / q_sum
        mask = p > 0
        if np.any(qn[mask] == 0):
            kl = np.inf
        else:
            kl = float(np.sum(p[mask] * np.log(p[mask] / qn[mask])))
        if kl < best_kl:
            best_kl, best_i = kl, i
    return (best_i + 0.5) * width


class EntropyObserver(Observer):
    """The calibration range from the KL-divergence threshold of the magnitudes' histogram
    (kl_threshold), per channel."""

    method = "entropy"

    def range(self) -> tuple[Any, Any]:
        import numpy as np

        self._need_data()
        s = np.abs(self.samples())
        _, qmax = qrange_of(self.dtype, self.narrow, self.bits)
        levels = qmax + 1 if self.scheme == "symmetric" else (
            qmax - qrange_of(self.dtype, False, self.bits)[0] + 1) // 2
        ts = []
        for row in s:
            top = float(row.max())
            if top == 0.0:
                ts.append(0.0)
                continue
            hist, _ = np.histogram(row, bins=BINS, range=(0.0, top))
            ts.append(min(kl_threshold(hist, top, levels), top))
        t = np.asarray(ts)
        if self.scheme == "symmetric":
            return -t, t
        return np.maximum(self._lo, -t), np.minimum(self._hi, t)


OBSERVERS: dict[str, type[Observer]] = {"minmax": MinMaxObserver,
                                        "percentile": PercentileObserver, "mse": MSEObserver,
                                        "entropy": EntropyObserver}


def make_observer(method: str = "minmax", **kw: Any) -> Observer:
    """An observer by method name (``minmax``, ``percentile``, ``mse``, ``entropy``)."""
    if method not in OBSERVERS:
        raise QuantConfigError(f"unknown calibration method {method!r}",
                               hint=f"use one of {', '.join(METHODS)}")
    return OBSERVERS[method](**kw)
