"""Bilinear-sampling ops against ONNX's reference: DeformConv (run-time offsets, taps outside
the image, groups, mask) and RoiAlign (avg / max, both coordinate modes, adaptive grids)."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="the onnx package is not installed")
from _one_node import check, model  # noqa: E402

RNG = np.random.default_rng(9)


def _run(op: str, ins: dict[str, np.ndarray], **attrs) -> None:
    check(model(op, ins, **attrs), ins, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("attrs,with_mask", [
    ({"kernel_shape": [2, 2]}, False),
    ({"kernel_shape": [3, 2], "pads": [1, 0, 1, 1], "strides": [2, 1], "dilations": [1, 2]},
     True),
    ({"kernel_shape": [2, 2], "group": 2, "offset_group": 2, "pads": [1, 1, 1, 1]}, True),
])
def test_deform_conv(attrs: dict, with_mask: bool) -> None:
    g, og = attrs.get("group", 1), attrs.get("offset_group", 1)
    kh, kw = attrs["kernel_shape"]
    st = attrs.get("strides", [1, 1])
    dl = attrs.get("dilations", [1, 1])
    p = attrs.get("pads", [0, 0, 0, 0])
    x = RNG.standard_normal((2, 4, 5, 6)).astype(np.float32)
    oh = (5 + p[0] + p[2] - (kh - 1) * dl[0] - 1) // st[0] + 1
    ow = (6 + p[1] + p[3] - (kw - 1) * dl[1] - 1) // st[1] + 1
    ins = {"x": x, "w": RNG.standard_normal((4, 4 // g, kh, kw)).astype(np.float32),
           # offsets up to +-3 pixels: many taps land outside the image
           "o": (RNG.standard_normal((2, og * kh * kw * 2, oh, ow)) * 1.5).astype(np.float32),
           "b": RNG.standard_normal(4).astype(np.float32)}
    if with_mask:
        ins["m"] = RNG.random((2, og * kh * kw, oh, ow)).astype(np.float32)
    _run("DeformConv", ins, **attrs)


@pytest.mark.parametrize("mode", ["avg", "max"])
@pytest.mark.parametrize("ctm", ["half_pixel", "output_half_pixel"])
@pytest.mark.parametrize("ratio", [0, 2])
def test_roi_align(mode: str, ctm: str, ratio: int) -> None:
    x = RNG.standard_normal((2, 3, 8, 9)).astype(np.float32)
    rois = np.array([[0, 0, 7, 7], [1.5, 2.2, 6.1, 4.4], [-2, 3, 12, 9.5], [3, 3, 3.2, 3.1]],
                    np.float32)
    ins = {"x": x, "r": rois, "i": np.array([0, 1, 1, 0], np.int64)}
    _run("RoiAlign", ins, mode=mode, coordinate_transformation_mode=ctm, output_height=3,
         output_width=4, sampling_ratio=ratio, spatial_scale=0.75)
