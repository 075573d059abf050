"""Whole models on the native WebGPU target: the example BERT layer and an all-MiniLM-L6-v2
shaped encoder (6 layers, hidden 384, 12 heads, FFN 1536, vocabulary 30522, mean pooling) with
seeded random weights (no weights can be downloaded here), against the CPU target when it is
registered and available, else the numpy reference."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import rlx_core as rlx
from rlx_core.targets.registry import get_target, target_names

OK, WHY = get_target("webgpu").available()
pytestmark = pytest.mark.skipif(not OK, reason=f"no WebGPU adapter here: {WHY}")
MODELS = Path(__file__).resolve().parents[2] / "examples" / "models"


def reference_target() -> str:
    if "cpu" in target_names() and get_target("cpu").available()[0]:
        return "cpu"
    return "numpy"


def test_bert_layer_example() -> None:
    sys.path.insert(0, str(MODELS))
    try:
        import bert_layer as m
    finally:
        sys.path.remove(str(MODELS))
    x, mask = m.example_inputs()
    got = rlx.compile(m.model, x, mask, target="webgpu")(x, mask)
    want = rlx.compile(m.model, x, mask, target="numpy")(x, mask)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


VOCAB, HIDDEN, HEADS, FFN, LAYERS, MAX_POS = 30522, 384, 12, 1536, 6, 512


def minilm_weights(seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)

    def w(*shape: int, scale: float = 0.05) -> np.ndarray:
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    p = {"word": w(VOCAB, HIDDEN), "pos": w(MAX_POS, HIDDEN), "type": w(2, HIDDEN),
         "ln_w": 1 + w(HIDDEN), "ln_b": w(HIDDEN)}
    for i in range(LAYERS):
        for n in ("q", "k", "v", "o"):
            p[f"{i}.{n}_w"], p[f"{i}.{n}_b"] = w(HIDDEN, HIDDEN), w(HIDDEN)
        p[f"{i}.ff1_w"], p[f"{i}.ff1_b"] = w(FFN, HIDDEN), w(FFN)
        p[f"{i}.ff2_w"], p[f"{i}.ff2_b"] = w(HIDDEN, FFN), w(HIDDEN)
        for n in ("ln1", "ln2"):
            p[f"{i}.{n}_w"], p[f"{i}.{n}_b"] = 1 + w(HIDDEN), w(HIDDEN)
    return p


def minilm(p: dict[str, np.ndarray]):
    """all-MiniLM-L6-v2's forward pass (BertModel + mean pooling), ids and mask as i32."""

    def heads(t):
        b, s, _ = t.shape
        return t.reshape(b, s, HEADS, HIDDEN // HEADS).transpose(0, 2, 1, 3)

    def forward(ids, mask):
        b, s = ids.shape
        x = rlx.nn.embedding(ids, p["word"]) + p["pos"][:s] + p["type"][0]
        x = rlx.nn.layer_norm(x, p["ln_w"], p["ln_b"], eps=1e-12)
        for i in range(LAYERS):
            def lin(t, n, i=i):
                return rlx.nn.linear(t, p[f"{i}.{n}_w"], p[f"{i}.{n}_b"])

            q, k, v = heads(lin(x, "q")), heads(lin(x, "k")), heads(lin(x, "v"))
            ctx = rlx.nn.attention(q, k, v, mask="padding", padding_mask=mask)
            ctx = ctx.transpose(0, 2, 1, 3).reshape(b, s, HIDDEN)
            x = rlx.nn.layer_norm(x + lin(ctx, "o"), p[f"{i}.ln1_w"], p[f"{i}.ln1_b"],
                                  eps=1e-12)
            h = rlx.nn.gelu(lin(x, "ff1"))
            x = rlx.nn.layer_norm(x + lin(h, "ff2"), p[f"{i}.ln2_w"], p[f"{i}.ln2_b"],
                                  eps=1e-12)
        m = mask.astype("f32").reshape(b, s, 1)
        return (x * m).sum(axis=1) / m.sum(axis=1)

    return forward


def test_minilm_l6_forward_matches_reference() -> None:
    fn = minilm(minilm_weights())
    rng = np.random.default_rng(1)
    ids = rng.integers(0, VOCAB, (2, 16)).astype(np.int32)
    mask = np.ones((2, 16), np.int32)
    mask[1, 11:] = 0
    exe = rlx.compile(fn, ids, mask, target="webgpu")
    got = exe(ids, mask)
    want = rlx.compile(fn, ids, mask, target=reference_target())(ids, mask)
    assert got.shape == (2, HIDDEN)
    np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-3)
    # a second call reuses the uploaded weights and cached pipelines: same answer
    np.testing.assert_array_equal(exe(ids, mask), got)
