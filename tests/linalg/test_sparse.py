"""rlx.sparse: CSR/COO layouts, SpMV/SpMM/SDDMM/SpGEMM and the Krylov solvers on the numpy
reference and the cpu target, against scipy.sparse; matrices with empty rows, duplicate
entries and unsorted indices; gradients on cpu against finite differences; structure errors."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

import rlx_core as rlx
from rlx_core.sparse import ConcreteStructureError, SparseStructureError
from rlx_core.targets.cpu.target import CpuTarget

cpu_ok, cpu_why = CpuTarget().available()
TARGETS = ["numpy", pytest.param("cpu", marks=pytest.mark.skipif(
    not cpu_ok, reason=f"cpu target unavailable: {cpu_why}"))]
RNG = np.random.default_rng(2929)


def awkward(rows: int = 9, cols: int = 7) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A CSR structure with empty rows (0, 4, last), a duplicated entry and unsorted columns."""
    indptr = np.array([0, 0, 3, 5, 8, 8, 9, 12, 14, 14], np.int32)
    indices = np.array([5, 1, 5,  2, 0,  6, 3, 3,  0,  4, 2, 1,  6, 0], np.int32)
    data = RNG.standard_normal(14)
    assert indptr[-1] == len(indices) and len(indptr) == rows + 1 and indices.max() < cols
    return indptr, indices, data


def poisson2d(m: int) -> sp.csr_matrix:
    t = sp.diags([-1.0, 2.0, -1.0], [-1, 0, 1], shape=(m, m))
    return (sp.kron(sp.eye(m), t) + sp.kron(t, sp.eye(m))).tocsr()


def test_layouts_against_scipy() -> None:
    ip, ix, v = awkward()
    ref = sp.csr_matrix((v, ix, ip), shape=(9, 7))
    a = rlx.sparse.csr(ip, ix, v, (9, 7))
    np.testing.assert_allclose(a.todense(), ref.toarray())  # duplicates add
    at = a.T.tocsr()
    np.testing.assert_allclose(at.todense(), ref.T.toarray())
    assert (np.diff(at.indptr) >= 0).all() and at.shape == (7, 9)
    # COO -> CSR: unsorted triplets with duplicates become sorted, deduplicated CSR
    r, c = np.array([3, 0, 3, 1, 0, 3]), np.array([2, 1, 2, 0, 1, 0])
    d = np.arange(1.0, 7.0)
    m = rlx.sparse.coo(r, c, d, (5, 3)).tocsr()
    want = sp.coo_matrix((d, (r, c)), shape=(5, 3)).tocsr()
    want.sum_duplicates()
    np.testing.assert_array_equal(m.indptr, want.indptr)
    np.testing.assert_array_equal(m.indices, want.indices)
    np.testing.assert_allclose(m.data, want.data)
    # SpGEMM: pattern and values as scipy's
    b = sp.random(7, 6, density=0.3, random_state=3, format="csr")
    c = rlx.sparse.spgemm(a, rlx.sparse.csr(b.indptr, b.indices, b.data, b.shape))
    np.testing.assert_allclose(c.todense(), (ref @ b).toarray(), atol=1e-12)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_products_against_scipy(target, dtype) -> None:
    ip, ix, v = awkward()
    v = v.astype(dtype)
    ref = sp.csr_matrix((v.astype(np.float64), ix, ip), shape=(9, 7))
    x7, x9 = RNG.standard_normal(7).astype(dtype), RNG.standard_normal(9).astype(dtype)
    m7, m9 = RNG.standard_normal((7, 3)).astype(dtype), RNG.standard_normal((9, 3)).astype(dtype)

    def f(indptr, indices, vals, x7, x9, m7, m9):
        a = rlx.sparse.csr(indptr, indices, vals, (9, 7))
        return (rlx.sparse.spmv(a, x7), rlx.sparse.spmv(a.T, x9), rlx.sparse.spmm(a, m7),
                rlx.sparse.spmm(a.T, m9), rlx.sparse.sddmm(a, m9, m7).data)

    args = (ip, ix, v, x7, x9, m7, m9)
    got = rlx.compile(f, *args, target=target)(*args)
    rows = np.repeat(np.arange(9), np.diff(ip))
    want = (ref @ x7, ref.T @ x9, ref @ m7, ref.T @ m9, np.einsum("ej,ej->e", m9[rows], m7[ix]))
    tol = 1e-5 if dtype == np.float32 else 1e-12
    for g, w in zip(got, want, strict=True):
        assert g.dtype == dtype
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol)
    assert got[0][[0, 4, 8]].tolist() == [0, 0, 0]  # empty rows


@pytest.mark.parametrize("target", TARGETS)
def test_solvers(target) -> None:
    """CG, Jacobi-PCG and IC(0)-PCG on a 2-D Poisson matrix (SPD), BiCGSTAB and GMRES(10) on
    a nonsymmetric convection-diffusion one; all to 1e-10, checked against scipy's solution
    and, on cpu, step for step against the reference (same iteration counts)."""
    a = poisson2d(12)
    ns = (a + sp.diags([0.3], [1], shape=a.shape) - sp.diags([0.3], [-1], shape=a.shape)).tocsr()
    b = RNG.standard_normal(a.shape[0])

    def f(ip, ix, v, nip, nix, nv, b):
        A = rlx.sparse.csr(ip, ix, v, a.shape)
        N = rlx.sparse.csr(nip, nix, nv, ns.shape)
        outs = []
        for solve, mat in ((rlx.sparse.cg, A), (rlx.sparse.bicgstab, N)):
            for pc in (None, "jacobi"):
                outs += list(solve(mat, b, tol=1e-10, M=pc, return_info=True))
        outs += list(rlx.sparse.gmres(N, b, tol=1e-10, restart=10, M="jacobi",
                                      return_info=True))
        outs += list(rlx.sparse.cg(A, b, tol=1e-10, M="ic0", return_info=True))
        return tuple(outs)

    args = (a.indptr, a.indices, a.data, ns.indptr, ns.indices, ns.data, b)
    got = rlx.compile(f, *args, target=target)(*args)
    ref = rlx.compile(f, *args, target="numpy")(*args)
    exact = (sp.linalg.spsolve(a.tocsc(), b), sp.linalg.spsolve(ns.tocsc(), b))
    assert got[11][0] < got[1][0] / 2  # IC(0) more than halves CG's iterations here
    for i in range(0, len(got), 2):
        x, info = got[i], got[i + 1]
        want = exact[0] if i < 4 or i == 10 else exact[1]
        assert 0 < info[0] < 400 and info[1] <= 1e-10, (i, info)
        np.testing.assert_allclose(x, want, rtol=1e-7, atol=1e-8)
        assert abs(info[0] - ref[i + 1][0]) <= 1  # the reference's algorithm, step for step
        np.testing.assert_allclose(x, ref[i], rtol=1e-8, atol=1e-10)


@pytest.mark.skipif(not cpu_ok, reason=f"cpu target unavailable: {cpu_why}")
def _team_reset(fn) -> None:
    """Forget the team's shrink state (cpu/team_runtime.py): the next call of ``fn`` is a team call."""
    from rlx_core.targets.cpu.runtime import load_library

    (spec,) = fn.cache.specializations
    getattr(load_library(fn.cache.module_path), f"{spec.program.prefix}_team_reset")()


def test_solver_on_two_threads() -> None:
    """The team splits rows by nnz and adds partial dot products in thread order: 2 threads
    agree with 1 to rounding, and repeated runs on 2 threads agree bit for bit."""
    from rlx_core.targets.cpu.threads import num_threads, set_num_threads
    from tests.targets.test_cpu_host_overhead import _regions

    a = poisson2d(90)  # 40k nonzeros: enough work that the program opens its team region
    b = RNG.standard_normal(a.shape[0])

    def f(v, b):
        m = rlx.sparse.csr(a.indptr, a.indices, v, a.shape)
        return (*rlx.sparse.cg(m, b, tol=1e-9, M="jacobi", return_info=True),
                *rlx.sparse.cg(m, b, tol=1e-9, M="ic0", return_info=True),
                # GMRES: each thread's own Hessenberg state lies in the team's one block
                *rlx.sparse.gmres(m, b, tol=1e-6, restart=20, maxiter=200, M="jacobi",
                                  return_info=True))

    exe = rlx.jit(f, target="cpu")
    before = num_threads()
    try:
        set_num_threads(1)
        one = exe(a.data, b)
        set_num_threads(2)
        runs = []
        for _ in range(3):  # each a team call: forget a shrink that a loaded machine caused
            _team_reset(exe)
            runs.append(exe(a.data, b))
    finally:
        set_num_threads(before)
    assert _regions(exe) == 3  # the three 2-thread calls ran in a team (it was 0 before)
    for two in runs:
        for i in (0, 2):
            np.testing.assert_array_equal(two[i], runs[0][i])
            np.testing.assert_allclose(two[i], one[i], rtol=1e-10)
            assert abs(two[i + 1][0] - one[i + 1][0]) <= 1 and two[i + 1][1] <= 1e-9
        np.testing.assert_array_equal(two[4], runs[0][4])
        np.testing.assert_array_equal(two[5], runs[0][5])
        assert abs(two[5][0] - one[5][0]) <= 1 and abs(two[5][1] - one[5][1]) <= 1e-9
        np.testing.assert_allclose(two[4], one[4], rtol=1e-6, atol=1e-9)
        true = np.linalg.norm(a @ two[4] - b) / np.linalg.norm(b)  # 200 steps: ~2e-3 left
        np.testing.assert_allclose(two[5][1], true, rtol=1e-6)


@pytest.mark.parametrize("target", TARGETS)
def test_solver_edge_cases(target) -> None:
    a = poisson2d(4)

    def f(v, b):
        A = rlx.sparse.csr(a.indptr, a.indices, v, a.shape)
        return (*rlx.sparse.cg(A, b * 0.0, return_info=True),
                *rlx.sparse.gmres(A, b, maxiter=0, return_info=True),
                *rlx.sparse.bicgstab(A, b, maxiter=3, tol=0.0, return_info=True))

    b = np.ones(16)
    x0, i0, x1, i1, x2, i2 = rlx.compile(f, a.data, b, target=target)(a.data, b)
    assert (x0 == 0).all() and i0.tolist() == [0, 0]  # b = 0: x = 0 at once
    assert (x1 == 0).all() and i1.tolist() == [0, 1]  # no iteration allowed
    assert i2[0] == 3 and 0 < i2[1] < 1  # stopped by maxiter, residual reported


@pytest.mark.skipif(not cpu_ok, reason=f"cpu target unavailable: {cpu_why}")
def test_gradients_on_cpu_match_finite_differences() -> None:
    ip, ix, v = awkward()
    x, w = RNG.standard_normal(7), RNG.standard_normal(9)

    def loss(vals, x):
        return (rlx.sparse.spmv(rlx.sparse.csr(ip, ix, vals, (9, 7)), x) * w).sum()

    gv, gx = rlx.grad(loss, argnums=(0, 1), target="cpu")(v, x)
    ref = sp.csr_matrix((v, ix, ip), shape=(9, 7))
    rows = np.repeat(np.arange(9), np.diff(ip))
    np.testing.assert_allclose(gx, ref.T @ w, rtol=1e-12)
    np.testing.assert_allclose(gv, w[rows] * x[ix], rtol=1e-12)


def test_structure_errors() -> None:
    with pytest.raises(SparseStructureError, match="indptr"):
        rlx.sparse.csr(np.array([0, 2, 1]), np.array([0, 1]), np.ones(2), (2, 2))
    with pytest.raises(SparseStructureError, match="column indices"):
        rlx.sparse.csr(np.array([0, 1]), np.array([-1]), np.ones(1), (1, 3))
    with pytest.raises(SparseStructureError, match="outside"):
        rlx.sparse.coo(np.array([0, 5]), np.array([0, 0]), np.ones(2), (3, 3)).tocsr()
    with pytest.raises(ConcreteStructureError):
        rlx.trace(lambda ip, ix, v: rlx.sparse.csr(ip, ix, v, (1, 1)).T.tocsr().data,
                  np.array([0, 1], np.int32), np.array([0], np.int32), np.ones(1))


@pytest.mark.skipif(not cpu_ok, reason=f"cpu target unavailable: {cpu_why}")
@pytest.mark.parametrize("sleeper", [1, 0])
def test_products_on_two_threads_with_a_late_thread(sleeper: int) -> None:
    """SpMV, SpMM and SDDMM share row chunks of equal stored entries that threads claim
    (cpu/sparse.py, _claimed_rows): with either thread descheduled for 50 ms (simulated) the
    other takes the chunks and the products are exact; a worker that finds every chunk taken
    counts as a late arrival, and two such calls in a row run the next ones on one thread."""
    from rlx_core.targets.cpu.threads import num_threads, set_num_threads
    from tests.targets.test_cpu_team_load import SLEEP_US, Team

    a = sp.random(3000, 3000, 0.004, format="csr", random_state=29)  # ~36k stored entries
    a = sp.csr_matrix(a.multiply(np.arange(3000)[:, None] % 5 > 0))  # every 5th row empty
    x = RNG.standard_normal(3000)
    xs = RNG.standard_normal((3000, 4))
    ys = RNG.standard_normal((3000, 4))

    def f(v, x, xs, ys):
        m = rlx.sparse.csr(a.indptr, a.indices, v, a.shape)
        return rlx.sparse.spmv(m, x), rlx.sparse.spmm(m, xs), rlx.sparse.sddmm(m, xs, ys).data

    args = (a.data, x, xs, ys)
    rows = np.repeat(np.arange(3000), np.diff(a.indptr))
    want = (a @ x, a @ xs, np.einsum("ej,ej->e", xs[rows], ys[a.indices]))
    before = num_threads()
    try:
        set_num_threads(2)
        exe = rlx.compile(f, *args, target="cpu", record=False)
        assert {k["impl"] for k in exe.program.info["kernels"].values()} == {"rlx-csr-claimed"}
        team = Team(exe)
        exe(*args)
        team.reset()
        s0 = team.stats()
        for _ in range(2):
            team.reset()  # a team call even where the machine's load shrank the last one
            team.delay(sleeper, SLEEP_US)
            got = exe(*args)
            for g, w in zip(got, want, strict=True):
                np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12)
        team.delay(-1, 0)
    finally:
        set_num_threads(before)
    s1 = team.stats()
    assert s1["team_calls"] >= s0["team_calls"] + 2
    if sleeper == 1:  # the worker came after the calling thread had run every chunk
        assert s1["late"] >= s0["late"] + 2
