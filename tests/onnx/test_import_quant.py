"""Quantization converters against ONNX's reference, bit for bit: round half to even,
saturation, per-axis and blocked scales, the integer and quantized products."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="the onnx package is not installed")
from _one_node import check_exact as _check  # noqa: E402
from _one_node import model  # noqa: E402

from rlx_core.frontend.onnx_backend import backend_for  # noqa: E402
from rlx_core.frontend.onnx_import import UnsupportedOp  # noqa: E402

RNG = np.random.default_rng(7)


def _model(op: str, ins: dict[str, np.ndarray], n_out: int = 1, opset: int = 25, **attrs):
    return model(op, ins, n_out, opset, **attrs)


@pytest.mark.parametrize("zp_dtype", [np.uint8, np.int8, np.int16])
def test_quantize_rounds_half_to_even_and_saturates(zp_dtype: type) -> None:
    scale = np.float32(0.5)
    # exact halves (k + 0.5) * scale round to even; far values saturate both ways
    x = np.concatenate([(np.arange(-20, 20) + 0.5) * scale,
                        [-1e9, 1e9, -70000.0, 70000.0, 0.0, 3.3]]).astype(np.float32)
    ins = {"x": x, "s": np.array(scale), "z": np.array(3, zp_dtype)}
    _check(_model("QuantizeLinear", ins), ins)


def test_quantize_per_axis_and_blocked_with_a_remainder() -> None:
    x = (RNG.standard_normal((2, 5, 3)) * 40).astype(np.float32)
    ins = {"x": x, "s": np.array([0.5, 1.0, 2.0, 0.25, 3.0], np.float32),
           "z": np.array([0, 10, 250, 128, 7], np.uint8)}
    _check(_model("QuantizeLinear", ins, axis=1), ins)
    ins = {"x": x, "s": np.abs(RNG.standard_normal((2, 2, 3))).astype(np.float32) + 0.1,
           "z": RNG.integers(-20, 20, (2, 2, 3)).astype(np.int8)}
    _check(_model("QuantizeLinear", ins, axis=1, block_size=3), ins)
    _check(_model("DequantizeLinear", {"x": _quantized(x.shape), "s": ins["s"],
                                       "z": ins["z"]}, axis=1, block_size=3),
           {"x": _quantized(x.shape), "s": ins["s"], "z": ins["z"]})


def _quantized(shape: tuple[int, ...]) -> np.ndarray:
    return np.random.default_rng(3).integers(-128, 128, shape).astype(np.int8)


def test_quantize_f16() -> None:
    x = (RNG.standard_normal(64) * 100).astype(np.float16)
    ins = {"x": x, "s": np.array(0.37, np.float16), "z": np.array(-3, np.int8)}
    _check(_model("QuantizeLinear", ins), ins)


def test_quantize_mixed_precision_is_rejected() -> None:
    ins = {"x": np.ones(3, np.float32), "s": np.array(0.5, np.float16)}
    with pytest.raises(UnsupportedOp, match="precision"):
        backend_for("numpy").prepare(_model("QuantizeLinear", ins)).run(list(ins.values()))


@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.int16])
def test_dequantize(dtype: type) -> None:
    info = np.iinfo(dtype)
    x = RNG.integers(info.min, info.max + 1, (3, 4)).astype(dtype)
    ins = {"x": x, "s": np.array([0.1, 2.0, 7.5], np.float32),
           "z": np.array([info.min, 0, info.max], dtype)}
    _check(_model("DequantizeLinear", ins, axis=0), ins)
    ins16 = {"x": x, "s": np.array(0.013, np.float16), "z": np.array(1, dtype)}
    _check(_model("DequantizeLinear", ins16), ins16)


def test_dequantize_i32_without_zero_point() -> None:
    ins = {"x": np.array([-(2 ** 31), -5, 0, 2 ** 31 - 1], np.int32),
           "s": np.array(0.5, np.float32)}
    _check(_model("DequantizeLinear", ins), ins)


@pytest.mark.parametrize("scale", [1.0, 1e-3, 37.0])
def test_dynamic_quantize(scale: float) -> None:
    x = (RNG.standard_normal((4, 6)) * scale).astype(np.float32)
    for v in (x, np.abs(x), -np.abs(x), np.zeros_like(x)):
        _check(_model("DynamicQuantizeLinear", {"x": v}, n_out=3), {"x": v})


def test_matmul_integer_and_qlinear_matmul() -> None:
    a = RNG.integers(0, 256, (2, 3, 5)).astype(np.uint8)
    b = RNG.integers(0, 256, (5, 4)).astype(np.uint8)
    ins = {"a": a, "b": b, "za": np.array(100, np.uint8), "zb": np.array(7, np.uint8)}
    _check(_model("MatMulInteger", ins), ins)
    q = {"a": a, "sa": np.array(0.02, np.float32), "za": np.array(100, np.uint8),
         "b": b, "sb": np.array(0.03, np.float32), "zb": np.array(7, np.uint8),
         "sy": np.array(0.7, np.float32), "zy": np.array(-4, np.int8)}
    _check(_model("QLinearMatMul", q, opset=21), q)


def test_conv_integer_and_qlinear_conv_per_channel() -> None:
    x = RNG.integers(-128, 128, (1, 2, 5, 5)).astype(np.int8)
    w = RNG.integers(-128, 128, (3, 2, 3, 3)).astype(np.int8)
    ins = {"x": x, "w": w, "zx": np.array(-3, np.int8), "zw": np.array([1, -2, 0], np.int8)}
    _check(_model("ConvInteger", ins, opset=10, pads=[1, 1, 1, 1], strides=[2, 1]), ins)
    q = {"x": x, "sx": np.array(0.05, np.float32), "zx": np.array(-3, np.int8),
         "w": w, "sw": np.array([0.01, 0.02, 0.005], np.float32),
         "zw": np.array([1, -2, 0], np.int8), "sy": np.array(0.4, np.float32),
         "zy": np.array(5, np.int8), "bias": np.array([100, -2000, 7], np.int32)}
    _check(_model("QLinearConv", q, opset=10, pads=[0, 1, 0, 1]), q)
