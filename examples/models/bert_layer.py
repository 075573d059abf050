"""One BERT-style encoder layer: multi-head self-attention, residual + layer norm, GELU FFN.

Follows the model file convention: ``model(*inputs)`` and ``example_inputs()``.
"""

import numpy as np

import rlx_core as rlx

HIDDEN, HEADS, FFN, SEQ, BATCH = 64, 4, 128, 16, 2
_rng = np.random.default_rng(0)


def _w(*shape):
    return (_rng.standard_normal(shape) * 0.05).astype(np.float32)


q_w, k_w, v_w, o_w = _w(HIDDEN, HIDDEN), _w(HIDDEN, HIDDEN), _w(HIDDEN, HIDDEN), _w(HIDDEN, HIDDEN)
q_b, k_b, v_b, o_b = _w(HIDDEN), _w(HIDDEN), _w(HIDDEN), _w(HIDDEN)
ln1_w, ln1_b = 1 + _w(HIDDEN), _w(HIDDEN)
ff1_w, ff1_b, ff2_w, ff2_b = _w(FFN, HIDDEN), _w(FFN), _w(HIDDEN, FFN), _w(HIDDEN)
ln2_w, ln2_b = 1 + _w(HIDDEN), _w(HIDDEN)


def _heads(t):
    b, s, _ = t.shape
    return t.reshape(b, s, HEADS, HIDDEN // HEADS).transpose(0, 2, 1, 3)


def model(x, mask):
    with rlx.block("attention"):
        q = _heads(rlx.nn.linear(x, q_w, q_b))
        k = _heads(rlx.nn.linear(x, k_w, k_b))
        v = _heads(rlx.nn.linear(x, v_w, v_b))
        ctx = rlx.nn.attention(q, k, v, mask="padding", padding_mask=mask)
        ctx = ctx.transpose(0, 2, 1, 3).reshape(x.shape)
        x = rlx.nn.layer_norm(x + rlx.nn.linear(ctx, o_w, o_b), ln1_w, ln1_b, eps=1e-12)
    with rlx.block("ffn"):
        h = rlx.nn.gelu(rlx.nn.linear(x, ff1_w, ff1_b))
        x = rlx.nn.layer_norm(x + rlx.nn.linear(h, ff2_w, ff2_b), ln2_w, ln2_b, eps=1e-12)
    return x


def example_inputs():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((BATCH, SEQ, HIDDEN)).astype(np.float32)
    mask = np.ones((BATCH, SEQ), np.int32)
    mask[1, SEQ - 4:] = 0  # the second sequence is padded
    return x, mask
