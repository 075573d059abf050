"""Models quantized by ONNX Runtime's own tools (quantize_dynamic, quantize_static in the QDQ
and QOperator formats, per tensor and per channel) import into rlx's explicit quantization ops
and match ONNX Runtime.

The reference is ONNX Runtime with graph optimizations off (each node run as the model says):
statically quantized models (QDQ and QOperator) match it bit for bit on numpy and cpu;
dynamically quantized ones keep f32 ops after the dequantization (the rescale, Sigmoid, the
mean), whose last bit may differ from ONNX Runtime's (checked to 1e-6 relative). ONNX Runtime's optimized session fuses QDQ groups into
integer kernels that round once less; it is checked to within two steps of the output scale.

Weights are quantized with ``reduce_range=True`` (7 bits): without it ONNX Runtime's AVX2
u8 x s8 kernel (``vpmaddubsw``) saturates 16-bit pair sums on CPUs without VNNI, and its
answer, not rlx's exact i32 sum, is then the wrong one (seen on this machine's EPYC).
"""

from __future__ import annotations

import os

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="the onnx package is not installed")
ort = pytest.importorskip("onnxruntime", reason="onnxruntime is not installed")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from onnxruntime.quantization import (  # noqa: E402
    CalibrationDataReader,
    QuantFormat,
    QuantType,
    quantize_dynamic,
    quantize_static,
)

import rlx_core as rlx  # noqa: E402
from rlx_core.frontend.onnx_backend import backend_for  # noqa: E402

RNG = np.random.default_rng(26)


def _init(name: str, *shape: int, scale: float = 0.3) -> onnx.TensorProto:
    return numpy_helper.from_array((RNG.standard_normal(shape) * scale).astype(np.float32), name)


def _mlp() -> tuple[onnx.ModelProto, tuple[int, ...]]:
    """MatMul + Add + Relu, then Gemm (torch.nn.Linear's export)."""
    nodes = [helper.make_node("MatMul", ["x", "W1"], ["h"]),
             helper.make_node("Add", ["h", "b1"], ["h1"]),
             helper.make_node("Relu", ["h1"], ["h2"]),
             helper.make_node("Gemm", ["h2", "W2", "b2"], ["y"], transB=1)]
    g = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", 1, [4, 16])],
                          [helper.make_tensor_value_info("y", 1, [4, 8])],
                          [_init("W1", 16, 32), _init("b1", 32, scale=0.1),
                           _init("W2", 8, 32), _init("b2", 8, scale=0.1)])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), (4, 16)


def _cnn() -> tuple[onnx.ModelProto, tuple[int, ...]]:
    """Conv, Relu, Add, Mul, Sigmoid, LeakyRelu, Concat, MaxPool, GlobalAveragePool."""
    nodes = [helper.make_node("Conv", ["x", "W", "b"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("Conv", ["r", "W2"], ["c2"], pads=[1, 1, 1, 1]),
             helper.make_node("Add", ["r", "c2"], ["a"]),
             helper.make_node("Mul", ["a", "c2"], ["m"]),
             helper.make_node("Sigmoid", ["m"], ["s"]),
             helper.make_node("LeakyRelu", ["a"], ["lr"], alpha=0.1),
             helper.make_node("Concat", ["s", "lr"], ["cat"], axis=1),
             helper.make_node("MaxPool", ["cat"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("GlobalAveragePool", ["p"], ["y"])]
    g = helper.make_graph(nodes, "cnn", [helper.make_tensor_value_info("x", 1, [2, 3, 8, 8])],
                          [helper.make_tensor_value_info("y", 1, [2, 8, 1, 1])],
                          [_init("W", 4, 3, 3, 3), _init("b", 4, scale=0.1),
                           _init("W2", 4, 4, 3, 3)])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), (2, 3, 8, 8)


MODELS = {"mlp": _mlp, "cnn": _cnn}


class _Batches(CalibrationDataReader):
    def __init__(self, shape: tuple[int, ...]) -> None:
        rng = np.random.default_rng(1)
        self._it = iter([{"x": rng.standard_normal(shape).astype(np.float32)}
                         for _ in range(4)])

    def get_next(self) -> dict | None:
        return next(self._it, None)


def _quantize(tmp: str, model: str, how: str, per_channel: bool) -> tuple[onnx.ModelProto,
                                                                           tuple[int, ...]]:
    proto, shape = MODELS[model]()
    src, dst = os.path.join(tmp, "f32.onnx"), os.path.join(tmp, "q.onnx")
    onnx.save(proto, src)
    if how.startswith("dynamic"):
        wt = QuantType.QInt8 if how == "dynamic_s8" else QuantType.QUInt8
        quantize_dynamic(src, dst, weight_type=wt, per_channel=per_channel, reduce_range=True)
    else:
        fmt = QuantFormat.QDQ if how == "qdq" else QuantFormat.QOperator
        quantize_static(src, dst, _Batches(shape), quant_format=fmt, per_channel=per_channel,
                        reduce_range=True)
    return onnx.load(dst), shape


def _ort(m: onnx.ModelProto, x: np.ndarray, optimize: bool) -> np.ndarray:
    so = ort.SessionOptions()
    if not optimize:
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return sess.run(None, {"x": x})[0]


def _output_step(m: onnx.ModelProto) -> float:
    """The scale of the model's last DequantizeLinear (0 when its output is not quantized)."""
    inits = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    dq = [n for n in m.graph.node if n.op_type == "DequantizeLinear"
          and n.output[0] == m.graph.output[0].name]
    return float(inits[dq[0].input[1]].max()) if dq else 0.0


CASES = [(model, how, pc) for model in MODELS
         for how in ("dynamic_s8", "dynamic_u8", "qdq", "qoperator") for pc in (False, True)
         if not (model == "cnn" and how.startswith("dynamic") and pc)]


@pytest.mark.parametrize("model,how,per_channel", CASES,
                         ids=[f"{m}-{h}-{'pc' if p else 'pt'}" for m, h, p in CASES])
def test_ort_quantized_model_matches_onnx_runtime(tmp_path, model: str, how: str,
                                                  per_channel: bool) -> None:
    m, shape = _quantize(str(tmp_path), model, how, per_channel)
    x = np.random.default_rng(5).standard_normal(shape).astype(np.float32)
    want = _ort(m, x, optimize=False)
    ops = {n.op for n in rlx.from_onnx(m).nodes}
    # the quantization is explicit in rlx's IR: rlx's own ops, the integer GEMM where an
    # integer product has a weight for B (the QDQ form keeps its float MatMul between
    # dequantize and quantize, as written; ConvInteger/QLinearConv an exact f64 convolution)
    if how == "qdq" or how == "qoperator":
        assert {"quantize", "dequantize"} <= ops, ops
    if model == "mlp" and how != "qdq":
        assert "int_linear" in ops, ops
    for target in ("numpy", "cpu"):
        got = backend_for(target).prepare(m, "CPU").run([x])[0]
        if how.startswith("dynamic"):  # f32 math after the dequantization (1 ulp apart)
            np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
        else:
            np.testing.assert_array_equal(got, want)
    step = _output_step(m)
    fused = _ort(m, x, optimize=True)
    np.testing.assert_allclose(got, fused, rtol=0, atol=max(2 * step, 1e-5))


def test_contrib_ops_of_the_qoperator_form_are_read(tmp_path) -> None:
    m, _ = _quantize(str(tmp_path), "cnn", "qoperator", False)
    contrib = {n.op_type for n in m.graph.node if n.domain == "com.microsoft"}
    assert {"QLinearAdd", "QLinearMul", "QLinearSigmoid", "QLinearLeakyRelu",
            "QLinearConcat", "QLinearGlobalAveragePool"} <= contrib, contrib
    m, _ = _quantize(str(tmp_path), "mlp", "qoperator", True)
    assert "QGemm" in {n.op_type for n in m.graph.node if n.domain == "com.microsoft"}


def test_unknown_contrib_op_is_reported(tmp_path) -> None:
    from rlx_core.frontend.onnx_import import UnsupportedOp

    node = helper.make_node("QAttention", ["x"], ["y"], domain="com.microsoft")
    g = helper.make_graph([node], "t", [helper.make_tensor_value_info("x", 1, [2])],
                          [helper.make_tensor_value_info("y", 1, [2])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17),
                                            helper.make_opsetid("com.microsoft", 1)])
    with pytest.raises(UnsupportedOp, match="QAttention"):
        rlx.from_onnx(m)


def test_qlinear_add_broadcasts_and_saturates() -> None:
    """QLinearAdd on its own, against the schema's rule computed in numpy."""
    a = RNG.integers(0, 256, (3, 4)).astype(np.uint8)
    b = RNG.integers(0, 256, (4,)).astype(np.uint8)
    sa, za, sb, zb, sc, zc = 0.05, 120, 0.2, 3, 0.1, 128
    ins = [a, np.float32(sa), np.uint8(za), b, np.float32(sb), np.uint8(zb), np.float32(sc),
           np.uint8(zc)]
    names = ["a", "sa", "za", "b", "sb", "zb", "sc", "zc"]
    node = helper.make_node("QLinearAdd", names, ["y"], domain="com.microsoft")
    g = helper.make_graph([node], "t", [helper.make_tensor_value_info(
        k, helper.np_dtype_to_tensor_dtype(np.asarray(v).dtype), np.asarray(v).shape)
        for k, v in zip(names, ins, strict=True)],
        [helper.make_tensor_value_info("y", TensorProto.UINT8, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17),
                                            helper.make_opsetid("com.microsoft", 1)])
    real = (np.float32(sa) * (a.astype(np.int32) - za).astype(np.float32)
            + np.float32(sb) * (b.astype(np.int32) - zb).astype(np.float32))
    want = np.clip(np.round(real / np.float32(sc)) + zc, 0, 255).astype(np.uint8)
    for target in ("numpy", "cpu"):
        got = backend_for(target).prepare(m, "CPU").run([np.asarray(v) for v in ins])[0]
        np.testing.assert_array_equal(got, want)
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    ref = sess.run(None, dict(zip(names, [np.asarray(v) for v in ins], strict=True)))[0]
    assert np.abs(ref.astype(np.int32) - want.astype(np.int32)).max() <= 1
