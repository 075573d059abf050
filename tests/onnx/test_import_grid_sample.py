"""ONNX GridSample through the importer, against onnx's reference evaluator."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

pytest.importorskip("onnx", reason="the onnx package is not installed")
from _one_node import check, model  # noqa: E402

from rlx_core.frontend.onnx_import import UnsupportedOp, import_model  # noqa: E402

CASES = list(itertools.product(("linear", "nearest", "cubic"), ("zeros", "border", "reflection"),
                               (0, 1)))


@pytest.mark.parametrize("mode,pad,align", CASES)
def test_grid_sample_2d_out_of_range_grid(mode: str, pad: str, align: int) -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
    grid = rng.uniform(-2.7, 2.7, (2, 3, 6, 2)).astype(np.float32)
    m = model("GridSample", {"x": x, "grid": grid}, mode=mode, padding_mode=pad,
              align_corners=align)
    check(m, {"x": x, "grid": grid}, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("mode", ["linear", "nearest"])
def test_grid_sample_3d(mode: str) -> None:
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1, 2, 3, 4, 2)).astype(np.float32)
    grid = rng.uniform(-1.3, 1.3, (1, 2, 3, 2, 3)).astype(np.float32)
    m = model("GridSample", {"x": x, "grid": grid}, mode=mode, padding_mode="border")
    check(m, {"x": x, "grid": grid}, rtol=1e-4, atol=1e-5)


def test_grid_sample_cpu() -> None:
    rng = np.random.default_rng(2)
    x = rng.standard_normal((1, 2, 4, 4)).astype(np.float32)
    grid = rng.uniform(-1.5, 1.5, (1, 3, 3, 2)).astype(np.float32)
    m = model("GridSample", {"x": x, "grid": grid}, mode="cubic", padding_mode="reflection")
    check(m, {"x": x, "grid": grid}, target="cpu", rtol=1e-4, atol=1e-5)


def test_grid_sample_rejects_v16_name_in_v22() -> None:
    x = np.zeros((1, 1, 2, 2), np.float32)
    grid = np.zeros((1, 1, 1, 2), np.float32)
    with pytest.raises(UnsupportedOp, match="bilinear"):
        import_model(model("GridSample", {"x": x, "grid": grid}, mode="bilinear"))
