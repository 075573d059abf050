"""Converters for ONNX CenterCropPad (18), AffineGrid (20) and Col2Im (18), as ONNX's reference
computes them (onnx/reference/ops/op_center_crop_pad.py, op_affine_grid.py, op_col2im.py).

CenterCropPad is a slice then a zero pad per axis. AffineGrid multiplies theta with a static
homogeneous base grid (built in f64 like the reference, which also returns f32). Col2Im adds
each column entry into its image pixel: one scatter_add with a static index map, entries that
fall outside the image going to a spare slot that is sliced off.
"""

from __future__ import annotations

import itertools
import math

from rlx_core.frontend.onnx_import.context import NodeCtx, numel
from rlx_core.frontend.onnx_import.errors import Reject
from rlx_core.ir import dtypes as dt
from rlx_core.ir.graph import Value


def center_crop_pad(n: NodeCtx) -> Value:
    x = n.x(0)
    rank = x.type.rank
    sizes = n.static_ints(n.x(1), "shape")
    axes = n.attr("axes")
    axes = list(range(rank)) if axes is None else [n.axis(int(a), rank) for a in axes]
    if len(axes) != len(sizes) or len(set(axes)) != len(axes):
        raise Reject(f"shape {sizes} does not pair with axes {axes}")
    low, high = [0] * rank, [0] * rank
    for a, want in zip(axes, sizes, strict=False):
        dim = x.type.shape[a]
        if want < 0:
            raise Reject(f"negative target size {want}")
        if want < dim:
            start = (dim - want) // 2
            x = n.slice_axis(x, a, start, start + want)
        elif want > dim:
            low[a] = (want - dim) // 2
            high[a] = want - dim - low[a]
    if any(low) or any(high):
        x = n.emit("pad", [x], {"low": tuple(low), "high": tuple(high), "value": 0.0})
    return x


def _base_grid(sizes: list[int], align: bool):
    """The reference's (…spatial…, r + 1) grid: x (last axis) first, then y [, z], then 1."""
    import numpy as np

    axes = []
    for size in sizes:
        if align:
            step = 2.0 / (size - 1) if size > 1 else math.inf
            a = np.arange(-1, 1 + 0.0001, step) if size > 1 else np.array([-1.0])
        else:
            step = 2.0 / size
            a = np.arange(-1 + step / 2, 1, step)
        if a.shape[0] != size:
            raise Reject(f"the reference's grid along a size-{size} axis has {a.shape[0]} "
                         f"points")
        axes.append(a)
    mesh = np.meshgrid(*axes, indexing="ij")
    comps = [mesh[i] for i in reversed(range(len(sizes)))] + [np.ones(sizes)]
    return np.stack(comps, axis=len(sizes))


def affine_grid(n: NodeCtx) -> Value:
    theta = n.x(0)
    if theta.type.dtype != dt.f32:
        raise Reject(f"theta of {theta.type.dtype}: the reference computes AffineGrid in f32 "
                     f"only")
    size = n.static_ints(n.x(1), "size")
    if len(size) not in (4, 5):
        raise Reject(f"size {size} must be (N, C, H, W) or (N, C, D, H, W)")
    r = len(size) - 2
    bn, spatial = size[0], size[2:]
    if theta.type.shape != (bn, r, r + 1):
        raise Reject(f"theta {theta.type} must be ({bn}, {r}, {r + 1})")
    align = bool(int(n.attr("align_corners", 0)))
    import numpy as np

    base = _base_grid(spatial, align).reshape(-1, r + 1)  # (P, r+1), f64 like the reference
    g = n.emit("dot_general", [n.cast(theta, dt.f64), n.array(np.ascontiguousarray(base.T),
                                                              dt.f64)],
               {"contract": ((2,), (0,)), "batch": ((), ())})  # (N, r, P)
    g = n.transpose(g, (0, 2, 1))
    return n.cast(n.reshape(g, (bn, *spatial, r)), dt.f32)


def col2im(n: NodeCtx) -> Value:
    import numpy as np

    x = n.x(0)
    image = n.static_ints(n.x(1), "image_shape")
    block = n.static_ints(n.x(2), "block_shape")
    r = len(image)
    if len(block) != r or r < 1:
        raise Reject(f"image_shape {image} and block_shape {block} differ in length")
    dil = list(n.attr("dilations", [1] * r))
    pads = list(n.attr("pads", [0] * (2 * r)))
    strides = list(n.attr("strides", [1] * r))
    if len(dil) != r or len(pads) != 2 * r or len(strides) != r:
        raise Reject("dilations/pads/strides do not match the image rank")
    if x.type.rank != 3:
        raise Reject(f"input {x.type} must be (N, C * prod(block_shape), L)")
    bn, ck, length = x.type.shape
    kprod = math.prod(block)
    if kprod < 1 or ck % kprod or min(image) < 1 or min(strides) < 1 or min(dil) < 1:
        raise Reject(f"input {x.type} does not fit block_shape {block}")
    blocks = [(image[i] + pads[i] + pads[i + r] - dil[i] * (block[i] - 1) - 1) // strides[i] + 1
              for i in range(r)]
    if min(blocks) < 1 or math.prod(blocks) != length:
        raise Reject(f"{length} columns do not match the {blocks} sliding blocks")
    c = ck // kprod
    plane = math.prod(image)
    idx = np.full((kprod, length), plane, dtype=np.int64)  # `plane`: the spare slot
    for ki, koff in enumerate(itertools.product(*(range(k) for k in block))):
        for li, boff in enumerate(itertools.product(*(range(b) for b in blocks))):
            pos = [boff[i] * strides[i] - pads[i] + koff[i] * dil[i] for i in range(r)]
            if all(0 <= pos[i] < image[i] for i in range(r)):
                idx[ki, li] = int(np.ravel_multi_index(pos, image))
    cols = n.reshape(x, (bn, c, kprod * length))
    zeros = n.const(0.0 if x.type.dtype.is_float else 0, x.type.dtype, (bn, c, plane + 1))
    img = n.emit("scatter_add", [zeros, n.array(idx.reshape(-1)), cols], {"axis": 2})
    img = n.slice_axis(img, 2, 0, plane)
    if numel(img.type.shape) != bn * c * plane:
        raise Reject("internal shape mismatch")
    return n.reshape(img, (bn, c, *image))
