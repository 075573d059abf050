"""GEMM epilogues run tile by tile inside rlx's own kernel (rlx_core/targets/cpu/tile_epilogue.py):
which GEMMs get a tile function, and that the results are those of the block epilogue."""

from __future__ import annotations

import numpy as np
import pytest

import rlx_core as rlx
from tests.targets.own_sgemm import matmul_source, skip_unless_own_sgemm


def _tiled(exe) -> bool:
    return "_tile, &tctx)" in matmul_source(exe)


@pytest.mark.parametrize("n", [1, 2, 3])
@pytest.mark.parametrize("shape", [(100, 784, 96), (128, 64, 70), (5, 48, 64, 40)])
def test_bias_relu_epilogues_run_per_tile_and_match_the_block_epilogue(
        shape: tuple[int, ...], n: int, threads, monkeypatch: pytest.MonkeyPatch) -> None:
    """A bias + ReLU epilogue (it reads nothing as large as C) gets a tile function: row
    splits, column shares (K past one KC slice), a partial last panel, batches (5 x 48 x 64
    times 5 x 64 x 40); the result is bit for bit the block epilogue's. (One batch of it is
    stored from the registers, bias_store.py, unless RLX_NO_BIAS_STORE=1.)"""
    skip_unless_own_sgemm()
    monkeypatch.setenv("RLX_NO_BIAS_STORE", "1")
    threads(n)
    rng = np.random.default_rng(sum(shape) + n)
    if len(shape) == 3:
        m, k, cols = shape
        a, w = rng.standard_normal((m, k), np.float32), rng.standard_normal((k, cols), np.float32)
    else:
        b, m, k, cols = shape
        a = rng.standard_normal((b, m, k), np.float32)
        w = rng.standard_normal((b, k, cols), np.float32)
    bias = rng.standard_normal(cols).astype(np.float32)

    def f(x, y, z):
        return rlx.nn.relu(x @ y + z)

    exe = rlx.compile(f, a, w, bias, target="cpu", record=False)
    assert _tiled(exe), matmul_source(exe)
    monkeypatch.setenv("RLX_NO_TILE_EPILOGUE", "1")
    block = rlx.compile(f, a, w, bias, target="cpu", record=False)
    assert not _tiled(block)
    got = np.asarray(exe(a, w, bias))
    assert np.array_equal(got, np.asarray(block(a, w, bias)))
    want = np.maximum(a.astype(np.float64) @ w + bias, 0.0)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_an_epilogue_streaming_an_operand_as_large_as_c_keeps_the_block_epilogue(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """An SGD-style update ``w - lr * (g^T x)`` reads a weight as large as C: tile by tile it
    would read it in 8-row pieces, so the block epilogue stays (tile_epilogue.STREAMED) when
    the update is not stored from the tiles (update_store.py, off here)."""
    skip_unless_own_sgemm()
    monkeypatch.setenv("RLX_NO_UPDATE_STORE", "1")
    rng = np.random.default_rng(1)
    g, x = rng.standard_normal((128, 96), np.float32), rng.standard_normal((128, 200), np.float32)
    w = rng.standard_normal((96, 200), np.float32)

    def f(gg, xx, ww):
        return ww - 0.01 * (gg.T @ xx)

    exe = rlx.compile(f, g, x, w, target="cpu", record=False)
    assert not _tiled(exe), matmul_source(exe)
    np.testing.assert_allclose(exe(g, x, w), w - 0.01 * (g.T.astype(np.float64) @ x),
                               rtol=1e-4, atol=1e-4)


def test_claimed_column_chunks_keep_the_block_epilogue() -> None:
    """A prepacked weight in a GEMM of at most 256 rows is shared out in claimed 64-column
    chunks; each chunk's block epilogue reads C while it is still in cache, and tiles there
    gained nothing, so no tile function is written."""
    skip_unless_own_sgemm()
    rng = np.random.default_rng(2)
    x = rng.standard_normal((128, 96), np.float32)
    w, bias = rng.standard_normal((256, 96), np.float32), rng.standard_normal(256).astype(np.float32)

    def f(xx):
        return rlx.nn.relu(rlx.nn.linear(xx, rlx.param(w, "w"), rlx.param(bias, "b")))

    exe = rlx.compile(f, x, target="cpu", record=False)
    src = matmul_source(exe)
    assert "rlx_team_take(rlx_work, " in src and not _tiled(exe), src
    np.testing.assert_allclose(exe(x), np.maximum(x.astype(np.float64) @ w.T + bias, 0.0),
                               rtol=1e-4, atol=1e-4)


def test_kernels_with_the_same_tile_epilogue_share_one_function(
        threads, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two layers of the same shape render to the same code up to their names, tile
    function included: the second kernel is a wrapper calling the first (renderer.share),
    so the C compiler sees one copy. (Bias + ReLU is a bias store unless RLX_NO_BIAS_STORE=1:
    bias_store.py.)"""
    skip_unless_own_sgemm()
    monkeypatch.setenv("RLX_NO_BIAS_STORE", "1")
    threads(2)
    rng = np.random.default_rng(3)
    x = rng.standard_normal((100, 64), np.float32)
    w1, w2 = (rng.standard_normal((64, 64), np.float32) for _ in range(2))
    b1, b2 = (rng.standard_normal(64).astype(np.float32) for _ in range(2))

    def f(a, p, q, c, d):
        return rlx.nn.relu(rlx.nn.relu(a @ p + c) @ q + d)

    exe = rlx.compile(f, x, w1, w2, b1, b2, target="cpu", record=False)
    first, second = [exe.program.sources[k.name] for k in exe.lir.kernels if k.kind == "matmul"]
    assert "_tile, &tctx)" in first and "same code as" in second and "_tile(" not in second
    h = np.maximum(x.astype(np.float64) @ w1 + b1, 0.0)
    np.testing.assert_allclose(exe(x, w1, w2, b1, b2), np.maximum(h @ w2 + b2, 0.0),
                               rtol=1e-4, atol=1e-4)
