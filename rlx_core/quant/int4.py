"""Packed int4 weights with block scales (llama.cpp's Q4_0 / Q4_1 shape), on the host.

A weight (out, in) is cut along ``in`` into groups of ``group`` (32 or 128) values. Each group
has an f32 scale and, with ``zero_point=True`` (Q4_1-like), an integer zero point in [0, 15]
(codes unsigned 0..15); without (Q4_0-like) codes are signed in [-8, 7] around 0. Two codes
share a byte, the even column in the low nibble.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rlx_core.quant.errors import GroupSizeError, QuantConfigError

GROUPS = (32, 64, 128)


@dataclass(frozen=True)
class Int4Weight:
    """``packed`` u8 (out, in / 2), ``scale`` f32 (out, in / group), ``zero`` i8 like scale
    (all 0 without zero points: codes are then signed)."""

    packed: Any
    scale: Any
    zero: Any
    group: int
    shape: tuple[int, int]
    signed: bool

    def codes(self) -> Any:
        """The unpacked codes (out, in): signed [-8, 7] or unsigned [0, 15]."""
        import numpy as np

        lo = (self.packed & 0x0F).astype(np.int8)
        hi = (self.packed >> 4).astype(np.int8)
        q = np.stack([lo, hi], axis=-1).reshape(self.shape)
        return np.where(q >= 8, q - 16, q).astype(np.int8) if self.signed else q

    def dequantize(self) -> Any:
        import numpy as np

        n, k = self.shape
        q = self.codes().astype(np.float32).reshape(n, k // self.group, self.group)
        z = self.zero.astype(np.float32)[..., None]
        return ((q - z) * self.scale[..., None]).reshape(n, k)


SEARCH_STEPS = 20  # candidate ranges per group the search tries (besides the min-max one)


def _search(blocks: Any, zero_point: bool) -> tuple[Any, Any, Any]:
    """Per group, (scale, zero, codes) with the least squared round-trip error among shrunken
    ranges: the min-max range spends its 16 levels on the one largest weight, while a
    slightly clipped one rounds the many small weights finer. Symmetric: codes from the scale
    ``peak / -8`` times ``1 - i / (4 * SEARCH_STEPS)``, then the least-squares scale for those
    codes, ``sum(w q) / sum(q q)`` (llama.cpp's ``make_qx_quants`` searches the same way);
    with zero points: both ends of [lo, hi] shrunk alike, the zero an integer code, then the
    least-squares scale for those codes, ``sum(w d) / sum(d d)`` with ``d = q - zero``."""
    import numpy as np

    best_err = np.full(blocks.shape[:-1], np.inf, np.float64)
    best_s = np.ones(blocks.shape[:-1], np.float32)
    best_z = np.zeros(blocks.shape[:-1], np.float32)
    best_q = np.zeros(blocks.shape, np.float32)
    lo0, hi0 = np.minimum(blocks.min(axis=-1), 0.0), np.maximum(blocks.max(axis=-1), 0.0)
    idx = np.argmax(np.abs(blocks), axis=-1)
    peak = np.take_along_axis(blocks, idx[..., None], axis=-1)[..., 0]
    for i in range(SEARCH_STEPS + 1):  # i = 0: the min-max range (wins ties)
        f = np.float32(1.0 - i / (4.0 * SEARCH_STEPS))
        if zero_point:
            lo, hi = lo0 * f, hi0 * f
            s = np.where(hi > lo, (hi - lo) / 15.0, 1.0).astype(np.float32)
            z = np.clip(np.round(-lo / s), 0, 15).astype(np.float32)
            q = np.clip(np.round(blocks / s[..., None]) + z[..., None], 0, 15)
            d = q - z[..., None]
            dd = (d * d).sum(axis=-1)
            s_ls = np.where(dd > 0, (blocks * d).sum(axis=-1) / np.maximum(dd, 1), s)
            s = np.where(s_ls > 0, s_ls, s).astype(np.float32)
        else:
            s0 = np.where(peak != 0, peak * f / -8.0, 1.0).astype(np.float32)
            z = np.zeros_like(s0)
            q = np.clip(np.round(blocks / s0[..., None]), -8, 7)
            qq = (q * q).sum(axis=-1)
            s = np.where(qq > 0, (blocks * q).sum(axis=-1) / np.maximum(qq, 1), s0)
            s = np.where(s != 0, s, s0).astype(np.float32)
        err = (((q - z[..., None]) * s[..., None] - blocks) ** 2).sum(axis=-1)
        better = err < best_err
        best_err = np.where(better, err, best_err)
        best_s, best_z = np.where(better, s, best_s), np.where(better, z, best_z)
        best_q = np.where(better[..., None], q, best_q)
    return best_s.astype(np.float32), best_z, best_q


def quantize_int4(w: Any, group: int = 32, zero_point: bool = False,
                  search: bool = False) -> Int4Weight:
    """Quantize an (out, in) f32 weight to packed int4 with one scale per ``group`` inputs.
    ``search``: each group's range is the one with the least round-trip error (``_search``)
    rather than its min-max range."""
    import numpy as np

    w = np.asarray(w, np.float32)
    if w.ndim != 2:
        raise QuantConfigError(f"int4 weights are 2-D (out, in), got shape {list(w.shape)}",
                               hint="reshape the weight to (out_features, in_features)")
    n, k = w.shape
    if group <= 0 or k % group or group % 2:
        raise GroupSizeError(
            f"int4 group size {group} does not divide the input dimension {k}",
            hint=f"use a group that divides {k} (e.g. {', '.join(str(g) for g in GROUPS if k % g == 0) or 'pad the weight to a multiple of 32'})")
    blocks = w.reshape(n, k // group, group)
    if search:
        scale, zf, q = _search(blocks, zero_point)
        zero = zf.astype(np.int8)
    elif zero_point:  # Q4_1: [min, max] onto 0..15
        lo = np.minimum(blocks.min(axis=-1), 0.0)
        hi = np.maximum(blocks.max(axis=-1), 0.0)
        scale = np.where(hi > lo, (hi - lo) / 15.0, 1.0).astype(np.float32)
        zero = np.clip(np.round(-lo / scale), 0, 15).astype(np.int8)
        q = np.clip(np.round(blocks / scale[..., None]) + zero[..., None], 0, 15)
    else:  # Q4_0: symmetric, the largest magnitude onto -8 (as llama.cpp: scale = max / -8)
        idx = np.argmax(np.abs(blocks), axis=-1)
        peak = np.take_along_axis(blocks, idx[..., None], axis=-1)[..., 0]
        scale = np.where(peak != 0, peak / -8.0, 1.0).astype(np.float32)
        zero = np.zeros(scale.shape, np.int8)
        q = np.clip(np.round(blocks / scale[..., None]), -8, 7)
    codes = (q.astype(np.int16).reshape(n, k) & 0x0F).astype(np.uint8)
    packed = (codes[:, 0::2] | (codes[:, 1::2] << 4)).astype(np.uint8)
    return Int4Weight(packed, scale, zero, group, (n, k), not zero_point)
