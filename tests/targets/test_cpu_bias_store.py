"""A GEMM whose epilogue is a bias, a ReLU and the ReLU's mask stores them from its register
tiles (rlx_core/targets/cpu/bias_store.py): which kernels take it, and that the results are
the tile epilogue's bit for bit, NaN included."""

from __future__ import annotations

import numpy as np
import pytest

import rlx_core as rlx
from tests.targets.own_sgemm import matmul_source, skip_unless_own_sgemm, three_mlp_steps


def _stored(src: str) -> bool:
    return "rlx_sgemm_bias(" in src or "rlx_sgemm_packed_bias(" in src


FORMS = {
    "x @ w + b": lambda x, w, b: x @ w + b,
    "relu(x @ w + b)": lambda x, w, b: rlx.nn.relu(x @ w + b),
    "relu(x @ w.T + b)": lambda x, w, b: rlx.nn.relu(x @ w.T + b),
}


def _bits(a) -> np.ndarray:
    return np.ascontiguousarray(np.asarray(a, np.float32)).view(np.uint32)


@pytest.mark.parametrize("n", [1, 2])
@pytest.mark.parametrize("form", sorted(FORMS))
@pytest.mark.parametrize("shape", [(128, 784, 128), (100, 30, 200), (37, 64, 96)])
def test_a_bias_and_relu_are_stored_from_the_tiles_as_the_tile_epilogue_writes_them(
        shape: tuple[int, int, int], form: str, n: int, threads,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """K = 784 (two slices; W^T packed by each panel's first tile), K = 30 (a k % 4 tail),
    200 columns (a partial last panel), 100 and 37 rows (edge tiles), 1-2 threads, a NaN in
    one row of x (the ReLU keeps NaN): bit for bit the tile epilogue's result."""
    skip_unless_own_sgemm()
    threads(n)
    m, k, cols = shape
    rng = np.random.default_rng(m + k + cols + n)
    x = rng.standard_normal((m, k), np.float32)
    x[3, 5] = np.nan
    w = rng.standard_normal((cols, k) if "w.T" in form else (k, cols), np.float32)
    b = rng.standard_normal(cols).astype(np.float32)
    f = FORMS[form]
    exe = rlx.compile(f, x, w, b, target="cpu", record=False)
    assert _stored(matmul_source(exe)), matmul_source(exe)
    monkeypatch.setenv("RLX_NO_BIAS_STORE", "1")
    tiled = rlx.compile(f, x, w, b, target="cpu", record=False)
    assert not _stored(matmul_source(tiled))
    got = np.asarray(exe(x, w, b))
    np.testing.assert_array_equal(_bits(got), _bits(tiled(x, w, b)))
    assert np.isnan(got[3]).all()
    ref = x.astype(np.float64) @ (w.T if "w.T" in form else w) + b
    if "relu" in form:
        ref = np.maximum(ref, 0.0)
    np.testing.assert_allclose(np.delete(got, 3, 0), np.delete(ref, 3, 0), rtol=1e-4, atol=1e-4)


def test_other_epilogues_are_not_bias_stores() -> None:
    """``max(0, t)`` (it turns -0 the other way), a bias along the rows, a ReLU at another
    threshold, and a bias with a GELU keep their tile epilogues, and compute the right thing."""
    skip_unless_own_sgemm()
    rng = np.random.default_rng(5)
    x, w = rng.standard_normal((128, 96), np.float32), rng.standard_normal((96, 64), np.float32)
    cols, rows = rng.standard_normal(64).astype(np.float32), rng.standard_normal((128, 1),
                                                                                  np.float32)
    cases = [
        (lambda a, c, d: rlx.maximum(0.0, a @ c + d), cols,
         lambda r, d: np.maximum(r + d, 0.0)),
        (lambda a, c, d: a @ c + d, rows, lambda r, d: r + d),
        (lambda a, c, d: rlx.maximum(a @ c + d, 0.5), cols, lambda r, d: np.maximum(r + d, 0.5)),
    ]
    for f, third, ref in cases:
        exe = rlx.compile(f, x, w, third, target="cpu", record=False)
        assert not _stored(matmul_source(exe)), matmul_source(exe)
        np.testing.assert_allclose(exe(x, w, third), ref(x.astype(np.float64) @ w, third),
                                   rtol=1e-4, atol=1e-4)


def test_the_mlp_training_step_stores_its_relu_and_mask_from_the_forward_gemm(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """784-128-10 at batch 128: the forward GEMM stores bias + ReLU and the ReLU's mask (read
    by the backward pass) from its tiles, and three steps give the parameters of the
    tile-epilogue build bit for bit."""
    skip_unless_own_sgemm()
    step = three_mlp_steps()
    calls = [line for src in step.executable.program.sources.values()
             for line in src.splitlines() if "rlx_sgemm_bias(" in line and ";" in line]
    assert calls and all(line.rstrip().endswith(", 1);") and "- out0), 1)" in line
                         for line in calls), calls  # the mask pointer and the ReLU flag
    monkeypatch.setenv("RLX_NO_BIAS_STORE", "1")
    tiled = three_mlp_steps()
    assert not any(_stored(src) for src in tiled.executable.program.sources.values())
    for layer in ("fc1", "fc2"):
        for leaf in ("weight", "bias"):
            np.testing.assert_array_equal(_bits(step.params[layer][leaf]),
                                          _bits(tiled.params[layer][leaf]))
