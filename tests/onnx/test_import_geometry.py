"""ONNX CenterCropPad, AffineGrid and Col2Im through the importer, against onnx's reference."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnx", reason="the onnx package is not installed")
from _one_node import check, model  # noqa: E402


@pytest.mark.parametrize("shape,axes", [([3, 8, 2], None), ([7, 3], [0, -1]), ([6], [1])])
def test_center_crop_pad(shape: list[int], axes: list[int] | None) -> None:
    x = np.arange(5 * 5 * 4, dtype=np.float32).reshape(5, 5, 4)
    inputs = {"x": x, "shape": np.array(shape, np.int64)}
    attrs = {} if axes is None else {"axes": axes}
    check(model("CenterCropPad", inputs, opset=18, **attrs), inputs)


@pytest.mark.parametrize("size", [(2, 3, 4, 5), (1, 2, 3, 4, 2)])
@pytest.mark.parametrize("align", [0, 1])
@pytest.mark.parametrize("target", ["numpy", "cpu"])
def test_affine_grid(size: tuple[int, ...], align: int, target: str) -> None:
    r = len(size) - 2
    theta = np.random.default_rng(0).standard_normal((size[0], r, r + 1)).astype(np.float32)
    inputs = {"theta": theta, "size": np.array(size, np.int64)}
    check(model("AffineGrid", inputs, opset=20, align_corners=align), inputs, target=target)


@pytest.mark.parametrize("attrs", [{}, {"strides": [2, 1]}, {"pads": [1, 0, 2, 1]},
                                   {"dilations": [2, 1], "strides": [1, 2]}])
@pytest.mark.parametrize("target", ["numpy", "cpu"])
def test_col2im_2d(attrs: dict, target: str) -> None:
    image, block = [6, 5], [2, 3]
    strides = attrs.get("strides", [1, 1])
    pads = attrs.get("pads", [0, 0, 0, 0])
    dil = attrs.get("dilations", [1, 1])
    blocks = [(image[i] + pads[i] + pads[i + 2] - dil[i] * (block[i] - 1) - 1) // strides[i] + 1
              for i in range(2)]
    x = np.random.default_rng(1).standard_normal((2, 3 * 6, blocks[0] * blocks[1]))
    inputs = {"x": x.astype(np.float32), "image": np.array(image, np.int64),
              "block": np.array(block, np.int64)}
    check(model("Col2Im", inputs, opset=18, **attrs), inputs, target=target)
