"""The ONNX backend and the model helpers run on the fastest available target by default;
the numpy interpreter (the oracle) only when named, or with a warning when nothing else runs."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="the onnx package is not installed")
from onnx import helper  # noqa: E402

from rlx_core.frontend.onnx_backend import RlxBackend, backend_for  # noqa: E402
from rlx_core.targets import registry  # noqa: E402


def _relu_model() -> onnx.ModelProto:
    x = helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2, 3])
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def test_backend_prepare_on_cpu_device_runs_on_the_cpu_target() -> None:
    ok, why = registry.get_target("cpu").available()
    if not ok:
        pytest.skip(f"the cpu target is not available here: {why}")
    rep = RlxBackend.prepare(_relu_model(), device="CPU")
    assert rep.target == "cpu"
    x = np.array([[-1, 2, -3], [4, -5, 6]], np.float32)
    (y,) = rep.run([x])
    np.testing.assert_array_equal(y, np.maximum(x, 0))
    assert rep.compiled[0][1].exe.target == "cpu"


def test_numpy_stays_selectable() -> None:
    rep = backend_for("numpy").prepare(_relu_model(), device="CPU")
    assert rep.target == "numpy"


def test_default_is_never_silently_the_oracle(monkeypatch) -> None:
    class _Off:
        def available(self) -> tuple[bool, str]:
            return False, "switched off for this test"

    monkeypatch.setattr(registry, "get_target", lambda name: _Off())
    registry.default_target.cache_clear()
    try:
        with pytest.warns(RuntimeWarning, match="numpy reference interpreter"):
            assert registry.default_target() == "numpy"
    finally:
        registry.default_target.cache_clear()


def test_model_helpers_default_to_the_fastest_target() -> None:
    from rlx_core.models.minilm import MiniLM
    from rlx_core.models.train_mnist import accuracy, train_mlp

    for fn in (MiniLM.embed, MiniLM.compiled, accuracy, train_mlp):
        assert inspect.signature(fn).parameters["target"].default is None, fn
    assert registry.resolve_target(None) == registry.default_target()
    assert registry.resolve_target("numpy") == "numpy"
