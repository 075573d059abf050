"""GatherND with batch_dims against ONNX's reference."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="the onnx package is not installed")
from onnx import TensorProto, helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

from rlx_core.frontend.onnx_backend import backend_for  # noqa: E402


@pytest.mark.parametrize("b,m", [(0, 2), (1, 1), (1, 2), (2, 1), (2, 2)])
def test_gather_nd_batch_dims(b: int, m: int) -> None:
    rng = np.random.default_rng(b * 10 + m)
    x = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
    idx = np.stack([rng.integers(-x.shape[b + k], x.shape[b + k], (2, 3, 2))
                    for k in range(m)], axis=-1).astype(np.int64) if m else \
        np.zeros((2, 3, 2, 0), np.int64)
    node = helper.make_node("GatherND", ["x", "i"], ["y"], batch_dims=b)
    graph = helper.make_graph([node], "g", [
        helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape),
        helper.make_tensor_value_info("i", TensorProto.INT64, idx.shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    want = ReferenceEvaluator(model).run(None, {"x": x, "i": idx})[0]
    got = backend_for("numpy").prepare(model).run([x, idx])[0]
    np.testing.assert_array_equal(got, want)
