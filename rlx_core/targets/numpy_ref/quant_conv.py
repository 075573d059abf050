"""The numpy int8 reference of the NHWC convolution and pooling kernels (cortex-m csrc/rlx_conv.h).

Integer rules, CMSIS-NN / TFLite style:

- ``int_conv2d_nhwc`` (weights OHWI) and ``int_depthwise_nhwc`` (weights HWC, channel
  multiplier 1) give the exact i32 sums ``sum (x - x_zp)(w - w_zp) + bias`` over the taps
  inside the image (a padded tap holds the zero point, so it adds nothing), wrapped to i32;
- ``max_pool_nhwc`` is the largest tap inside the image;
- ``avg_pool_nhwc`` is TFLite's integer average: the sum of the taps inside the image divided
  by their count, rounding half away from zero, clamped to [lo, hi].

A window wholly in the padding gives ``lo`` for pooling and ``bias`` for convolution.
"""

from __future__ import annotations

from typing import Any

Array = Any


def _windows(x: Array, kh: int, kw: int, stride: tuple[int, int],
             pad: tuple[int, int], fill: int) -> tuple[Array, Array]:
    """(taps (N, OH, OW, KH, KW, C) of x padded with ``fill``, inside mask (OH, OW, KH, KW))."""
    import numpy as np

    n, h, w, c = x.shape
    (sh, sw), (ph, pw) = stride, pad
    oh, ow = (h + 2 * ph - kh) // sh + 1, (w + 2 * pw - kw) // sw + 1
    xp = np.full((n, h + 2 * ph, w + 2 * pw, c), fill, np.int64)
    xp[:, ph:ph + h, pw:pw + w] = x
    inside = np.zeros((h + 2 * ph, w + 2 * pw), bool)
    inside[ph:ph + h, pw:pw + w] = True
    taps = np.empty((n, oh, ow, kh, kw, c), np.int64)
    mask = np.empty((oh, ow, kh, kw), bool)
    for ky in range(kh):
        for kx in range(kw):
            rows = slice(ky, ky + sh * (oh - 1) + 1, sh)
            cols = slice(kx, kx + sw * (ow - 1) + 1, sw)
            taps[:, :, :, ky, kx] = xp[:, rows, cols]
            mask[:, :, ky, kx] = inside[rows, cols]
    return taps, mask


def _wrap_i32(y: Array) -> Array:
    import numpy as np

    return ((y + 2**31) % 2**32 - 2**31).astype(np.int32)


def int_conv2d_nhwc(x: Array, w: Array, bias: Array | None, x_zp: int, w_zp: int,
                    stride: tuple[int, int] = (1, 1), pad: tuple[int, int] = (0, 0)) -> Array:
    """(N, H, W, C) x (O, KH, KW, C) -> i32 (N, OH, OW, O)."""
    import numpy as np

    _, kh, kw, _ = w.shape
    taps, _ = _windows(x, kh, kw, stride, pad, x_zp)
    y = np.einsum("nhwijc,oijc->nhwo", taps - x_zp, w.astype(np.int64) - w_zp)
    return _wrap_i32(y + (0 if bias is None else bias.astype(np.int64)))


def int_depthwise_nhwc(x: Array, w: Array, bias: Array | None, x_zp: int, w_zp: int,
                       stride: tuple[int, int] = (1, 1),
                       pad: tuple[int, int] = (0, 0)) -> Array:
    """(N, H, W, C) x (KH, KW, C) -> i32 (N, OH, OW, C)."""
    import numpy as np

    kh, kw, _ = w.shape
    taps, _ = _windows(x, kh, kw, stride, pad, x_zp)
    y = np.einsum("nhwijc,ijc->nhwc", taps - x_zp, w.astype(np.int64) - w_zp)
    return _wrap_i32(y + (0 if bias is None else bias.astype(np.int64)))


def max_pool_nhwc(x: Array, kernel: tuple[int, int], stride: tuple[int, int],
                  pad: tuple[int, int] = (0, 0), lo: int = -128, hi: int = 127) -> Array:
    import numpy as np

    taps, mask = _windows(x, *kernel, stride, pad, np.iinfo(np.int64).min)
    best = taps.max(axis=(3, 4))
    empty = ~mask.any(axis=(2, 3))
    best[:, empty] = lo
    return np.clip(best, lo, hi).astype(x.dtype)


def avg_pool_nhwc(x: Array, kernel: tuple[int, int], stride: tuple[int, int],
                  pad: tuple[int, int] = (0, 0), lo: int = -128, hi: int = 127) -> Array:
    import numpy as np

    taps, mask = _windows(x, *kernel, stride, pad, 0)
    total = taps.sum(axis=(3, 4))
    count = np.broadcast_to(mask.sum(axis=(2, 3))[None, :, :, None], total.shape)
    safe = np.maximum(count, 1)
    half = safe // 2
    # C's truncating division of (sum +- count/2) by count: half away from zero
    num = np.where(total > 0, total + half, total - half)
    avg = np.sign(num) * (np.abs(num) // safe)
    avg = np.where(count == 0, lo, avg)
    return np.clip(avg, lo, hi).astype(x.dtype)
