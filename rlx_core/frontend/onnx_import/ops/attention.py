"""Converter for ONNX Attention (opset 23 to 25), step for step as ONNX's reference reads:

    Q, K, V (B, H, S, D) [3-D inputs are split into heads first]; K, V = concat(past, K/V)
    bias = mask (bool -> 0 / -inf; padded to the total length) [+ causal] [+ sliding window]
           [+ nonpad padding]
    scores = (Q * sqrt(scale)) @ (K * sqrt(scale))^T  [softcap: c * tanh(scores / c)]
    P = softmax(scores + bias) (fully masked rows -> 0);  Y = P @ V
"""

from __future__ import annotations

import math

from rlx_core.frontend.onnx_import import dtypes as odt
from rlx_core.frontend.onnx_import.context import NodeCtx
from rlx_core.frontend.onnx_import.errors import Reject
from rlx_core.ir import dtypes as dt
from rlx_core.ir.graph import Value


def _heads(n: NodeCtx, x: Value, heads: int | None, what: str) -> Value:
    if x.type.rank == 4:
        return x
    if x.type.rank != 3 or not heads or x.type.shape[2] % heads:
        raise Reject(f"{what} {x.type}: 3-D inputs need a head count dividing the hidden size")
    b, s, h = x.type.shape
    return n.transpose(n.reshape(x, (b, s, heads, h // heads)), (0, 2, 1, 3))


def _neg_inf_where(n: NodeCtx, allowed: Value, like_dtype: dt.DType) -> Value:
    """0 where allowed, -inf elsewhere (ONNX's select-not-multiply form)."""
    shape = allowed.type.shape
    return n.emit("select", [allowed, n.const(0.0, like_dtype, shape),
                             n.const(-math.inf, like_dtype, shape)])


def _add_bias(n: NodeCtx, bias: Value | None, term: Value) -> Value:
    return term if bias is None else n.binary("add", bias, term)


def _softmax(n: NodeCtx, x: Value) -> Value:
    """The reference's softmax: a row whose max is -inf shifts by 0; a zero sum divides by 1."""
    last = x.type.rank - 1
    m = n.reduce("reduce_max", x, (last,), True)
    ninf = n.emit("eq", [m, n.full_like(-math.inf, m)])
    safe = n.emit("select", [ninf, n.full_like(0.0, m), m])
    e = n.emit("exp", [n.emit("sub", [x, n.broadcast(safe, x.type.shape)])])
    s = n.reduce("reduce_sum", e, (last,), True)
    s = n.emit("select", [n.emit("eq", [s, n.full_like(0.0, s)]), n.full_like(1.0, s), s])
    return n.emit("div", [e, n.broadcast(s, x.type.shape)])


def _window(n: NodeCtx, offset: int | list[int], b: int, s: int, length: int, left: int,
            right: int, d: dt.DType) -> Value:
    """The sliding-window bias: query i (at absolute position offset + i) sees key j iff
    -right <= offset + i - j <= left; a bound of -1 leaves that side open. The window is
    static, so it is built at import time."""
    import numpy as np

    i = np.arange(s).reshape(s, 1)
    j = np.arange(length).reshape(1, length)
    if isinstance(offset, list):
        diff = i[None] + np.asarray(offset).reshape(b, 1, 1) - j[None]
    else:
        diff = i + offset - j
    allowed = np.ones(diff.shape, dtype=bool)
    if left >= 0:
        allowed &= diff <= left
    if right >= 0:
        allowed &= -diff <= right
    win = np.where(allowed, 0.0, -np.inf)
    if isinstance(offset, list):
        win = win.reshape(b, 1, s, length)
    return n.array(win, d)


def attention(n: NodeCtx) -> list[Value | None]:
    q, k, v = n.x(0), n.x(1), n.x(2)
    mask, past_k, past_v = n.opt(3), n.opt(4), n.opt(5)
    nonpad = n.opt(6)
    d = n.float_type(q)
    if k.type.dtype != d or v.type.dtype != d:
        raise Reject("Q, K and V must share one dtype")
    if not q.type.rank == k.type.rank == v.type.rank:
        raise Reject("Q, K and V must have one rank")
    if (past_k is None) != (past_v is None):
        raise Reject("past_key and past_value must come together")
    if nonpad is not None and past_k is not None:
        raise Reject("nonpad_kv_seqlen cannot be combined with a past cache")
    three_d = q.type.rank == 3
    qh = n.attr("q_num_heads")
    kvh = n.attr("kv_num_heads")
    q = _heads(n, q, qh, "Q")
    k = _heads(n, k, kvh, "K")
    v = _heads(n, v, kvh, "V")
    if past_k is not None:
        if past_k.type.dtype != d or past_v.type.dtype != d:  # type: ignore[union-attr]
            raise Reject("past_key/past_value dtype differs from Q")
        k = n.emit("concat", [past_k, k], {"axis": 2})
        v = n.emit("concat", [past_v, v], {"axis": 2})  # type: ignore[list-item]
    present_k, present_v = k, v
    b, hq, s, dh = q.type.shape
    hk, length = k.type.shape[1], k.type.shape[2]
    if v.type.shape[:3] != (b, hk, length) or k.type.shape[3] != dh:
        raise Reject(f"K {k.type} and V {v.type} do not fit Q {q.type}")

    scale = n.attr("scale")
    scale = 1.0 / math.sqrt(dh) if scale is None else float(scale)
    root = math.sqrt(scale)

    bias: Value | None = None
    if mask is not None:
        if mask.type.rank < 1 or mask.type.rank > 4:
            raise Reject(f"attn_mask {mask.type} must have rank 1 to 4")
        pad = length - mask.type.shape[-1]
        if pad < 0:
            raise Reject(f"attn_mask is longer ({mask.type.shape[-1]}) than the keys ({length})")
        if pad:
            fill_shape = mask.type.shape[:-1] + (pad,)
            fill = (n.const(False, dt.bool_, fill_shape) if mask.type.dtype == dt.bool_
                    else n.const(-math.inf, mask.type.dtype, fill_shape))
            mask = n.emit("concat", [mask, fill], {"axis": mask.type.rank - 1})
        if mask.type.dtype == dt.bool_:
            bias = _neg_inf_where(n, mask, d)
        elif mask.type.dtype == d:
            bias = mask
        else:
            raise Reject(f"attn_mask of {mask.type.dtype} with {d} inputs")

    offset: int | list[int] = past_k.type.shape[2] if past_k is not None else 0
    if nonpad is not None:
        lens = n.static_ints(nonpad, "nonpad_kv_seqlen")
        if len(lens) != b:
            raise Reject("nonpad_kv_seqlen must hold one length per batch")
        offset = [ln - s for ln in lens]
    if int(n.attr("is_causal", 0)):
        if bias is None:
            bias = n.const(0.0, d, (s, length))
        i_idx = n.emit("iota", [], {"shape": (s, length), "dim": 0, "dtype": dt.i64})
        j_idx = n.emit("iota", [], {"shape": (s, length), "dim": 1, "dtype": dt.i64})
        if isinstance(offset, list):
            import numpy as np

            off = n.array(np.asarray(offset, dtype=np.int64).reshape(b, 1, 1))
            lim = n.binary("add", n.reshape(i_idx, (1, s, length)), off)
            allowed = n.binary("le", n.broadcast(n.reshape(j_idx, (1, s, length)),
                                                 lim.type.shape), lim)
            causal = n.reshape(_neg_inf_where(n, allowed, d), (b, 1, s, length))
        else:
            allowed = n.emit("le", [j_idx, n.scalar_op("add", i_idx, offset)])
            causal = _neg_inf_where(n, allowed, d)
        bias = n.binary("add", bias, causal)
    left, right = int(n.attr("left_window_size", -1)), int(n.attr("right_window_size", -1))
    if left < -1 or right < -1:
        raise Reject(f"window sizes must be -1 or nonnegative, got {left}, {right}")
    if left >= 0 or right >= 0:
        bias = _add_bias(n, bias, _window(n, offset, b, s, length, left, right, d))
    if nonpad is not None:
        lens = n.static_ints(nonpad, "nonpad_kv_seqlen")
        import numpy as np

        keep = np.arange(length)[None, :] < np.asarray(lens)[:, None]
        padm = n.array(np.where(keep, 0.0, -np.inf).reshape(b, 1, 1, length), d)
        bias = _add_bias(n, bias, padm)

    if hq != hk:
        if hq % hk:
            raise Reject(f"{hq} query heads do not group over {hk} key/value heads")
        reps = hq // hk
        rep = [h // reps for h in range(hq)]
        k, v = n.take(k, 1, rep), n.take(v, 1, rep)

    qs = n.scalar_op("mul", q, root)
    ks = n.scalar_op("mul", k, root)
    scores = n.emit("dot_general", [qs, ks], {"contract": ((3,), (3,)),
                                              "batch": ((0, 1), (0, 1))})
    softcap = float(n.attr("softcap", 0.0))
    if softcap > 0:
        scores = n.scalar_op("mul", n.emit("tanh", [n.scalar_op("div", scores, softcap)]),
                             softcap)
    with_bias = scores if bias is None else n.binary("add", scores, bias)
    mode = int(n.attr("qk_matmul_output_mode", 0))
    if mode not in (0, 1, 2, 3):
        raise Reject(f"qk_matmul_output_mode={mode}")
    qk_out = with_bias if mode == 2 else scores

    sm_in = with_bias
    prec = n.attr("softmax_precision")
    if prec is not None:
        pd = odt.to_rlx(int(prec))
        if pd is None or not pd.is_float:
            raise Reject(f"softmax_precision {odt.onnx_type_name(int(prec))}")
        sm_in = n.cast(sm_in, pd)
    probs = _softmax(n, sm_in)
    if bias is not None:
        last = bias.type.rank - 1
        bmax = n.reduce("reduce_max", bias, (last,), True)
        masked = n.emit("eq", [bmax, n.full_like(-math.inf, bmax)])
        zeros = n.const(0.0, probs.type.dtype, probs.type.shape)
        probs = n.select(masked, zeros, probs)
    if mode == 3:
        qk_out = probs
    qk_out = n.cast(qk_out, d)
    probs = n.cast(probs, d)
    y = n.emit("dot_general", [probs, v], {"contract": ((3,), (2,)), "batch": ((0, 1), (0, 1))})
    if three_d:
        y = n.reshape(n.transpose(y, (0, 2, 1, 3)), (b, s, hq * v.type.shape[3]))
    return [y,
            present_k if n.output_wanted(1) else None,
            present_v if n.output_wanted(2) else None,
            qk_out if n.output_wanted(3) else None]
