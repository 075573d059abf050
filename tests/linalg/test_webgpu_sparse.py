"""CSR spmv / spmm / sddmm in WGSL (rlx_core/targets/webgpu/sparse.py) on the native WebGPU
device (Mesa lavapipe in CI), against scipy, on a matrix with empty rows, a duplicate and
unsorted indices; CG (unrolled into one submission) against the reference; the transposed
products, the other solvers and too many CG iterations refused at compile time."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

import rlx_core as rlx
from rlx_core.targets.registry import get_target
from rlx_core.targets.webgpu.krylov import MAX_UNROLL
from tests.linalg.test_sparse import awkward, poisson2d

OK, WHY = get_target("webgpu").available()
pytestmark = pytest.mark.skipif(not OK, reason=f"no WebGPU adapter here: {WHY}")
RNG = np.random.default_rng(7)


def test_products_on_webgpu() -> None:
    ip, ix, v = awkward()
    v = v.astype(np.float32)
    x7, m7 = (RNG.standard_normal(s).astype(np.float32) for s in ((7,), (7, 3)))
    m9 = RNG.standard_normal((9, 3)).astype(np.float32)

    def f(indptr, indices, vals, x7, m7, m9):
        a = rlx.sparse.csr(indptr, indices, vals, (9, 7))
        return rlx.sparse.spmv(a, x7), rlx.sparse.spmm(a, m7), rlx.sparse.sddmm(a, m9, m7).data

    args = (ip, ix, v, x7, m7, m9)
    exe = rlx.compile(f, *args, target="webgpu")
    got = exe(*args)
    ref = sp.csr_matrix((v.astype(np.float64), ix, ip), shape=(9, 7))
    rows = np.repeat(np.arange(9), np.diff(ip))
    want = (ref @ x7, ref @ m7, np.einsum("ej,ej->e", m9[rows].astype(np.float64), m7[ix]))
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
    assert got[0][[0, 4, 8]].tolist() == [0, 0, 0]


def test_what_webgpu_refuses() -> None:
    ip, ix, v = awkward()
    v = v.astype(np.float32)
    x = np.ones(9, np.float32)

    def transposed(vals, x):
        return rlx.sparse.spmv(rlx.sparse.csr(ip, ix, vals, (9, 7)).T, x)

    p = poisson2d(3)

    def solve(vals, b):
        return rlx.sparse.bicgstab(rlx.sparse.csr(p.indptr, p.indices, vals, p.shape), b)

    def long_cg(vals, b):
        return rlx.sparse.cg(rlx.sparse.csr(p.indptr, p.indices, vals, p.shape), b,
                             maxiter=MAX_UNROLL + 1)

    text = rlx.explain(transposed, v, x, targets=["webgpu"]).to_text()
    assert "RLX-L006" in text and "float atomics" in text
    text = rlx.explain(solve, p.data.astype(np.float32), x, targets=["webgpu"]).to_text()
    assert "RLX-L006" in text and "krylov_solve" in text and "no WGSL kernel" in text
    text = rlx.explain(long_cg, p.data.astype(np.float32), x, targets=["webgpu"]).to_text()
    assert "RLX-L006" in text and f"over the claimed maximum {MAX_UNROLL}" in text


@pytest.mark.parametrize("precond", [None, "jacobi"])
def test_cg_on_webgpu_in_one_submission(precond) -> None:
    """CG as one chain of dispatches (webgpu/krylov.py) against the numpy reference on a
    random SPD matrix with an uneven diagonal (Jacobi matters): the same solution, the same
    iteration count to one, and a converged residual; an exact zero right-hand side is 0
    iterations."""
    n = 60
    r = sp.random(n, n, density=0.08, random_state=3, format="csr")
    a = (r + r.T + sp.diags(np.linspace(1.0, 40.0, n)) + 3 * sp.eye(n)).tocsr()
    ip, ix, v = a.indptr.astype(np.int32), a.indices.astype(np.int32), a.data.astype(np.float32)
    b = RNG.standard_normal(n).astype(np.float32)

    def f(vals, rhs):
        m = rlx.sparse.csr(ip, ix, vals, a.shape)
        return rlx.sparse.cg(m, rhs, tol=1e-5, maxiter=300, M=precond, return_info=True)

    want_x, want_info = rlx.compile(f, v, b, target="numpy")(v, b)
    exe = rlx.compile(f, v, b, target="webgpu")
    x, info = (np.asarray(t) for t in exe(v, b))
    np.testing.assert_allclose(x, want_x, rtol=1e-3, atol=1e-4 * np.abs(want_x).max())
    assert abs(info[0] - want_info[0]) <= 1 and 0 < info[0] < 300
    assert np.linalg.norm(a @ x - b) / np.linalg.norm(b) < 1e-4 and info[1] <= 1e-5
    x0, info0 = (np.asarray(t) for t in exe(v, np.zeros(n, np.float32)))
    assert info0.tolist() == [0.0, 0.0] and not x0.any()
