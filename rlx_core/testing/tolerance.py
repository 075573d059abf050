"""Compare a target's output with the reference: bit for bit where the cone is exact, within the
first-order bound of ``reference`` elsewhere; NaN must match NaN, an infinity an infinity of the
same sign (or a finite value within the bound of overflowing)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rlx_core.ir import dtypes as dt
from rlx_core.targets.numpy_ref.semantics import host_dtype
from rlx_core.testing.reference import ConeStats


@dataclass(frozen=True)
class Verdict:
    """A target's output against the reference: ok, or the worst element's description."""

    ok: bool
    detail: str = ""  # the worst element, when not ok
    index: tuple[int, ...] = ()


def bound(want: np.ndarray, stats: ConeStats) -> np.ndarray:
    """Allowed |got - want| per element (0 for an exact cone)."""
    if stats.exact:
        return np.zeros(want.shape)
    a = np.abs(want.astype(np.complex128 if want.dtype.kind == "c" else np.float64))
    a = np.where(np.isfinite(a), a, 0.0)
    with np.errstate(over="ignore"):
        # relative part (eps per ulp, amplified by cond) plus the absolute error of each
        # rounding that lands in the subnormal range (at most the smallest subnormal)
        k = max(stats.ulps, 1.0) * stats.cond
        return k * (stats.eps * (a + stats.scale) + stats.tiny)


def _float_verdict(got: np.ndarray, want: np.ndarray, stats: ConeStats, d: dt.DType) -> Verdict:
    g = got.astype(np.float64)
    w = want.astype(np.float64)
    tol = bound(w, stats)
    top = float(np.finfo(np.float32 if d in (dt.bf16, dt.c64) else host_dtype(d)).max)
    gn, wn = np.isnan(g), np.isnan(w)
    with np.errstate(all="ignore"):
        diff = np.abs(g - w)
        close = (gn & wn) | (g == w) | (np.isfinite(g) & np.isfinite(w) & (diff <= tol))
        # one side overflowed: the other must be within its own bound of the threshold
        tol_g = bound(g, stats)
        over = (~gn & ~wn & (np.isinf(w) & ~np.isinf(g) & (np.sign(g) == np.sign(w))
                             & (np.abs(g) + tol_g >= top))
                | (np.isinf(g) & ~np.isinf(w) & (np.sign(g) == np.sign(w))
                   & (np.abs(w) + tol >= top)))
    bad = ~(close | over)
    if not bad.any():
        return Verdict(True)
    score = np.where(bad, np.where(np.isfinite(diff), diff, np.inf), -1.0)
    i = np.unravel_index(int(np.argmax(score)), bad.shape)
    return Verdict(False, f"at {list(i)}: got {g[i]!r}, want {w[i]!r} (bound {tol[i]:.3g}; "
                          f"{int(bad.sum())} of {bad.size} elements differ)", tuple(int(k) for k in i))


def verdict(got: object, want: np.ndarray, stats: ConeStats, d: dt.DType) -> Verdict:
    """Is ``got`` an acceptable result for the reference value ``want`` of dtype ``d``?"""
    g = np.asarray(got)
    if g.shape != want.shape:
        return Verdict(False, f"shape {list(g.shape)} != {list(want.shape)}")
    if g.size == 0:
        return Verdict(True)
    if not d.is_inexact:
        if g.dtype != want.dtype:
            g = g.astype(want.dtype)
        bad = g != want
        if not bad.any():
            return Verdict(True)
        i = tuple(int(k) for k in np.argwhere(bad)[0])
        return Verdict(False, f"at {list(i)}: got {g[i]!r}, want {want[i]!r} "
                              f"({int(bad.sum())} of {bad.size} elements differ)", i)
    if d.is_complex:
        for part in (np.real, np.imag):
            v = _float_verdict(part(g), part(want), stats, dt.f32)
            if not v.ok:
                return v
        return Verdict(True)
    return _float_verdict(g, want, stats, d)
