"""cholesky on webgpu (WGSL, webgpu/linalg.py) on wgpu's adapter (Mesa lavapipe here) against
the f64 reference: batches, a 1 x 1 and a 70 x 70 matrix (more rows than the workgroup has
invocations), only the lower triangle read, and NaN for a batch entry that is not positive
definite (the reference's semantics), next to a good one."""

from __future__ import annotations

import numpy as np
import pytest

import rlx_core as rlx
from rlx_core.targets.registry import get_target

ok, why = get_target("webgpu").available()
pytestmark = pytest.mark.skipif(not ok, reason=f"webgpu unavailable: {why}")
RNG = np.random.default_rng(29)


def spd(shape: tuple[int, ...]) -> np.ndarray:
    n = shape[-1]
    b = RNG.standard_normal(shape)
    return b @ np.swapaxes(b, -1, -2) + n * np.eye(n)


@pytest.mark.parametrize("shape", [(1, 1), (5, 5), (2, 3, 33, 33), (70, 70)])
def test_cholesky_matches_the_reference(shape: tuple[int, ...]) -> None:
    a = spd(shape)
    want = np.linalg.cholesky(a)
    n = shape[-1]
    garbage = a.astype(np.float32)
    iu = np.triu_indices(n, 1)
    garbage[..., iu[0], iu[1]] = 99.0  # the upper triangle is never read
    exe = rlx.compile(rlx.linalg.cholesky, garbage, target="webgpu")
    got = np.asarray(exe(garbage))
    assert got.dtype == np.float32 and got.shape == shape
    np.testing.assert_allclose(got, want, rtol=0, atol=2e-6 * np.abs(want).max() * n)
    assert (got[..., iu[0], iu[1]] == 0).all()


def test_not_positive_definite_is_nan_for_that_entry_only() -> None:
    a = np.stack([spd((6, 6)), -np.eye(6), np.diag([1.0, 2.0, 0.0, 3.0, 4.0, 5.0]),
                  np.full((6, 6), np.nan)]).astype(np.float32)
    got = np.asarray(rlx.compile(rlx.linalg.cholesky, a, target="webgpu")(a))
    ref = np.asarray(rlx.compile(rlx.linalg.cholesky, a, target="numpy")(a))
    np.testing.assert_allclose(got[0], np.linalg.cholesky(a[0].astype(np.float64)), atol=1e-5)
    assert np.isnan(got[1:]).all() and np.isnan(ref[1:3]).all()
    assert np.isnan(ref[3][np.tril_indices(6)]).all()  # a NaN input: its lower triangle too


def test_a_gradient_through_it_needs_cpu() -> None:
    """cholesky's VJP solves triangular systems, which webgpu has no kernel for: RLX-S002
    with the fix, not a host copy."""
    a = spd((4, 4)).astype(np.float32)
    report = rlx.explain(rlx.grad(lambda x: rlx.linalg.cholesky(x).sum()), a, targets=["webgpu"])
    assert not report.compile_ready("webgpu")
    assert "RLX-S002" in report.to_text()
