"""Quantization parameters on the host: scales and zero points from ranges, and the integer
(multiplier, shift) pair that stands for a real rescale factor in requantization."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from rlx_core.ir.ops.quant import INT_BOUNDS
from rlx_core.quant.errors import QuantAxisError, QuantConfigError

SCHEMES = ("symmetric", "asymmetric")


def qrange_of(dtype: str, narrow: bool = False, bits: int | None = None) -> tuple[int, int]:
    """(qmin, qmax) of ``dtype``; ``narrow`` drops the most negative code of a signed type
    (i8 in [-127, 127], so that -x is representable, as TFLite's weights are). ``bits``:
    codes of that many bits stored in ``dtype`` (u8 with 7 bits: [0, 127]; i8: [-64, 63]),
    the narrower codes the cpu's AVX2 int8 tiles add in 16 bits (docs/quantization.md)."""
    if dtype not in INT_BOUNDS or dtype == "i32":
        raise QuantConfigError(f"cannot quantize to {dtype!r}",
                               hint="use one of i8, u8, i4 (i16 for activations)")
    lo, hi = INT_BOUNDS[dtype]
    if bits is not None:
        width = (hi - lo + 1).bit_length() - 1
        if not 2 <= bits <= width:
            raise QuantConfigError(f"{bits}-bit codes do not fit {dtype}",
                                   hint=f"use 2 to {width} bits (8 for int8)")
        lo, hi = (0, 2**bits - 1) if lo == 0 else (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
    return (lo + 1, hi) if narrow and lo < 0 else (lo, hi)


def check_axis(axis: int | None, rank: int, what: str = "tensor") -> int | None:
    """``axis`` normalised into [0, rank), or QuantAxisError; None stays None (per tensor)."""
    if axis is None:
        return None
    if not -rank <= axis < rank:
        raise QuantAxisError(
            f"per-channel axis {axis} is out of range for a rank-{rank} {what}",
            hint=f"use an axis in [{-rank}, {rank - 1}] (0: a linear weight's output channels), "
                 "or axis=None for one scale per tensor")
    return axis % rank


@dataclass(frozen=True)
class QParams:
    """How one tensor is quantized: ``scale`` and ``zero_point`` are floats/ints per tensor or
    per-channel tuples along ``axis``; ``dtype`` is the integer type."""

    scale: Any  # np.ndarray of f32, shape () or (C,)
    zero_point: Any  # np.ndarray of i32, same shape
    dtype: str = "i8"
    axis: int | None = None
    bits: int | None = None  # codes narrower than dtype (qrange_of), None: all of it

    @property
    def qrange(self) -> tuple[int, int]:
        """(qmin, qmax) of the codes."""
        return qrange_of(self.dtype, False, self.bits)

    @property
    def per_channel(self) -> bool:
        return self.axis is not None


def qparams_from_range(lo: Any, hi: Any, dtype: str = "i8", scheme: str = "symmetric",
                       axis: int | None = None, narrow: bool = False,
                       bits: int | None = None) -> QParams:
    """Scale and zero point covering [lo, hi] (arrays per channel, or scalars).

    symmetric: ``scale = max(|lo|, |hi|) / qmax`` (zero point 0, or 128 for u8's middle);
    asymmetric: the range is widened to include 0, ``scale = (hi - lo) / (qmax - qmin)`` and
    ``zp = qmin - round(lo / scale)``. A zero range gets scale 1 (nothing to resolve).
    """
    import numpy as np

    if scheme not in SCHEMES:
        raise QuantConfigError(f"unknown scheme {scheme!r}", hint=f"use one of {SCHEMES}")
    qmin, qmax = qrange_of(dtype, narrow, bits)
    lo = np.minimum(np.asarray(lo, np.float64), 0.0)
    hi = np.maximum(np.asarray(hi, np.float64), 0.0)
    if not (np.all(np.isfinite(lo)) and np.all(np.isfinite(hi))):
        raise QuantConfigError("the observed range is not finite",
                               hint="check the calibration data for inf/NaN")
    if scheme == "symmetric":
        amax = np.maximum(-lo, hi)
        half = (qmax - qmin) / 2.0 if qmin >= 0 else float(qmax)
        scale = amax / half
        zp = np.full(scale.shape, (qmin + qmax + 1) // 2 if qmin >= 0 else 0)
    else:
        scale = (hi - lo) / float(qmax - qmin)
        safe = np.where(scale > 0, scale, 1.0)
        zp = np.clip(qmin - np.round(lo / safe), qmin, qmax)
    scale = np.where(scale > 0, scale, 1.0).astype(np.float32)
    return QParams(scale, zp.astype(np.int32), dtype, axis, bits)


def quantize_multiplier(real: float) -> tuple[int, int]:
    """TFLite's QuantizeMultiplier: ``real ~= multiplier * 2^(shift - 31)`` with the
    multiplier in [2^30, 2^31) (Q31), or (0, 0) for 0. ``shift`` > 0 is a left shift."""
    if not math.isfinite(real) or real < 0:
        raise QuantConfigError(f"cannot requantize by {real!r}",
                               hint="a rescale factor is scale_in * scale_w / scale_out > 0")
    if real == 0.0:
        return 0, 0
    mant, shift = math.frexp(real)  # real = mant * 2^shift, mant in [0.5, 1)
    q = int(math.floor(mant * (1 << 31) + 0.5))  # std::round: half away from zero (mant > 0)
    if q == 1 << 31:
        q //= 2
        shift += 1
    if shift < -31:
        return 0, 0
    if shift > 30:
        raise QuantConfigError(f"rescale factor {real!r} is too large for a Q31 multiplier",
                               hint="factors above 2^30 mean the output scale is far too small")
    return q, shift
