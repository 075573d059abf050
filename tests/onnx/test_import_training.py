"""Training ops against ONNX's reference: the preview-domain optimizers over several steps,
BatchNormalization in training mode, seeded training-mode Dropout."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="the onnx package is not installed")
from _one_node import model  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

from rlx_core.frontend.onnx_backend import backend_for  # noqa: E402
from rlx_core.frontend.onnx_import import UnsupportedOp  # noqa: E402

RNG = np.random.default_rng(5)
TRAINING = "ai.onnx.preview.training"


def _model(op: str, ins: dict[str, np.ndarray], outs: list[str], domain: str = "", **attrs):
    return model(op, ins, len(outs), 22, domain, **attrs)


def _check(model, ins: dict[str, np.ndarray], rtol: float = 1e-6, target: str = "numpy"):
    want = ReferenceEvaluator(model).run(None, ins)
    got = backend_for(target).prepare(model).run(list(ins.values()))
    for g, w in zip(got, want, strict=False):
        np.testing.assert_allclose(g, np.asarray(w).astype(g.dtype), rtol=rtol, atol=1e-7)


def _state(n: int, shapes=((3,), (2, 2))) -> dict[str, np.ndarray]:
    out = {}
    for kind in ("X", "G", "V", "H")[:n]:
        for i, s in enumerate(shapes):
            v = RNG.standard_normal(s).astype(np.float32)
            out[f"{kind}{i}"] = np.abs(v) if kind == "H" else v
    return out


@pytest.mark.parametrize("step", [0, 1, 7])
@pytest.mark.parametrize("mode", ["standard", "nesterov"])
def test_momentum(step: int, mode: str) -> None:
    ins = {"R": np.array(0.1, np.float32), "T": np.array(step, np.int64), **_state(3)}
    outs = ["X0n", "X1n", "V0n", "V1n"]
    _check(_model("Momentum", ins, outs, TRAINING, alpha=0.9, beta=0.3, mode=mode,
                  norm_coefficient=0.01), ins)


@pytest.mark.parametrize("step", [0, 3])
def test_adam_and_adagrad(step: int) -> None:
    ins = {"R": np.array(0.05, np.float32), "T": np.array(step, np.int64), **_state(4)}
    outs = ["X0n", "X1n", "V0n", "V1n", "H0n", "H1n"]
    _check(_model("Adam", ins, outs, TRAINING, alpha=0.8, beta=0.95, epsilon=1e-3,
                  norm_coefficient=0.02, norm_coefficient_post=0.01), ins)
    ins = {"R": np.array(0.05, np.float32), "T": np.array(step, np.int64),
           **{k.replace("V", "H"): v for k, v in _state(3).items()}}
    ins = {k: (np.abs(v) if k.startswith("H") else v) for k, v in ins.items()}
    _check(_model("Adagrad", ins, ["X0n", "X1n", "H0n", "H1n"], TRAINING, decay_factor=0.1,
                  epsilon=1e-4, norm_coefficient=0.01), ins)


def test_batchnorm_training_mode() -> None:
    x = RNG.standard_normal((3, 4, 2, 5)).astype(np.float32) * 3 + 1
    ins = {"x": x, "s": RNG.standard_normal(4).astype(np.float32),
           "b": RNG.standard_normal(4).astype(np.float32),
           "m": RNG.standard_normal(4).astype(np.float32),
           "v": np.abs(RNG.standard_normal(4)).astype(np.float32)}
    _check(_model("BatchNormalization", ins, ["y", "rm", "rv"], training_mode=1,
                  momentum=0.7, epsilon=1e-3), ins, rtol=1e-5)


@pytest.mark.parametrize("ratio", [0.3, 0.5, 0.9])
def test_seeded_training_dropout(ratio: float) -> None:
    x = RNG.standard_normal((4, 6)).astype(np.float32)
    ins = {"x": x, "r": np.array(ratio, np.float32), "t": np.array(True)}
    model = _model("Dropout", ins, ["y", "z"], seed=3)
    want = ReferenceEvaluator(model).run(None, ins)
    got = backend_for("numpy").prepare(model).run(list(ins.values()))
    np.testing.assert_array_equal(got[1], want[1])
    np.testing.assert_array_equal(got[0], want[0])


def test_unseeded_training_dropout_is_rejected() -> None:
    ins = {"x": np.ones((2, 2), np.float32), "r": np.array(0.5, np.float32),
           "t": np.array(True)}
    with pytest.raises(UnsupportedOp, match="seed"):
        backend_for("numpy").prepare(_model("Dropout", ins, ["y"])).run(list(ins.values()))
