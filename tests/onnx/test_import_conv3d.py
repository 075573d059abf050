"""3-D Conv and ConvTranspose (sums of 2-D convolutions over the depth taps) against ONNX's
reference."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="the onnx package is not installed")
from _one_node import check, model  # noqa: E402

RNG = np.random.default_rng(4)


def _run(op: str, ins: dict[str, np.ndarray], **attrs) -> None:
    check(model(op, ins, **attrs), ins, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("attrs", [
    {},
    {"strides": [2, 1, 2], "pads": [1, 0, 1, 0, 1, 1], "dilations": [1, 2, 1]},
    {"group": 2, "strides": [1, 2, 1]},
])
def test_conv3d(attrs: dict) -> None:
    g = attrs.get("group", 1)
    ins = {"x": RNG.standard_normal((2, 4, 5, 6, 5)).astype(np.float32),
           "w": RNG.standard_normal((6, 4 // g, 2, 3, 2)).astype(np.float32),
           "b": RNG.standard_normal(6).astype(np.float32)}
    _run("Conv", ins, **attrs)


@pytest.mark.parametrize("attrs", [
    {},
    {"strides": [2, 1, 3], "pads": [1, 0, 0, 0, 1, 1], "output_padding": [1, 0, 0]},
    {"dilations": [2, 1, 1], "pads": [0, 1, 0, 1, 0, 0]},
])
def test_conv_transpose3d(attrs: dict) -> None:
    g = attrs.get("group", 1)
    ins = {"x": RNG.standard_normal((1, 4, 3, 4, 3)).astype(np.float32),
           "w": RNG.standard_normal((4, 6 // g, 2, 3, 2)).astype(np.float32),
           "b": RNG.standard_normal(6).astype(np.float32)}
    _run("ConvTranspose", ins, **attrs)
