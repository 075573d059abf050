"""ONNX DFT, STFT, window and mel-matrix ops through the importer, against numpy's FFT and
onnx's reference evaluator."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnx", reason="the onnx package is not installed")
from _one_node import check, model  # noqa: E402

from rlx_core.frontend.onnx_import import UnsupportedOp, import_model  # noqa: E402


@pytest.mark.parametrize("parts", [1, 2])
@pytest.mark.parametrize("length", [None, 6, 12])
@pytest.mark.parametrize("target", ["numpy", "cpu"])
def test_dft_forward_matches_numpy_fft(parts: int, length: int | None, target: str) -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 9, 3, parts)).astype(np.float32)
    consts = {"len": np.array(length, np.int64)} if length else {}
    m = model("DFT", {"x": x}, opset=19, consts=consts, axis=1)
    got = check(m, {"x": x}, target=target, rtol=1e-4, atol=1e-4)[0]
    z = x[..., 0] + (1j * x[..., 1] if parts == 2 else 0)
    want = np.fft.fft(z.astype(np.complex128), n=length, axis=1)
    np.testing.assert_allclose(got[..., 0] + 1j * got[..., 1], want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("length", [8, 9])
def test_rfft_and_irfft(length: int) -> None:
    rng = np.random.default_rng(1)
    x = rng.standard_normal((3, length, 1)).astype(np.float32)
    axis = {"axis": np.array(1, np.int64)}
    m = model("DFT", {"x": x}, opset=20, consts={"len": np.array(length, np.int64), **axis},
              onesided=1)
    spec = check(m, {"x": x}, rtol=1e-4, atol=1e-4)[0]
    m = model("DFT", {"s": spec}, opset=20, consts={"len": np.array(length, np.int64), **axis},
              onesided=1, inverse=1)
    back = check(m, {"s": spec}, rtol=1e-4, atol=1e-4)[0]
    np.testing.assert_allclose(back, x, rtol=1e-4, atol=1e-4)


def test_complex_inverse_dft_is_refused() -> None:
    x = np.zeros((1, 4, 2), np.float32)
    with pytest.raises(UnsupportedOp, match="complex inverse"):
        import_model(model("DFT", {"x": x}, opset=19, axis=1, inverse=1))


@pytest.mark.parametrize("target", ["numpy", "cpu"])
def test_stft_with_window(target: str) -> None:
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 40, 1)).astype(np.float32)
    w = rng.uniform(0.5, 1.0, 8).astype(np.float32)
    inputs = {"x": x, "step": np.array(3, np.int64), "w": w}
    check(model("STFT", inputs, opset=17), inputs, target=target, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("op", ["HannWindow", "HammingWindow", "BlackmanWindow"])
@pytest.mark.parametrize("periodic", [0, 1])
def test_windows(op: str, periodic: int) -> None:
    inputs = {"size": np.array(7, np.int32)}
    check(model(op, inputs, opset=17, periodic=periodic), inputs)


def test_mel_weight_matrix() -> None:
    inputs = {"bins": np.array(6, np.int32), "dft": np.array(32, np.int32),
              "rate": np.array(8000, np.int32), "lo": np.array(100.0, np.float32),
              "hi": np.array(3500.0, np.float32)}
    check(model("MelWeightMatrix", inputs, opset=17), inputs)
