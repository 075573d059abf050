"""all-MiniLM-L6-v2 shaped encoder (6 layers, hidden 384, 12 heads, FFN 1536) with random
weights: the explorer's large-graph case. Model file convention: model + example_inputs."""

import numpy as np

import rlx_core as rlx

LAYERS, HIDDEN, HEADS, FFN, SEQ, BATCH = 6, 384, 12, 1536, 16, 1
_rng = np.random.default_rng(0)


def _w(*shape):
    return (_rng.standard_normal(shape) * 0.02).astype(np.float32)


WEIGHTS = [{name: _w(*shape) for name, shape in (
    ("q_w", (HIDDEN, HIDDEN)), ("q_b", (HIDDEN,)), ("k_w", (HIDDEN, HIDDEN)), ("k_b", (HIDDEN,)),
    ("v_w", (HIDDEN, HIDDEN)), ("v_b", (HIDDEN,)), ("o_w", (HIDDEN, HIDDEN)), ("o_b", (HIDDEN,)),
    ("ln1_w", (HIDDEN,)), ("ln1_b", (HIDDEN,)), ("f1_w", (FFN, HIDDEN)), ("f1_b", (FFN,)),
    ("f2_w", (HIDDEN, FFN)), ("f2_b", (HIDDEN,)), ("ln2_w", (HIDDEN,)), ("ln2_b", (HIDDEN,)))}
    for _ in range(LAYERS)]


def _heads(t):
    b, s, _ = t.shape
    return t.reshape(b, s, HEADS, HIDDEN // HEADS).transpose(0, 2, 1, 3)


def model(x, mask):
    for i, w in enumerate(WEIGHTS):
        with rlx.block(f"layer{i}"):
            with rlx.block("attention"):
                q = _heads(rlx.nn.linear(x, w["q_w"], w["q_b"]))
                k = _heads(rlx.nn.linear(x, w["k_w"], w["k_b"]))
                v = _heads(rlx.nn.linear(x, w["v_w"], w["v_b"]))
                ctx = rlx.nn.attention(q, k, v, mask="padding", padding_mask=mask)
                ctx = ctx.transpose(0, 2, 1, 3).reshape(x.shape)
                x = rlx.nn.layer_norm(x + rlx.nn.linear(ctx, w["o_w"], w["o_b"]),
                                      w["ln1_w"], w["ln1_b"], eps=1e-12)
            with rlx.block("ffn"):
                h = rlx.nn.gelu(rlx.nn.linear(x, w["f1_w"], w["f1_b"]))
                x = rlx.nn.layer_norm(x + rlx.nn.linear(h, w["f2_w"], w["f2_b"]),
                                      w["ln2_w"], w["ln2_b"], eps=1e-12)
    return x


def example_inputs():
    x = np.random.default_rng(1).standard_normal((BATCH, SEQ, HIDDEN)).astype(np.float32)
    return x, np.ones((BATCH, SEQ), np.int32)
