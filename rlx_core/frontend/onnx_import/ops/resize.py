"""Converter for ONNX Resize (opset 13, 18, 19).

Resize is separable: along each resized axis, output i is a fixed weighted sum of input
positions. Shapes are static, so each axis's weights are computed here, once, as a dense
(out, in) matrix following the arithmetic of ONNX's reference implementation
(onnx/reference/ops/op_resize.py: coordinate transform, neighbour choice on the edge-padded
axis, coefficients, exclude_outside). The graph then applies one contraction per axis (or a
gather, for nearest), and tf_crop_and_resize's extrapolated positions are selected at the end.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from rlx_core.frontend.onnx_import.context import NodeCtx
from rlx_core.frontend.onnx_import.errors import Reject
from rlx_core.ir import dtypes as dt
from rlx_core.ir.graph import Value

Coeffs = Callable[[float, float], list[float]]


def _nearest(mode: str) -> Coeffs:
    def coeffs(ratio: float, scale: float) -> list[float]:
        if float(ratio).is_integer():
            return [0.0, 1.0]
        table = {"round_prefer_floor": [ratio <= 0.5, ratio > 0.5],
                 "round_prefer_ceil": [ratio < 0.5, ratio >= 0.5],
                 "floor": [True, False], "ceil": [False, True]}
        return [float(v) for v in table[mode]]

    return coeffs


def _linear(antialias: bool) -> Coeffs:
    def coeffs(ratio: float, scale: float) -> list[float]:
        if not antialias:
            return [1.0 - ratio, ratio]
        s = min(scale, 1.0)
        start = int(math.floor(-1 / s) + 1)
        args = [(i - ratio) * s for i in range(start, start + 2 - 2 * start)]
        c = [min(max(1 - abs(a), 0.0), 1.0) for a in args]
        return [v / sum(c) for v in c]

    return coeffs


def _cubic(a: float, antialias: bool) -> Coeffs:
    def kernel(x: float) -> float:
        x = abs(x)
        if x <= 1:
            return (a + 2) * x ** 3 - (a + 3) * x ** 2 + 1
        if x < 2:
            return a * x ** 3 - 5 * a * x ** 2 + 8 * a * x - 4 * a
        return 0.0

    def coeffs(r: float, scale: float) -> list[float]:
        if not antialias:
            return [((a * (r + 1) - 5 * a) * (r + 1) + 8 * a) * (r + 1) - 4 * a,
                    ((a + 2) * r - (a + 3)) * r * r + 1,
                    ((a + 2) * (1 - r) - (a + 3)) * (1 - r) * (1 - r) + 1,
                    ((a * ((1 - r) + 1) - 5 * a) * ((1 - r) + 1) + 8 * a) * ((1 - r) + 1) - 4 * a]
        s = min(scale, 1.0)
        i_start = int(math.floor(-2 / s) + 1)
        c = [kernel(s * (i - r)) for i in range(i_start, 2 - i_start)]
        return [v / sum(c) for v in c]

    return coeffs


def _x_ori(mode: str, y: int, scale: float, n_in: int, out_w: float, out_int: int,
           roi: tuple[float, float] | None) -> tuple[float, bool]:
    """Source coordinate of output index ``y`` and whether it is extrapolated."""
    if mode == "align_corners":
        return (0.0 if out_w == 1 else y * (n_in - 1) / (out_w - 1)), False
    if mode == "asymmetric":
        return y / scale, False
    if mode == "tf_crop_and_resize":
        if roi is None:
            raise Reject("tf_crop_and_resize needs roi")
        x = ((roi[1] - roi[0]) * (n_in - 1) / 2 if out_w == 1
             else y * (roi[1] - roi[0]) * (n_in - 1) / (out_w - 1))
        x += roi[0] * (n_in - 1)
        return x, (x < 0 or x > n_in - 1)
    if mode == "pytorch_half_pixel":
        return (-0.5 if out_w == 1 else (y + 0.5) / scale - 0.5), False
    if mode == "half_pixel":
        return (y + 0.5) / scale - 0.5, False
    if mode == "half_pixel_symmetric":
        offset = n_in / 2 * (1 - out_int / out_w)
        return offset + (y + 0.5) / scale - 0.5, False
    raise Reject(f"coordinate_transformation_mode={mode!r}")


def axis_weights(n_in: int, n_out: int, scale: float, coeffs: Coeffs, mode: str,
                 roi: tuple[float, float] | None, exclude_outside: bool
                 ) -> tuple[list[list[float]], list[bool]]:
    """The (n_out, n_in) weight matrix of one axis and its extrapolated rows."""
    out_w = scale * n_in
    rows, extra = [], []
    for y in range(n_out):
        x, ext = _x_ori(mode, y, scale, n_in, out_w, n_out, roi)
        xi = math.floor(x)
        ratio = 1.0 if x == xi else x - xi
        c = list(coeffs(ratio, scale))
        k = len(c)
        pad = math.ceil(k / 2)
        xp = x + pad
        p = math.floor(xp)
        frac = xp - p
        if k % 2 == 0:
            off = -(k // 2) if frac == 0 else -(k // 2) + 1
        else:
            base = -((k - 1) // 2)
            off = base if frac <= 0.5 else base + 1
        idx = [p + off + t - pad for t in range(k)]
        if exclude_outside:
            c = [0.0 if (i < 0 or i >= n_in) else v for v, i in zip(c, idx, strict=False)]
            total = sum(c) or 1.0
            c = [v / total for v in c]
        row = [0.0] * n_in
        for v, i in zip(c, idx, strict=False):
            row[min(max(i, 0), n_in - 1)] += v  # edge padding: outside taps read the edge
        rows.append(row)
        extra.append(ext)
    return rows, extra


def _static_or_none(n: NodeCtx, v: Value | None, what: str) -> list[float] | None:
    if v is None or v.type.size == 0:
        return None
    return [float(a) for a in n.static(v, what).reshape(-1).tolist()]


def resize(n: NodeCtx) -> Value:
    x = n.x(0)
    r = x.type.rank
    roi = _static_or_none(n, n.opt(1), "roi")
    scales = _static_or_none(n, n.opt(2), "scales")
    sizes = _static_or_none(n, n.opt(3), "sizes")
    mode = n.text("mode", "nearest")
    ctm = n.text("coordinate_transformation_mode", "half_pixel")
    policy = n.text("keep_aspect_ratio_policy", "stretch")
    antialias = bool(int(n.attr("antialias", 0)))
    exclude = bool(int(n.attr("exclude_outside", 0)))
    extrap = float(n.attr("extrapolation_value", 0.0))
    axes = [n.axis(int(a), r) for a in n.attr("axes", list(range(r)))]
    if (scales is None) == (sizes is None):
        raise Reject("exactly one of scales and sizes must be given")
    if mode == "nearest":
        if antialias:
            raise Reject("antialias with mode=nearest")
        coeffs = _nearest(n.text("nearest_mode", "round_prefer_floor"))
    elif mode == "linear":
        coeffs = _linear(antialias)
    elif mode == "cubic":
        coeffs = _cubic(float(n.attr("cubic_coeff_a", -0.75)), antialias)
    else:
        raise Reject(f"mode={mode!r}")
    shape = x.type.shape
    full_scale = [1.0] * r
    full_size = list(shape)
    given = scales if scales is not None else sizes
    if len(given) != len(axes):  # type: ignore[arg-type]
        raise Reject(f"{len(given)} scales/sizes for {len(axes)} axes")  # type: ignore[arg-type]
    full_roi: list[float] | None = None
    if roi is not None:
        if len(roi) != 2 * len(axes):
            raise Reject("roi needs 2 entries per axis")
        full_roi = [0.0] * r + [1.0] * r
        for i, a in enumerate(axes):
            full_roi[a], full_roi[r + a] = roi[i], roi[len(axes) + i]
    if sizes is not None:
        for i, a in enumerate(axes):
            full_size[a] = int(sizes[i])
        full_scale = [full_size[i] / shape[i] if shape[i] else 1.0 for i in range(r)]
        if policy != "stretch":
            pick = min if policy == "not_larger" else max if policy == "not_smaller" else None
            if pick is None:
                raise Reject(f"keep_aspect_ratio_policy={policy!r}")
            s = pick(full_scale[a] for a in axes)
            full_scale = [s if i in axes else 1.0 for i in range(r)]
            full_size = [int(s * shape[i] + 0.5) if i in axes else shape[i] for i in range(r)]
    else:
        for i, a in enumerate(axes):
            full_scale[a] = float(scales[i])  # type: ignore[index]
        full_size = [int(full_scale[i] * shape[i]) for i in range(r)]
    if any(s <= 0 for s in full_scale):
        raise Reject("scales must be positive")
    d = x.type.dtype
    nearest = mode == "nearest"
    if not nearest and not d.is_float:
        raise Reject(f"{mode} resize of {d} (ONNX rounds and saturates back to integers)")
    if not nearest and extrap != 0.0 and ctm != "tf_crop_and_resize":
        extrap = 0.0  # only tf_crop_and_resize extrapolates
    work = d if nearest or d in (dt.f32, dt.f64) else dt.f32
    y = n.cast(x, work)
    masks: list[tuple[int, list[bool]]] = []
    for a in axes:
        n_in, n_out = shape[a], full_size[a]
        a_roi = None if full_roi is None else (full_roi[a], full_roi[a + r])
        unchanged = (math.isclose(full_scale[a], 1.0) and n_out == n_in and
                     (a_roi is None or (math.isclose(a_roi[0], 0.0)
                                        and math.isclose(a_roi[1], 1.0))))
        if unchanged:
            continue
        if n_in == 0 or n_out == 0:
            raise Reject("resizing an empty axis")
        w, ext = axis_weights(n_in, n_out, full_scale[a], coeffs, ctm, a_roi, exclude)
        if any(ext):
            masks.append((a, ext))
        if nearest:
            idx = [max(range(n_in), key=lambda j: (row[j], -j)) for row in w]
            y = n.take(y, a, idx)
            continue
        wm = n.const(tuple(v for row in w for v in row), work, (n_out, n_in))
        z = n.emit("dot_general", [y, wm], {"contract": ((a,), (1,))})
        perm = list(range(r - 1))
        perm.insert(a, r - 1)
        y = n.transpose(z, perm)
    if masks:
        out_shape = y.type.shape
        hit = None
        for a, ext in masks:
            m = n.const(tuple(bool(e) for e in ext), dt.bool_, (len(ext),))
            m = n.emit("broadcast_in_dim", [m], {"shape": out_shape, "dims": (a,)})
            hit = m if hit is None else n.emit("or", [hit, m])
        y = n.emit("select", [hit, n.const(extrap, work, out_shape), y])  # type: ignore[list-item]
    return n.cast(y, d)
