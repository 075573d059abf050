"""Converters for ONNX signal ops: DFT (17, 20), STFT (17), Hann/Hamming/BlackmanWindow (17)
and MelWeightMatrix (17), as ONNX's reference (onnx/reference/ops/op_dft.py, op_stft.py, ...).

A DFT along one axis is a dense contraction with a static twiddle matrix: the (axis, re/im)
pair of axes is flattened to n*P + p (P = 1 real or 2 complex parts) and multiplied by a
(M*P, K*Q) matrix built here in f64 (exact 0 / +-1 at multiples of a quarter turn). Windows and
mel matrices depend only on static scalars, so they are computed here exactly as the reference
computes them, and become constants.
"""

from __future__ import annotations

from typing import Any

from rlx_core.frontend.onnx_import import dtypes as odt
from rlx_core.frontend.onnx_import.context import NodeCtx
from rlx_core.frontend.onnx_import.errors import Reject
from rlx_core.ir import dtypes as dt
from rlx_core.ir.graph import Value


def _twiddles(length: int) -> tuple[Any, Any]:
    """cos and sin of 2*pi*m/length for m in [0, length), exact at quarter turns."""
    import numpy as np

    m = np.arange(length)
    ang = 2.0 * np.pi * m / length
    c, s = np.cos(ang), np.sin(ang)
    quarter = (4 * m) % length == 0
    q = (4 * m[quarter]) // length
    c[quarter] = np.array([1.0, 0.0, -1.0, 0.0])[q]
    s[quarter] = np.array([0.0, 1.0, 0.0, -1.0])[q]
    return c, s


def _dft_matrix(m_in: int, parts: int, length: int, k_out: int, inverse: bool,
                real_out: bool) -> Any:
    """Rows n*P + p (input sample n, part p), columns k*Q + q (output bin k, part q)."""
    import numpy as np

    c_t, s_t = _twiddles(length)
    n = np.arange(m_in)[:, None]
    k = np.arange(k_out)[None, :]
    idx = (n * k) % length
    c, s = c_t[idx], s_t[idx]
    if real_out:  # irfft: one-sided bins n (rows) -> real samples k (columns)
        w = np.where((n == 0) | ((length % 2 == 0) & (n == length // 2)), 1.0, 2.0) / length
        mat = np.zeros((m_in, parts, k_out, 1))
        mat[:, 0, :, 0] = w * c
        if parts == 2:
            mat[:, 1, :, 0] = -w * s
        return mat.reshape(m_in * parts, k_out)
    sign = 1.0 if inverse else -1.0
    scale = 1.0 / length if inverse else 1.0
    mat = np.zeros((m_in, parts, k_out, 2))
    mat[:, 0, :, 0] = c * scale  # re -> re
    mat[:, 0, :, 1] = sign * s * scale  # re -> im
    if parts == 2:
        mat[:, 1, :, 0] = -sign * s * scale  # im -> re
        mat[:, 1, :, 1] = c * scale  # im -> im
    return mat.reshape(m_in * parts, k_out * 2)


def dft_along(n: NodeCtx, x: Value, axis: int, length: int, inverse: bool,
              onesided: bool) -> Value:
    """ONNX DFT of ``x`` (last axis: 1 real or 2 complex parts) along ``axis``."""
    rank = x.type.rank
    parts = x.type.shape[-1]
    if parts not in (1, 2):
        raise Reject(f"the last axis of {x.type} must hold 1 (real) or 2 (complex) parts")
    if not 0 <= axis < rank - 1:
        raise Reject(f"axis {axis} must not be the last (complex) axis of {x.type}")
    if length < 1:
        raise Reject(f"dft_length {length} must be positive")
    d = x.type.dtype
    work = dt.f32 if d in (dt.f16, dt.bf16) else d
    real_out = inverse and onesided
    if real_out:
        m_in, k_out = min(x.type.shape[axis], length // 2 + 1), length
    else:
        m_in = min(x.type.shape[axis], length)
        k_out = length // 2 + 1 if onesided else length
    q = 1 if real_out else 2
    x = n.slice_axis(n.cast(x, work), axis, 0, m_in)
    others = [i for i in range(rank - 1) if i != axis]
    perm = others + [axis, rank - 1]
    xt = n.transpose(x, perm)
    lead = [x.type.shape[i] for i in others]
    flat = n.reshape(xt, lead + [m_in * parts])
    w = n.array(_dft_matrix(m_in, parts, length, k_out, inverse, real_out), work)
    y = n.emit("dot_general", [flat, w], {"contract": ((len(lead),), (0,)),
                                          "batch": ((), ())})
    y = n.reshape(y, lead + [k_out, q])
    inv = [perm.index(i) for i in range(rank)]
    return n.cast(n.transpose(y, inv), d)


def dft(n: NodeCtx) -> Value:
    x = n.x(0)
    n.float_type(x)
    rank = x.type.rank
    if n.version >= 20:
        axis_v = n.opt(2)
        axis = -2 if axis_v is None else int(n.static_scalar(axis_v, "axis"))
    else:
        axis = int(n.attr("axis", 1))
    if not -rank <= axis < rank:
        raise Reject(f"axis {axis} is out of range for rank {rank}")
    axis %= rank
    inverse = bool(int(n.attr("inverse", 0)))
    onesided = bool(int(n.attr("onesided", 0)))
    if inverse and not onesided:
        # ONNX's reference runs numpy's f32 FFT, whose outputs that are 0 in exact arithmetic
        # carry rounding noise above the suite's atol (2e-7 for a ramp of 10); the exact
        # contraction here cannot reproduce that noise, so the complex inverse is refused
        raise Reject("the complex inverse DFT (inverse=1, onesided=0) is not imported")
    if onesided and not inverse and x.type.shape[-1] != 1:
        raise Reject("a one-sided forward DFT needs a real input")
    length_v = n.opt(1)
    if length_v is not None:
        length = int(n.static_scalar(length_v, "dft_length"))
    elif inverse and onesided:
        length = 2 * (x.type.shape[axis] - 1)
    else:
        length = x.type.shape[axis]
    return dft_along(n, x, axis, length, inverse, onesided)


def stft(n: NodeCtx) -> Value:
    import numpy as np

    x, window = n.x(0), n.opt(2)
    d = n.float_type(x, "signal")
    if x.type.rank != 3 or x.type.shape[-1] not in (1, 2):
        raise Reject(f"signal {x.type} must be (batch, length, 1 or 2)")
    step = int(n.static_scalar(n.x(1), "frame_step"))
    fl_v = n.opt(3)
    if fl_v is not None:
        frame = int(n.static_scalar(fl_v, "frame_length"))
    elif window is not None:
        frame = window.type.shape[0] if window.type.rank == 1 else -1
    else:
        frame = x.type.shape[1]
    if window is not None and (window.type.rank != 1 or window.type.shape[0] != frame):
        raise Reject(f"window {window.type} must be 1-D of frame_length {frame}")
    if step < 1 or not 1 <= frame <= x.type.shape[1]:
        raise Reject(f"frame_step {step} / frame_length {frame} do not fit {x.type}")
    onesided = bool(int(n.attr("onesided", 1)))
    if onesided and x.type.shape[-1] != 1:
        raise Reject("a one-sided STFT needs a real signal")
    frames = 1 + (x.type.shape[1] - frame) // step
    idx = np.arange(frames)[:, None] * step + np.arange(frame)[None, :]
    fr = n.emit("gather", [x, n.array(idx.astype(np.int64))], {"axis": 1})  # (B, F, W, P)
    if window is not None:
        if window.type.dtype != d:
            raise Reject(f"window dtype {window.type.dtype} differs from the signal's {d}")
        fr = n.emit("mul", [fr, n.emit("broadcast_in_dim", [window],
                                       {"shape": fr.type.shape, "dims": (2,)})])
    return dft_along(n, fr, 2, frame, False, onesided)


def _out_dtype(n: NodeCtx) -> tuple[dt.DType, Any]:
    code = int(n.attr("output_datatype", 1))
    d = odt.to_rlx(code)
    if d is None or not (d.is_float or d.is_int):
        raise Reject(f"output_datatype {odt.onnx_type_name(code)}")
    from onnx.helper import tensor_dtype_to_np_dtype

    return d, tensor_dtype_to_np_dtype(code)


def window(kind: str):
    def convert(n: NodeCtx) -> Value:
        import numpy as np

        d, npd = _out_dtype(n)
        size = int(n.static_scalar(n.x(0), "size"))
        if size < 1:
            raise Reject(f"window size {size} must be positive")
        periodic = int(n.attr("periodic", 1))
        if kind == "blackman":  # the reference's arithmetic, in its dtypes
            ni, n1 = np.arange(size), size - (0 if periodic else 1)
            with np.errstate(all="ignore"):
                y = np.cos((ni * (np.pi * 2)) / n1) * (-0.5)
                y += np.cos((ni * (np.pi * 4)) / n1) * 0.08
                y += 0.42
        else:
            ni, n1 = np.arange(size, dtype=npd), size if periodic else size - 1
            with np.errstate(all="ignore"):
                if kind == "hann":
                    y = np.sin(ni * np.pi / n1) ** 2
                else:
                    alpha = 25.0 / 46.0
                    y = alpha - np.cos(ni * np.pi * 2 / n1) * (1 - alpha)
        y = np.asarray(y).astype(npd)
        if not np.isfinite(y.astype(np.float64)).all():
            raise Reject(f"a symmetric window of size {size} divides by zero")
        return n.array(y, d)

    return convert


def mel_weight_matrix(n: NodeCtx) -> Value:
    import numpy as np

    d, npd = _out_dtype(n)
    bins = int(n.static_scalar(n.x(0), "num_mel_bins"))
    length = int(n.static_scalar(n.x(1), "dft_length"))
    rate = n.static(n.x(2), "sample_rate").reshape(())
    lo = n.static(n.x(3), "lower_edge_hertz").reshape(())
    hi = n.static(n.x(4), "upper_edge_hertz").reshape(())
    if bins < 1 or length < 1 or rate <= 0:
        raise Reject("num_mel_bins, dft_length and sample_rate must be positive")
    spec = length // 2 + 1
    # the reference's arithmetic, step for step (its dtypes follow the inputs')
    fb = np.arange(0, bins + 2)
    low_mel = 2595 * np.log1p(lo / 700) / np.log(10)
    high_mel = 2595 * np.log1p(hi / 700) / np.log(10)
    step = (high_mel - low_mel) / fb.shape[0]
    fb = fb * step + low_mel
    fb = 700 * np.expm1(fb / 2595 * np.log(10))
    fb = (((length + 1) * fb) // rate).astype(int)
    if fb.min() < 0 or fb.max() >= spec:
        raise Reject("mel edges fall outside the spectrogram bins")
    out = np.zeros((spec, bins))
    for i in range(bins):
        left, center, right = fb[i], fb[i + 1], fb[i + 2]
        if center == left:
            out[center, i] = 1
        else:
            for j in range(left, center + 1):
                out[j, i] = float(j - left) / float(center - left)
        if right > center:
            for j in range(center, right):
                out[j, i] = float(right - j) / float(right - center)
    return n.array(out.astype(npd), d)
