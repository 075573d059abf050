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


def quantize_int4(w: Any, group: int = 32, zero_point: bool = False) -> Int4Weight:
    """Quantize an (out, in) f32 weight to packed int4 with one scale per ``group`` inputs."""
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
    if zero_point:  # Q4_1: [min, max] onto 0..15
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
