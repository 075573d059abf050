"""bench_cnn's networks (ResNet-50, MobileNetV2, VGG-style, Inception-style) exported by
PyTorch at opsets 9, 13 and 17, imported and compared with ONNX Runtime. CI-sized: 1/8 of the
channels, 32x32 inputs and one block per stage (``short``: the same kinds of block, residual
and downsampling ones included); the full networks run in benchmarks/bench_cnn.py. The numpy
target checks the import at every opset; the cpu target's generated C (a C compile per
kernel, ~40 s) runs ResNet's blocks: 1x1, 3x3, 7x7 and strided convs, residual adds,
pooling, the head; bench_cnn checks every full network on cpu."""

from __future__ import annotations

import functools
import os
import sys

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="the onnx package is not installed")
ort = pytest.importorskip("onnxruntime", reason="onnxruntime is not installed")
torch = pytest.importorskip("torch", reason="torch is not installed")

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import rlx_core as rlx  # noqa: E402
from benchmarks.cnn_nets import NETWORKS, build, export  # noqa: E402
from rlx_core.targets.registry import get_target  # noqa: E402


@functools.cache
def _case(name: str, opset: int, keep_batchnorm: bool = False):
    net = build(name, width=0.125, classes=10, short=True)
    x = np.random.default_rng(1).standard_normal((2, 3, 32, 32)).astype(np.float32)
    data = export(net, torch.from_numpy(x), opset, keep_batchnorm=keep_batchnorm)
    sess = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    return data, x, sess.run(None, {"x": x})[0]


@pytest.mark.parametrize("opset", [9, 13, 17])
@pytest.mark.parametrize("name", sorted(NETWORKS))
def test_network_matches_onnxruntime(name: str, opset: int) -> None:
    data, x, want = _case(name, opset)
    graph = rlx.from_onnx(data)
    assert graph.origin["opset"] == opset and graph.origin["path"] == "direct"
    got = rlx.compile(graph, x, target="numpy", record=False)(x)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


@pytest.mark.slow  # ResNet-50's convolutions compiled for the cpu: run first (tests/conftest.py)
@pytest.mark.parametrize("name", ["resnet50"])
def test_network_on_cpu_matches_onnxruntime(name: str) -> None:
    ok, why = get_target("cpu").available()
    if not ok:
        pytest.skip(f"the cpu target is not available here: {why}")
    data, x, want = _case(name, 13)
    got = rlx.compile(rlx.from_onnx(data), x, target="cpu", record=False)(x)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


def test_unfolded_batchnorm_at_an_old_opset() -> None:
    """Exported with its BatchNormalization nodes kept (as older exporters and model zoos
    leave them): BatchNormalization-9 at opset 9."""
    data, x, want = _case("mobilenet_v2", 9, keep_batchnorm=True)
    model = onnx.load_from_string(data)
    assert any(n.op_type == "BatchNormalization" for n in model.graph.node)
    got = rlx.compile(rlx.from_onnx(data), x, target="numpy", record=False)(x)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


def test_batchnorm_is_folded_into_the_conv_before_it() -> None:
    """Every Conv -> BatchNormalization pair of an unfolded export folds at import: no
    BatchNormalization reaches the graph, and the result still matches ONNX Runtime on cpu."""
    data, x, want = _case("resnet50", 9, keep_batchnorm=True)
    n_bn = sum(n.op_type == "BatchNormalization" for n in onnx.load_from_string(data).graph.node)
    graph = rlx.from_onnx(data)
    assert n_bn > 0 and graph.origin["batchnorm_folded_into_conv"] == n_bn
    assert "batch_norm" not in graph.op_counts() and "rsqrt" not in graph.op_counts()
    got = rlx.compile(graph, x, target="numpy", record=False)(x)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())
