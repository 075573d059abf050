"""A GEMM whose epilogue is an update ``W -/+ c * dot`` stores it from its register tiles
(rlx_core/targets/cpu/update_store.py): which kernels take it, and that the results are the
block epilogue's bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

import rlx_core as rlx
from tests.targets.own_sgemm import matmul_source, skip_unless_own_sgemm, three_mlp_steps


def _stored(exe) -> bool:
    return "rlx_sgemm_upd(" in matmul_source(exe)


def _same_bits(got: np.ndarray, want: np.ndarray, ulps: int = 1) -> None:
    """Bit for bit under GCC, whose default -ffp-contract=fast makes the block epilogue's
    ``W - c * g`` an FMA as the update store's is; another compiler may round the product
    apart (``ulps``: one per update)."""
    from rlx_core.targets.cpu.toolchain import find_compiler, is_gcc

    np.testing.assert_array_max_ulp(got, want, maxulp=0 if is_gcc(find_compiler().version)
                                    else ulps)


UPDATES = {
    "w - c*dot": lambda g, x, w: w - 0.01 * (g.T @ x),
    "w - dot*c": lambda g, x, w: w - (g.T @ x) * 0.25,
    "w + c*dot": lambda g, x, w: w + 0.5 * (g.T @ x),
    "c*dot + w": lambda g, x, w: 0.5 * (g.T @ x) + w,
}


@pytest.mark.parametrize("n", [1, 2, 3])
@pytest.mark.parametrize("form", sorted(UPDATES))
@pytest.mark.parametrize("batch", [128, 1024])
def test_an_update_is_stored_from_the_tiles_as_the_block_epilogue_writes_it(
        batch: int, form: str, n: int, threads, monkeypatch: pytest.MonkeyPatch) -> None:
    """``w - c * (g^T x)`` and its other spellings: K = 128 (one slice, B read in place) and
    K = 1024 (several slices: C holds partial sums until the last), 200 columns (a partial
    last panel), 1-3 threads; bit for bit the block epilogue's result."""
    skip_unless_own_sgemm()
    threads(n)
    rng = np.random.default_rng(batch + n)
    g = rng.standard_normal((batch, 96), np.float32)
    x = rng.standard_normal((batch, 200), np.float32)
    w = rng.standard_normal((96, 200), np.float32)
    f = UPDATES[form]
    exe = rlx.compile(f, g, x, w, target="cpu", record=False)
    assert _stored(exe), matmul_source(exe)
    monkeypatch.setenv("RLX_NO_UPDATE_STORE", "1")
    block = rlx.compile(f, g, x, w, target="cpu", record=False)
    assert not _stored(block)
    got = np.asarray(exe(g, x, w))
    _same_bits(got, np.asarray(block(g, x, w)))
    np.testing.assert_allclose(got, f(g.astype(np.float64), x, w), rtol=1e-4, atol=1e-3)


def test_other_epilogues_are_not_update_stores() -> None:
    """``c * dot - w`` (W negated), a bias row (smaller than C) and a non-finite scale keep
    their usual epilogues, and compute the right thing."""
    skip_unless_own_sgemm()
    rng = np.random.default_rng(3)
    g, x = rng.standard_normal((128, 96), np.float32), rng.standard_normal((128, 200), np.float32)
    w = rng.standard_normal((96, 200), np.float32)
    b = rng.standard_normal(200).astype(np.float32)
    cases = [(lambda gg, xx, ww: 0.01 * (gg.T @ xx) - ww, w),
             (lambda gg, xx, bb: bb - 0.01 * (gg.T @ xx), b)]
    for f, third in cases:
        exe = rlx.compile(f, g, x, third, target="cpu", record=False)
        assert not _stored(exe), matmul_source(exe)
        np.testing.assert_allclose(exe(g, x, third), f(g.astype(np.float64), x, third),
                                   rtol=1e-4, atol=1e-3)


def test_the_mlp_training_step_stores_its_sgd_update_from_the_weight_gradient(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """784-128-10 at batch 128: W1's update is written by the weight gradient's tiles, and
    three steps give the parameters of the block-epilogue build exactly."""
    skip_unless_own_sgemm()
    step = three_mlp_steps()
    sources = step.executable.program.sources
    assert any("rlx_sgemm_upd(" in src for src in sources.values())
    monkeypatch.setenv("RLX_NO_UPDATE_STORE", "1")
    block = three_mlp_steps()
    assert not any("rlx_sgemm_upd(" in src for src in block.executable.program.sources.values())
    for layer in ("fc1", "fc2"):
        for leaf in ("weight", "bias"):
            _same_bits(step.params[layer][leaf], block.params[layer][leaf], ulps=64)
