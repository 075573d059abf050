"""A GPT-style transformer block for the tensor-parallel tests: pre-LayerNorm, causal
multi-head self-attention (q, k, v and output projections), a GELU MLP, two residuals."""

from __future__ import annotations

from typing import Any

import numpy as np

import rlx_core.frontend.nn as nn

NAMES = ("ln1_w", "ln1_b", "wq", "bq", "wk", "bk", "wv", "bv", "wo", "bo", "ln2_w", "ln2_b",
         "w1", "b1", "w2", "b2")


def init_block(width: int, hidden: int, seed: int = 0) -> list[Any]:
    """The block's weights, in ``NAMES`` order (linear weights are (out, in))."""
    rng = np.random.default_rng(seed)

    def w(*shape: int) -> Any:
        return (rng.standard_normal(shape) / np.sqrt(shape[-1])).astype(np.float32)

    def b(n: int) -> Any:
        return (0.1 * rng.standard_normal(n)).astype(np.float32)

    return [1 + b(width), b(width), w(width, width), b(width), w(width, width), b(width),
            w(width, width), b(width), w(width, width), b(width), 1 + b(width), b(width),
            w(hidden, width), b(hidden), w(width, hidden), b(width)]


def gpt_block(heads: int):
    """``block(x, *weights) -> y`` for x of shape (batch, seq, width)."""

    def block(x, ln1_w, ln1_b, wq, bq, wk, bk, wv, bv, wo, bo, ln2_w, ln2_b, w1, b1, w2, b2):
        batch, seq, width = x.shape

        def split(t):  # (batch, seq, width) -> (batch, heads, seq, head_dim)
            return t.reshape(batch, seq, heads, width // heads).transpose(0, 2, 1, 3)

        h = nn.layer_norm(x, ln1_w, ln1_b)
        q, k, v = (split(nn.linear(h, w, b)) for w, b in ((wq, bq), (wk, bk), (wv, bv)))
        a = nn.attention(q, k, v, mask="causal").transpose(0, 2, 1, 3).reshape(batch, seq, width)
        x = x + nn.linear(a, wo, bo)
        h = nn.layer_norm(x, ln2_w, ln2_b)
        return x + nn.linear(nn.gelu(nn.linear(h, w1, b1)), w2, b2)

    return block
