"""Converter for ONNX LinearAttention (opset 27), step for step as ONNX's reference reads:

    Q, K, V (B, T, H*D) -> (B, H, T, D), in float32; S = past_state or 0 (B, H_kv, d_k, d_v)
    for t in 0..T-1 (unrolled: T is static):
        gated:  S = exp(g_t) * S
        delta:  v_t = beta_t * (v_t - S^T k_t)
        S = S + k_t (x) v_t;   o_t = scale * q_t^T repeat(S, H_q / H_kv)
    output (B, T, H_q*d_v) in the query's dtype, present_state in past_state's (or query's)

``chunk_size`` is a tuning hint with no effect on the result."""

from __future__ import annotations

import math

from rlx_core.frontend.onnx_import.context import NodeCtx
from rlx_core.frontend.onnx_import.errors import Reject
from rlx_core.frontend.onnx_import.ops.subgraph import MAX_UNROLLED_NODES, stack
from rlx_core.ir import dtypes as dt
from rlx_core.ir.graph import Value

_RULES = ("linear", "gated", "delta", "gated_delta")


def _to4(n: NodeCtx, x: Value, heads: int, last: int) -> Value:
    """(B, T, heads*last) -> (B, heads, T, last)."""
    b, t, _ = x.type.shape
    return n.transpose(n.reshape(x, (b, t, heads, last)), (0, 2, 1, 3))


def _at(n: NodeCtx, x: Value, t: int) -> Value:
    """Step ``t`` of a (B, H, T, D) value: (B, H, D)."""
    b, h, _, d = x.type.shape
    return n.reshape(n.slice_axis(x, 2, t, t + 1), (b, h, d))


def linear_attention(n: NodeCtx) -> list[Value]:
    q, k, v = n.x(0), n.x(1), n.x(2)
    past, decay, beta = n.opt(3), n.opt(4), n.opt(5)
    rule = n.text("update_rule", "gated_delta")
    if rule not in _RULES:
        raise Reject(f"update_rule {rule!r} is not one of {', '.join(_RULES)}")
    hq, hkv = n.attr("q_num_heads"), n.attr("kv_num_heads")
    if hq is None or hkv is None:
        raise Reject("q_num_heads and kv_num_heads are required")
    hq, hkv = int(hq), int(hkv)
    if hq <= 0 or hkv <= 0 or hq % hkv:
        raise Reject(f"q_num_heads ({hq}) must be a positive multiple of kv_num_heads ({hkv})")
    gating, delta = rule in ("gated", "gated_delta"), rule in ("delta", "gated_delta")
    if gating != (decay is not None):
        raise Reject(f"update_rule {rule!r} {'requires' if gating else 'forbids'} decay")
    if delta != (beta is not None):
        raise Reject(f"update_rule {rule!r} {'requires' if delta else 'forbids'} beta")
    for name, x in (("query", q), ("key", k), ("value", v)):
        if x.type.rank != 3:
            raise Reject(f"{name} must be rank 3 (B, T, H*D), got {x.type}")
        n.float_type(x, name)
    out_dtype = q.type.dtype
    b, t, _ = q.type.shape
    if q.type.shape[2] % hq or k.type.shape[2] % hkv or v.type.shape[2] % hkv:
        raise Reject("the hidden sizes do not divide into the head counts")
    dk, dv = q.type.shape[2] // hq, v.type.shape[2] // hkv
    if k.type.shape != (b, t, hkv * dk) or v.type.shape[:2] != (b, t):
        raise Reject(f"key {k.type} / value {v.type} do not fit query {q.type}")
    group = hq // hkv
    f32 = dt.f32  # the reference accumulates in float32 whatever the input types
    q4 = _to4(n, n.cast(q, f32), hq, dk)
    k4 = _to4(n, n.cast(k, f32), hkv, dk)
    v4 = _to4(n, n.cast(v, f32), hkv, dv)
    g4 = bt4 = None
    if decay is not None:
        if decay.type.rank != 3 or decay.type.shape[:2] != (b, t):
            raise Reject(f"decay must be (B, T, *), got {decay.type}")
        last = decay.type.shape[2]
        if last == hkv:  # one decay per head
            g4 = _to4(n, n.cast(decay, f32), hkv, 1)
        elif last == hkv * dk:  # one per key dimension
            g4 = _to4(n, n.cast(decay, f32), hkv, dk)
        else:
            raise Reject(f"decay's last axis {last} must be kv_num_heads ({hkv}) or "
                         f"kv_num_heads*d_k ({hkv * dk})")
    if beta is not None:
        if beta.type.rank != 3 or beta.type.shape[:2] != (b, t) \
                or beta.type.shape[2] not in (hkv, 1):
            raise Reject(f"beta must be (B, T, kv_num_heads or 1), got {beta.type}")
        bt4 = _to4(n, n.cast(beta, f32), beta.type.shape[2], 1)
    if past is not None:
        if past.type.shape != (b, hkv, dk, dv):
            raise Reject(f"past_state {past.type} does not match ({b}, {hkv}, {dk}, {dv})")
        state_dtype = past.type.dtype
        state = n.cast(past, f32)
    else:
        state_dtype = out_dtype
        state = n.const(0.0, f32, (b, hkv, dk, dv))
    scale = float(n.attr("scale", 0.0))
    if scale == 0.0:
        scale = 1.0 / math.sqrt(dk)
    if t == 0:
        raise Reject("an empty sequence (T = 0)")
    if t * 16 > MAX_UNROLLED_NODES:
        raise Reject(f"unrolling {t} steps would exceed {MAX_UNROLLED_NODES} nodes")
    sshape = (b, hkv, dk, dv)
    outs = []
    for i in range(t):
        k_t, v_t = _at(n, k4, i), _at(n, v4, i)
        if g4 is not None:  # S *= exp(g_t), over d_v (and over d_k for a per-head decay)
            g = n.emit("exp", [_at(n, g4, i)])
            gd = g.type.shape[2]
            dims = (0, 1, 2) if gd == dk else (0, 1)
            g = n.reshape(g, (b, hkv)) if gd != dk else g
            state = n.emit("mul", [state, n.emit("broadcast_in_dim", [g],
                                                 {"shape": sshape, "dims": dims})])
        if bt4 is not None:  # v_t = beta_t * (v_t - S^T k_t)
            got = n.emit("dot_general", [state, k_t],
                         {"contract": ((2,), (2,)), "batch": ((0, 1), (0, 1))})
            bb = n.reshape(_at(n, bt4, i), (b, bt4.type.shape[1]))
            bb = n.emit("broadcast_in_dim", [bb], {"shape": (b, hkv, dv), "dims": (0, 1)})
            v_t = n.emit("mul", [bb, n.emit("sub", [v_t, got])])
        outer = n.emit("mul", [
            n.emit("broadcast_in_dim", [k_t], {"shape": sshape, "dims": (0, 1, 2)}),
            n.emit("broadcast_in_dim", [v_t], {"shape": sshape, "dims": (0, 1, 3)})])
        state = n.emit("add", [state, outer])
        read = state
        if group > 1:  # each KV head's state serves `group` consecutive query heads
            read = n.emit("broadcast_in_dim", [state], {"shape": (b, hkv, group, dk, dv),
                                                        "dims": (0, 1, 3, 4)})
            read = n.reshape(read, (b, hq, dk, dv))
        o = n.emit("dot_general", [_at(n, q4, i), read],
                   {"contract": ((2,), (2,)), "batch": ((0, 1), (0, 1))})
        outs.append(n.scalar_op("mul", o, scale))
    y = stack(n, outs, 2)  # (B, H_q, T, d_v)
    y = n.reshape(n.transpose(y, (0, 2, 1, 3)), (b, t, hq * dv))
    return [n.cast(y, out_dtype), n.cast(state, state_dtype)]
