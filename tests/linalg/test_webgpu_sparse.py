"""CSR spmv / spmm / sddmm in WGSL (rlx_core/targets/webgpu/sparse.py) on the native WebGPU
device (Mesa lavapipe in CI), against scipy, on a matrix with empty rows, a duplicate and
unsorted indices; the transposed products and the solvers refused at compile time."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

import rlx_core as rlx
from rlx_core.targets.registry import get_target
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
        return rlx.sparse.cg(rlx.sparse.csr(p.indptr, p.indices, vals, p.shape), b)

    text = rlx.explain(transposed, v, x, targets=["webgpu"]).to_text()
    assert "RLX-L006" in text and "float atomics" in text
    text = rlx.explain(solve, p.data.astype(np.float32), x, targets=["webgpu"]).to_text()
    assert "RLX-S002" in text and "krylov_solve" in text
