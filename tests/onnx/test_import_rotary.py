"""ONNX RotaryEmbedding and SwiGLU through the importer, against onnx's reference."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnx", reason="the onnx package is not installed")
from _one_node import check, model  # noqa: E402


@pytest.mark.parametrize("interleaved", [0, 1])
@pytest.mark.parametrize("rot", [0, 4])
@pytest.mark.parametrize("target", ["numpy", "cpu"])
def test_rotary_embedding_4d(interleaved: int, rot: int, target: str) -> None:
    rng = np.random.default_rng(0)
    half = (rot or 8) // 2
    inputs = {"x": rng.standard_normal((2, 3, 5, 8)).astype(np.float32),
              "cos": rng.standard_normal((11, half)).astype(np.float32),
              "sin": rng.standard_normal((11, half)).astype(np.float32),
              "pos": rng.integers(0, 11, (2, 5)).astype(np.int64)}
    m = model("RotaryEmbedding", inputs, opset=23, interleaved=interleaved,
              rotary_embedding_dim=rot)
    check(m, inputs, target=target)


def test_rotary_embedding_3d_no_positions() -> None:
    rng = np.random.default_rng(1)
    inputs = {"x": rng.standard_normal((2, 5, 12)).astype(np.float32),
              "cos": rng.standard_normal((2, 5, 2)).astype(np.float32),
              "sin": rng.standard_normal((2, 5, 2)).astype(np.float32)}
    check(model("RotaryEmbedding", inputs, opset=23, num_heads=3), inputs)


@pytest.mark.parametrize("alpha", [1.0, 0.5])
def test_swiglu(alpha: float) -> None:
    rng = np.random.default_rng(2)
    inputs = {"a": rng.standard_normal((3, 4)).astype(np.float32),
              "b": rng.standard_normal((3, 4)).astype(np.float32)}
    check(model("SwiGLU", inputs, opset=28, alpha=alpha), inputs)
