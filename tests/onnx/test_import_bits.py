"""BitShift (every shift amount, in range or not) and BitCast against ONNX's reference."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="the onnx package is not installed")
from _one_node import check_exact as _check  # noqa: E402
from _one_node import model  # noqa: E402
from onnx import helper  # noqa: E402

from rlx_core.frontend.onnx_backend import backend_for  # noqa: E402
from rlx_core.frontend.onnx_import import UnsupportedOp  # noqa: E402


def _model(op: str, ins: dict[str, np.ndarray], out_type: int, opset: int = 28, **attrs):
    return model(op, ins, 1, opset, out_type=out_type, **attrs)


@pytest.mark.parametrize("direction", ["LEFT", "RIGHT"])
@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64, np.uint8, np.uint32])
def test_bitshift_every_amount(direction: str, dtype: type) -> None:
    bits = np.iinfo(dtype).bits
    shifts = np.arange(-2, bits + 3)
    info = np.iinfo(dtype)
    vals = np.array([info.min, -5, -1, 0, 1, 5, 77, info.max], dtype=np.int64)
    vals = vals[(vals >= info.min) & (vals <= info.max)]
    x = np.repeat(vals, len(shifts)).astype(dtype)
    y = np.tile(shifts, len(vals))
    if info.min == 0:  # unsigned shift amounts cannot be negative
        keep = y >= 0
        x, y = x[keep], y[keep]
    ins = {"x": x, "y": y.astype(dtype)}
    _check(_model("BitShift", ins, helper.np_dtype_to_tensor_dtype(np.dtype(dtype)),
                  direction=direction), ins)


def test_bitshift_broadcast_shift() -> None:
    ins = {"x": np.array([[-7, 9, 100], [3, -128, 127]], np.int8),
           "y": np.array([1, 9, 7], np.int8)}
    for d in ("LEFT", "RIGHT"):
        _check(_model("BitShift", ins, onnx.TensorProto.INT8, direction=d), ins)


@pytest.mark.parametrize("src,to", [(np.bool_, np.uint8), (np.int8, np.uint8),
                                    (np.uint32, np.int32), (np.int32, np.uint32)])
def test_bitcast_between_integers(src: type, to: type) -> None:
    x = np.array([0, 1, 2, 127, 200, 255], np.int64) if src is not np.bool_ else \
        np.array([True, False, True])
    x = x.astype(src)
    tt = helper.np_dtype_to_tensor_dtype(np.dtype(to))
    model = _model("BitCast", {"x": x}, tt, to=tt)
    got = backend_for("numpy").prepare(model).run([x])[0]
    np.testing.assert_array_equal(got, x.view(to))


def test_bitcast_float_bits_is_rejected() -> None:
    x = np.array([1.0, -2.5], np.float32)
    model = _model("BitCast", {"x": x}, onnx.TensorProto.INT32, to=onnx.TensorProto.INT32)
    with pytest.raises(UnsupportedOp, match="bitcast"):
        backend_for("numpy").prepare(model).run([x])
