"""Converters for training-time ops: the ai.onnx.preview.training optimizers (Momentum, Adam,
Adagrad), BatchNormalization with training_mode=1, and training-mode Dropout with a seed.

The optimizers follow ONNX's reference update rules in its dtypes: float attributes meet f32
tensors as f32 values, and the step-count terms (t * decay, beta ** t) are computed in f64 as
numpy promotes an int64 step with a Python float.
"""

from __future__ import annotations

import struct

from rlx_core.frontend.onnx_import.context import NodeCtx
from rlx_core.frontend.onnx_import.errors import Reject
from rlx_core.frontend.onnx_import.ops import nn
from rlx_core.ir import dtypes as dt
from rlx_core.ir.graph import Value


def _f32(v: float) -> float:
    """The float32 value of ``v`` (ONNX stores float attributes, defaults too, as float32)."""
    return struct.unpack("f", struct.pack("f", v))[0]


def _groups(n: NodeCtx, per: int) -> tuple[Value, Value, list[list[Value]]]:
    """(R, T, [[X_i, G_i, ...] for each optimized tensor]); the inputs are R, T, then ``per``
    blocks of one tensor kind each (all X, all G, ...)."""
    count = len(n.inputs) - 2
    if count <= 0 or count % per:
        raise Reject(f"expects R, T and {per} groups of tensors, got {len(n.inputs)} inputs")
    k = count // per
    r, t = n.x(0), n.x(1)
    if r.type.size != 1 or not r.type.dtype.is_float or r.type.dtype == dt.f16:
        raise Reject(f"R must be one f32/f64 value, got {r.type}")
    if t.type.size != 1 or t.type.dtype != dt.i64:
        raise Reject(f"T must be one i64 value, got {t.type}")
    tensors = [[n.x(2 + j * k + i) for j in range(per)] for i in range(k)]
    for group in tensors:
        d = group[0].type
        if d.dtype not in (dt.f32, dt.f64) or any(v.type != d for v in group):
            raise Reject("each optimized tensor and its state must share one f32/f64 type")
        if d.dtype != r.type.dtype:
            raise Reject("R and the optimized tensors must share one dtype")
    return n.reshape(r, ()), n.reshape(t, ()), tensors


def _splat(n: NodeCtx, v: Value, like: Value) -> Value:
    return n.broadcast(n.cast(v, like.type.dtype), like.type.shape)


def _regularized(n: NodeCtx, x: Value, g: Value, coef: float) -> Value:
    """norm_coefficient * x + g."""
    return n.emit("add", [n.scalar_op("mul", x, coef), g])


def momentum(n: NodeCtx) -> list[Value]:
    r, t, groups = _groups(n, 3)
    mode = n.text("mode", "")
    if mode not in ("standard", "nesterov"):
        raise Reject(f"mode {mode!r}")
    for a in ("alpha", "beta", "norm_coefficient"):
        if not n.has(a):
            raise Reject(f"the required attribute {a} is missing")
    alpha, beta = _f32(n.attr("alpha")), _f32(n.attr("beta"))
    coef = _f32(n.attr("norm_coefficient"))
    first = n.emit("gt", [t, n.const(0, dt.i64)])
    xs, vs = [], []
    for x, g, v in groups:
        d = x.type.dtype
        # the gradient's coefficient is 1 at the first step (T == 0)
        b = n.broadcast(n.emit("select", [first, n.const(beta, d), n.const(1.0, d)]),
                        x.type.shape)
        gr = _regularized(n, x, g, coef)
        v_new = n.emit("add", [n.scalar_op("mul", v, alpha), n.emit("mul", [b, gr])])
        step = v_new if mode == "standard" else \
            n.emit("add", [gr, n.scalar_op("mul", v_new, alpha)])
        xs.append(n.emit("sub", [x, n.emit("mul", [_splat(n, r, x), step])]))
        vs.append(v_new)
    return xs + vs


def adagrad(n: NodeCtx) -> list[Value]:
    r, t, groups = _groups(n, 3)
    decay = _f32(n.attr("decay_factor", 0.0))
    eps = _f32(n.attr("epsilon", 1e-6))
    coef = _f32(n.attr("norm_coefficient", 0.0))
    # r / (1 + t * decay_factor), in f64 as the reference computes it
    denom = n.scalar_op("add", n.scalar_op("mul", n.cast(t, dt.f64), decay), 1.0)
    rate = n.emit("div", [n.cast(r, dt.f64), denom])
    xs, hs = [], []
    for x, g, h in groups:
        gr = _regularized(n, x, g, coef)
        h_new = n.emit("add", [h, n.emit("mul", [gr, gr])])
        root = n.scalar_op("add", n.emit("sqrt", [h_new]), eps)
        shape = x.type.shape
        upd = n.emit("div", [n.emit("mul", [n.broadcast(rate, shape), n.cast(gr, dt.f64)]),
                             n.cast(root, dt.f64)])
        xs.append(n.cast(n.emit("sub", [n.cast(x, dt.f64), upd]), x.type.dtype))
        hs.append(h_new)
    return xs + hs


def adam(n: NodeCtx) -> list[Value]:
    r, t, groups = _groups(n, 4)
    alpha = _f32(n.attr("alpha", 0.9))
    beta = _f32(n.attr("beta", 0.999))
    eps = _f32(n.attr("epsilon", 1e-6))
    coef = _f32(n.attr("norm_coefficient", 0.0))
    post = _f32(n.attr("norm_coefficient_post", 0.0))
    # bias correction r * sqrt(1 - beta**t) / (1 - alpha**t) after the first step, in f64
    tf = n.cast(t, dt.f64)
    pb = n.emit("pow", [n.const(beta, dt.f64), tf])
    pa = n.emit("pow", [n.const(alpha, dt.f64), tf])
    corrected = n.emit("div", [n.emit("mul", [n.cast(r, dt.f64), n.emit("sqrt", [
        n.emit("sub", [n.const(1.0, dt.f64), pb])])]), n.emit("sub", [n.const(1.0, dt.f64),
                                                                     pa])])
    later = n.emit("gt", [t, n.const(0, dt.i64)])
    rate = corrected
    xs, vs, hs = [], [], []
    for x, g, v, h in groups:
        gr = _regularized(n, x, g, coef)
        v_new = n.emit("add", [n.scalar_op("mul", v, alpha),
                               n.scalar_op("mul", gr, 1.0 - alpha)])
        h_new = n.emit("add", [n.scalar_op("mul", h, beta),
                               n.scalar_op("mul", n.emit("mul", [gr, gr]), 1.0 - beta)])
        root = n.scalar_op("add", n.emit("sqrt", [h_new]), eps)
        ratio = n.emit("div", [v_new, root])
        shape = x.type.shape
        # after the first step the corrected rate is f64 and so is the update; at T == 0
        # the update stays in x's type
        x64 = n.emit("sub", [n.cast(x, dt.f64), n.emit("mul", [n.broadcast(rate, shape),
                                                             n.cast(ratio, dt.f64)])])
        x64 = n.cast(n.scalar_op("mul", x64, 1.0 - post), x.type.dtype)
        x0 = n.emit("sub", [x, n.emit("mul", [_splat(n, r, x), ratio])])
        x0 = n.scalar_op("mul", x0, 1.0 - post)
        xs.append(n.emit("select", [n.broadcast(later, shape), x64, x0]))
        vs.append(v_new)
        hs.append(h_new)
    return xs + vs + hs


def batch_norm(n: NodeCtx) -> list[Value | None]:
    """Inference mode is nn.batch_norm; training mode normalizes with the batch's mean and
    biased variance and returns the updated running statistics."""
    if not int(n.attr("training_mode", 0)):
        return [nn.batch_norm(n)]
    x, scale, bias, mean, var = (n.x(i) for i in range(5))
    n.float_type(x)
    if x.type.rank < 2:
        raise Reject("needs (N, C, ...) input")
    d = x.type.dtype
    if any(v.type.dtype != d for v in (scale, bias, mean, var)):
        raise Reject("scale, bias, mean and var must have x's dtype")
    eps = _f32(n.attr("epsilon", 1e-5))
    mom = _f32(n.attr("momentum", 0.9))
    axes = tuple(i for i in range(x.type.rank) if i != 1)
    bmean, bvar = nn._moments(n, x, axes)  # keepdims: (1, C, 1, ...)
    c = x.type.shape[1]
    bmean, bvar = n.reshape(bmean, (c,)), n.reshape(bvar, (c,))
    along = [n.emit("broadcast_in_dim", [v], {"shape": x.type.shape, "dims": (1,)})
             for v in (scale, bias, bmean, bvar)]
    s, b, m, v = along
    # s * (x - mean) / sqrt(var + eps) + bias, in the reference's order
    y = n.emit("add", [n.emit("div", [n.emit("mul", [s, n.emit("sub", [x, m])]),
                                      n.emit("sqrt", [n.scalar_op("add", v, eps)])]), b])
    run_mean = n.emit("add", [n.scalar_op("mul", mean, mom),
                              n.scalar_op("mul", bmean, 1.0 - mom)])
    run_var = n.emit("add", [n.scalar_op("mul", var, mom),
                             n.scalar_op("mul", bvar, 1.0 - mom)])
    return [y, run_mean if n.output_wanted(1) else None,
            run_var if n.output_wanted(2) else None]


def dropout(n: NodeCtx) -> list[Value | None]:
    """Training-mode dropout with a ratio above 0 needs the ``seed`` attribute: the mask is
    then ONNX's reference mask, numpy's RandomState(seed).uniform(0, 1) >= ratio, fixed at
    import (the reference draws that same mask on every run). Otherwise nn.dropout."""
    training = n.opt(2)
    ratio = n.opt(1)
    if training is None or not bool(n.static_scalar(training, "training_mode")):
        return nn.dropout(n)
    r = n.static_scalar(ratio, "ratio") if ratio is not None else 0.5
    if float(r) == 0.0:
        return nn.dropout(n)
    if not n.has("seed"):
        raise Reject("training-mode dropout without a seed draws unreproducible random "
                     "numbers")
    import numpy as np

    x = n.x(0)
    d = n.float_type(x)
    if d not in (dt.f32, dt.f64) or (ratio is not None and ratio.type.dtype != d):
        raise Reject(f"training-mode dropout of {d} (with the ratio in the same type)")
    host = dt.to_numpy_name(d)
    prob = np.asarray(r, dtype=host) if ratio is not None else 0.5
    if not 0.0 <= float(prob) < 1.0:
        raise Reject(f"ratio {float(prob)} outside [0, 1)")
    keep = np.random.RandomState(int(n.attr("seed"))).uniform(0, 1.0, x.type.shape) >= prob
    # the reference's 1 / (1 - ratio), in x's type (a default 0.5 gives exactly 2)
    scale = float(np.asarray(1.0 / (1.0 - prob)).astype(host))
    mask = n.array(keep, dt.bool_)
    y = n.emit("mul", [n.cast(mask, d), x])
    y = n.emit("mul", [y, n.const(scale, d, x.type.shape)])
    return [y, mask if n.output_wanted(1) else None]
