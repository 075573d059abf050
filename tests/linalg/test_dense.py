"""rlx.linalg on the numpy reference and the cpu target (LAPACK): every op against numpy.linalg
/ scipy.linalg as an independent oracle, batched, f32 and f64; the documented NaN behaviour
for singular and indefinite matrices; shape and dtype errors; RLX-S002 on the GPU targets."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg as sla

import rlx_core as rlx
from rlx_core.errors import DTypeError, ShapeError
from rlx_core.targets.cpu.target import CpuTarget

cpu_ok, cpu_why = CpuTarget().available()
TARGETS = ["numpy", pytest.param("cpu", marks=pytest.mark.skipif(
    not cpu_ok, reason=f"cpu target unavailable: {cpu_why}"))]
RNG = np.random.default_rng(29)
TOL = {np.float32: 2e-4, np.float64: 1e-10}


def everything(a, s, b, r, rt):
    """Every dense op in one function (one compile per target and dtype)."""
    q, rr = rlx.linalg.qr(r)
    q2, rr2 = rlx.linalg.qr(rt)
    w, v = rlx.linalg.eigh(s)
    u, sv, vt = rlx.linalg.svd(r)
    u2, sv2, vt2 = rlx.linalg.svd(rt)
    lu, perm = rlx.linalg.lu_factor(a)
    sign, logdet = rlx.linalg.slogdet(a)
    return (rlx.linalg.cholesky(s), rlx.linalg.solve(a, b), rlx.linalg.solve(a, b[..., 0]),
            rlx.linalg.triangular_solve(s, b), rlx.linalg.triangular_solve(
                s, b, lower=False, transpose_a=True, unit_diagonal=True),
            rlx.linalg.inv(a), rlx.linalg.det(a), sign, logdet, lu, perm,
            q, rr, q2, rr2, w, v, u, sv, vt, u2, sv2, vt2)


def _inputs(dtype):
    a = RNG.standard_normal((2, 5, 5)) + 2 * np.eye(5)
    m = RNG.standard_normal((2, 5, 5))
    s = m @ m.transpose(0, 2, 1) + 5 * np.eye(5)
    s = s + np.triu(RNG.standard_normal((5, 5)), 1)  # the upper triangle is never read
    b = RNG.standard_normal((2, 5, 3))
    r = RNG.standard_normal((7, 4))
    return tuple(x.astype(dtype) for x in (a, s, b, r, r.T.copy()))


def _signs(cols):
    idx = np.argmax(np.abs(cols), axis=0)
    return np.sign(cols[idx, np.arange(cols.shape[1])])


def _oracle(a, s, b, r, rt):
    """The same results from numpy.linalg / scipy.linalg in f64, conventions applied."""
    a, s, b, r, rt = (x.astype(np.float64) for x in (a, s, b, r, rt))
    sym = np.tril(s) + np.swapaxes(np.tril(s, -1), -1, -2)
    out = [np.linalg.cholesky(sym), np.linalg.solve(a, b), np.linalg.solve(a, b[..., :1])[..., 0],
           np.stack([sla.solve_triangular(s[i], b[i], lower=True) for i in range(2)]),
           np.stack([sla.solve_triangular(s[i], b[i], lower=False, trans="T",
                                          unit_diagonal=True) for i in range(2)]),
           np.linalg.inv(a), np.linalg.det(a), *np.linalg.slogdet(a)]
    lus, perms = [], []
    for m in a:
        p, lo, up = sla.lu(m)  # m = p @ lo @ up
        lus.append(np.tril(lo, -1) + up)
        perms.append(np.argmax(p, axis=0).astype(np.float64))
    out += [np.stack(lus), np.stack(perms)]
    for m in (r, rt):
        q, rr = np.linalg.qr(m)
        d = np.sign(np.diag(rr))
        out += [q * d, rr * d[:, None]]
    w, v = np.linalg.eigh(sym)
    out += [w, np.stack([vi * _signs(vi) for vi in v])]
    for m in (r, rt):
        u, sv, vt = np.linalg.svd(m, full_matrices=False)
        f = _signs(u)
        out += [u * f, sv, vt * f[:, None]]
    return out


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_every_op_matches_numpy_linalg(target, dtype) -> None:
    args = _inputs(dtype)
    exe = rlx.compile(everything, *args, target=target)
    got = exe(*args)
    for i, (g, want) in enumerate(zip(got, _oracle(*args), strict=True)):
        assert g.dtype == dtype and g.shape == want.shape, i
        np.testing.assert_allclose(g, want, rtol=TOL[dtype], atol=TOL[dtype] * 10,
                                   err_msg=f"result {i}")
    if target == "cpu":
        impls = {k["impl"] for k in exe.program.info["kernels"].values()}
        letter = "s" if dtype == np.float32 else "d"
        assert {f"lapack-{letter}{r}" for r in ("potrf", "getrf", "trsm", "getri", "geqrf",
                                               "syevd", "gesdd")} <= impls


@pytest.mark.parametrize("target", TARGETS)
def test_failures_are_nan_never_a_crash(target) -> None:
    singular = np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [0.0, 0.0, 0.0]])
    indefinite = np.diag([1.0, -1.0, 2.0])
    zeros = np.zeros((3, 3))

    def f(sing, indef, z):
        sign, logdet = rlx.linalg.slogdet(z)
        return (rlx.linalg.solve(z, np.ones(3)), rlx.linalg.inv(z), rlx.linalg.det(sing),
                sign, logdet, rlx.linalg.cholesky(indef), rlx.linalg.solve(sing, np.ones(3)),
                rlx.linalg.lu_factor(z)[0])

    solve_z, inv_z, det_s, sign, logdet, chol, solve_s, lu_z = rlx.compile(
        f, singular, indefinite, zeros, target=target)(singular, indefinite, zeros)
    assert np.isnan(solve_z).all() and np.isnan(inv_z).all() and np.isnan(chol).all()
    assert det_s == 0 and sign == 0 and logdet == -np.inf
    assert np.isnan(solve_s).all()  # its third row is zero: an exactly zero pivot
    assert (lu_z == 0).all()


@pytest.mark.parametrize("target", TARGETS)
def test_ill_conditioned_solve_is_lu_accurate(target) -> None:
    h = sla.hilbert(8)  # condition number ~1.5e10: solvable, with ~1e-6 relative error
    x = np.arange(1.0, 9.0)
    b = h @ x
    got = rlx.compile(rlx.linalg.solve, h, b, target=target)(h, b)
    assert np.isfinite(got).all()
    np.testing.assert_allclose(h @ got, b, rtol=1e-9)
    np.testing.assert_allclose(got, np.linalg.solve(h, b), rtol=1e-4)


def test_eager_calls_and_composed_helpers() -> None:
    a = RNG.standard_normal((4, 4))
    spd = a @ a.T + 4 * np.eye(4)
    p, lo, up = rlx.linalg.lu(a)
    np.testing.assert_allclose(p @ lo @ up, a, atol=1e-12)
    b = RNG.standard_normal(4)
    np.testing.assert_allclose(rlx.linalg.cho_solve(rlx.linalg.cholesky(spd), b),
                               np.linalg.solve(spd, b), rtol=1e-10)
    np.testing.assert_allclose(rlx.linalg.eigvalsh(spd), np.linalg.eigvalsh(spd), rtol=1e-10)


def test_shape_and_dtype_errors() -> None:
    with pytest.raises(ShapeError, match="square"):
        rlx.trace(rlx.linalg.cholesky, np.zeros((3, 4)))
    with pytest.raises(ShapeError, match="rank >= 2"):
        rlx.trace(rlx.linalg.inv, np.zeros(3))
    with pytest.raises(ShapeError, match="right-hand side"):
        rlx.trace(rlx.linalg.solve, np.eye(3), np.zeros((4, 2)))
    with pytest.raises(DTypeError, match="f32 or f64"):
        rlx.trace(lambda a: rlx.linalg.det(rlx.astype(a, "f16")), np.eye(2))
    with pytest.raises(ShapeError, match="reduced"):
        rlx.linalg.svd(np.eye(2), full_matrices=True)


@pytest.mark.parametrize("target", ["webgpu", "opencl", "vulkan", "cuda"])
def test_gpu_targets_refuse_with_a_fix_never_a_host_copy(target) -> None:
    """Legalization only (no device needed): a dense op without a kernel there is RLX-S002
    with the fix (webgpu runs cholesky alone of them: tests/linalg/test_webgpu_dense.py)."""
    a = np.eye(3, dtype=np.float32)

    def f(x):
        return rlx.linalg.solve(x, rlx.linalg.inv(x)), rlx.linalg.qr(x)[0]

    report = rlx.explain(f, a, targets=[target])
    assert not report.compile_ready(target)
    text = report.to_text()
    assert text.count("RLX-S002") >= 3 and "compiled for target cpu" in text
