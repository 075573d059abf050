"""ONNX Atan/Asin/Acos, built from existing primitives: within a few ULPs of numpy over the
whole domain (and NaN outside it), on numpy and cpu."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnx", reason="the onnx package is not installed")
from _one_node import model  # noqa: E402

from rlx_core.frontend.onnx_backend import backend_for  # noqa: E402

FNS = {"Atan": np.arctan, "Asin": np.arcsin, "Acos": np.arccos}


def _inputs(op: str, dtype: type) -> np.ndarray:
    if op == "Atan":
        x = np.concatenate([np.linspace(-5, 5, 2001), np.geomspace(1e-30, 1e30, 300),
                            -np.geomspace(1e-30, 1e30, 300), [0.0, np.inf, -np.inf, np.nan]])
    else:
        x = np.concatenate([np.linspace(-1, 1, 4001), 1 - np.geomspace(1e-7, 0.5, 200),
                            -1 + np.geomspace(1e-7, 0.5, 200), [1.5, -1.5, np.nan]])
    return x.astype(dtype)


@pytest.mark.parametrize("op", list(FNS))
@pytest.mark.parametrize("dtype,ulps", [(np.float32, 4), (np.float64, 8)])
@pytest.mark.parametrize("target", ["numpy", "cpu"])
def test_inverse_trig_precision(op: str, dtype: type, ulps: int, target: str) -> None:
    x = _inputs(op, dtype)
    with np.errstate(invalid="ignore"):
        want = FNS[op](x)
    got = backend_for(target).prepare(model(op, {"x": x}), "CPU").run([x])[0]
    assert got.dtype == x.dtype
    assert np.array_equal(np.isnan(got), np.isnan(want))
    ok = ~np.isnan(want)
    err = np.abs(got[ok].astype(np.float64) - want[ok])
    tol = ulps * np.spacing(np.abs(want[ok]).astype(dtype)).astype(np.float64)
    assert (err <= np.maximum(tol, ulps * np.finfo(dtype).tiny)).all(), err.max()
