"""Converter for ai.onnx.preview FlexAttention (version 1), step for step as ONNX's reference:

    K, V repeated over query-head groups (GQA); s = sqrt(f32(scale)) in Q's dtype
    scores = (Q * s) @ (K * s)^T, cast to the softmax dtype (f16/bf16 -> f32 unless
    softmax_precision says otherwise); scores = score_mod(scores)
    P = prob_mod(softmax(scores)) (plain max-shifted softmax); Y = cast(P @ cast(V), V's dtype)
"""

from __future__ import annotations

import math

from rlx_core.frontend.onnx_import import dtypes as odt
from rlx_core.frontend.onnx_import.context import NodeCtx
from rlx_core.frontend.onnx_import.errors import Reject
from rlx_core.frontend.onnx_import.ops.inline_graph import inline_graph
from rlx_core.ir import dtypes as dt
from rlx_core.ir.graph import Value

_PRECISIONS = (dt.f16, dt.bf16, dt.f32, dt.f64)


def _mod(n: NodeCtx, name: str, x: Value) -> Value:
    g = n.attr(name)
    if g is None:
        return x
    outs = inline_graph(n, g, [x], name)
    if len(outs) != 1:
        raise Reject(f"{name} must produce one output, it produces {len(outs)}")
    out = outs[0]
    if out.type.shape != x.type.shape:
        out = n.broadcast(out, x.type.shape) if n.bshape(out, x) == x.type.shape else None
        if out is None:
            raise Reject(f"{name} changes the scores' shape")
    return n.cast(out, x.type.dtype)  # the reference reads the result in the softmax dtype


def flex_attention(n: NodeCtx) -> Value:
    import numpy as np

    q, k, v = n.x(0), n.x(1), n.x(2)
    d = n.float_type(q)
    if k.type.dtype != d or v.type.dtype != d:
        raise Reject("Q, K and V must share one dtype")
    if not q.type.rank == k.type.rank == v.type.rank == 4:
        raise Reject(f"FlexAttention needs rank-4 Q, K, V; got {q.type}, {k.type}, {v.type}")
    b, hq, _, e = q.type.shape
    bk, hk, s, ek = k.type.shape
    if bk != b or v.type.shape[:3] != (b, hk, s) or ek != e:
        raise Reject(f"K {k.type} and V {v.type} do not fit Q {q.type}")
    if hq != hk:
        if hq % hk:
            raise Reject(f"{hq} query heads do not group over {hk} key/value heads")
        rep = [h // (hq // hk) for h in range(hq)]
        k, v = n.take(k, 1, rep), n.take(v, 1, rep)

    scale = n.attr("scale")
    scale = 1.0 / math.sqrt(e) if scale is None else float(scale)
    root = float(np.sqrt(np.float32(scale)))  # the reference takes the root in f32
    prec = n.attr("softmax_precision")
    if prec is not None:
        cd = odt.to_rlx(int(prec))
        if cd not in _PRECISIONS:
            raise Reject(f"softmax_precision {odt.onnx_type_name(int(prec))}")
    else:
        cd = dt.f32 if d in (dt.f16, dt.bf16) else d

    qs = n.emit("mul", [q, n.full_like(root, q)])
    ks = n.emit("mul", [k, n.full_like(root, k)])
    scores = n.emit("dot_general", [qs, ks], {"contract": ((3,), (3,)),
                                              "batch": ((0, 1), (0, 1))})
    scores = _mod(n, "score_mod", n.cast(scores, cd))
    m = n.broadcast(n.reduce("reduce_max", scores, (3,), True), scores.type.shape)
    ex = n.emit("exp", [n.emit("sub", [scores, m])])
    total = n.broadcast(n.reduce("reduce_sum", ex, (3,), True), ex.type.shape)
    probs = _mod(n, "prob_mod", n.emit("div", [ex, total]))
    y = n.emit("dot_general", [probs, n.cast(v, cd)], {"contract": ((3,), (2,)),
                                                       "batch": ((0, 1), (0, 1))})
    return n.cast(y, v.type.dtype)
