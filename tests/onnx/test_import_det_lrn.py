"""ONNX Det and LRN through the importer, against onnx's reference."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnx", reason="the onnx package is not installed")
from _one_node import check, model  # noqa: E402

from rlx_core.frontend.onnx_import import UnsupportedOp, import_model  # noqa: E402


@pytest.mark.parametrize("shape", [(1, 1), (2, 2), (4, 3, 3), (2, 2, 2, 2)])
@pytest.mark.parametrize("target", ["numpy", "cpu"])
def test_det(shape: tuple[int, ...], target: str) -> None:
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    check(model("Det", {"x": x}), {"x": x}, target=target, rtol=1e-4, atol=1e-5)


def test_det_rejects_4x4() -> None:
    with pytest.raises(UnsupportedOp, match="4x4"):
        import_model(model("Det", {"x": np.zeros((4, 4), np.float32)}))


@pytest.mark.parametrize("size", [1, 2, 3, 4])
@pytest.mark.parametrize("target", ["numpy", "cpu"])
def test_lrn(size: int, target: str) -> None:
    # the reference loops over the batch axis where it means channels: N == C keeps it right
    x = np.random.default_rng(1).standard_normal((5, 5, 3, 2)).astype(np.float32)
    m = model("LRN", {"x": x}, opset=13, size=size, alpha=0.01, beta=0.6, bias=1.5)
    check(m, {"x": x}, target=target)
