"""Reference semantics of the dense linear algebra ops (rlx_core/ir/ops/linalg.py), in f64.

The definitions every target is compared against. Edge cases, chosen so that no input
crashes and every result is unique:

- Failure is NaN, never an exception: ``cholesky`` of a matrix that is not (numerically)
  positive definite, ``solve``/``inv`` of an exactly singular matrix (a zero pivot in the LU
  factorization) and ``eigh``/``svd`` that do not converge fill that batch entry's result
  with NaN (as jax.numpy.linalg does). An ill-conditioned but nonsingular matrix gives the
  LU answer, with its rounding error; check ``cond`` yourself where it matters.
- ``det`` of a singular matrix is 0 and ``slogdet`` is (0, -inf).
- ``triangular_solve`` reads only the named triangle and divides by the diagonal as IEEE
  does: a zero on it gives inf/NaN in the result.
- ``cholesky`` and ``eigh`` read only the lower triangle (numpy's default UPLO='L').
- Signs: ``qr`` makes diag(R) >= 0; ``eigh`` and ``svd`` make the largest-magnitude entry of
  each eigenvector / left singular vector positive (the first one on a tie), flipping the
  matching row of Vt with it. LAPACK's own choice is not portable across builds.
- ``lu``'s permutation is a float vector (exact below 2**24 rows in f32) so that it packs
  with LU: ``A[perm] = L @ U``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rlx_core.ir.graph import TensorType
from rlx_core.ir.ops.linalg import LINALG_OPS

Array = np.ndarray


def _batched(fn, x: Array, *rest: Array) -> Array:
    """Apply ``fn`` to every matrix of the leading batch axes; results stacked back."""
    batch = x.shape[:-2]
    flat = [r.reshape((-1,) + r.shape[-2:]) for r in (x, *rest)]
    outs = [fn(*(f[i] for f in flat)) for i in range(flat[0].shape[0])]
    if not outs:  # an empty batch: the shape rule knows the result's shape
        return np.zeros((0,))
    return np.stack(outs).reshape(batch + outs[0].shape)


def _nan_like(shape: tuple[int, ...]) -> Array:
    return np.full(shape, np.nan)


def _cholesky(a: Array) -> Array:
    try:
        return np.linalg.cholesky(np.tril(a) + np.tril(a, -1).T)
    except np.linalg.LinAlgError:
        return _nan_like(a.shape)


def _lu(a: Array) -> tuple[Array, Array, bool]:
    """Doolittle with partial pivoting (LAPACK getrf's pivot choice): packed LU, perm, ok."""
    n = a.shape[0]
    lu = a.copy()
    perm = np.arange(n)
    ok = True
    for j in range(n):
        p = j + int(np.argmax(np.abs(lu[j:, j])))
        if p != j:
            lu[[j, p]] = lu[[p, j]]
            perm[[j, p]] = perm[[p, j]]
        if lu[j, j] == 0:
            ok = False
            continue
        lu[j + 1:, j] /= lu[j, j]
        lu[j + 1:, j + 1:] -= np.outer(lu[j + 1:, j], lu[j, j + 1:])
    return lu, perm, ok


def _solve(a: Array, b: Array) -> Array:
    try:  # numpy raises exactly when LAPACK getrf meets a zero pivot
        return np.linalg.solve(a, b)
    except np.linalg.LinAlgError:
        return _nan_like(b.shape)


def _inv(a: Array) -> Array:
    try:
        return np.linalg.inv(a)
    except np.linalg.LinAlgError:
        return _nan_like(a.shape)


def _triangular_solve(a: Array, b: Array, lower: bool, transpose_a: bool, unit: bool) -> Array:
    t = np.tril(a) if lower else np.triu(a)
    if unit:
        t = t - np.diag(np.diag(t)) + np.eye(len(t))
    if transpose_a:
        t, lower = t.T, not lower
    n = len(t)
    x = np.zeros(b.shape)
    order = range(n) if lower else range(n - 1, -1, -1)
    for i in order:  # substitution, one row at a time (IEEE division by a zero diagonal)
        x[i] = (b[i] - t[i] @ x) / t[i, i]
    return x


def _flip_largest(cols: Array) -> Array:
    """+1/-1 per column: the sign of its largest-magnitude entry (first on a tie)."""
    if cols.shape[0] == 0:
        return np.ones(cols.shape[1])
    idx = np.argmax(np.abs(cols), axis=0)
    s = np.sign(cols[idx, np.arange(cols.shape[1])])
    return np.where(s == 0, 1.0, s)


def _qr(a: Array) -> Array:
    q, r = np.linalg.qr(a, mode="reduced")
    s = np.sign(np.diag(r))
    s = np.where(s == 0, 1.0, s)
    return np.concatenate([(q * s).ravel(), (r * s[:, None]).ravel()])


def _eigh(a: Array) -> Array:
    try:
        w, v = np.linalg.eigh(a, UPLO="L")
    except np.linalg.LinAlgError:
        return _nan_like((len(a) + len(a) ** 2,))
    return np.concatenate([w, (v * _flip_largest(v)).ravel()])


def _svd(a: Array) -> Array:
    m, n = a.shape
    k = min(m, n)
    try:
        u, s, vt = np.linalg.svd(a, full_matrices=False)
    except np.linalg.LinAlgError:
        return _nan_like((m * k + k + k * n,))
    f = _flip_largest(u)
    return np.concatenate([(u * f).ravel(), s, (vt * f[:, None]).ravel()])


def _lu_packed(a: Array) -> Array:
    lu, perm, _ = _lu(a)
    return np.concatenate([lu.ravel(), perm.astype(np.float64)])


def _slogdet(a: Array) -> Array:
    sign, logdet = np.linalg.slogdet(a)
    return np.array([sign, logdet])


def eval_linalg(op: str, a: dict[str, Any], args: list[Array], t: TensorType) -> Array:
    """One dense linear algebra op on host arrays, computed in f64."""
    xs = [np.asarray(x, np.float64) for x in args]
    x = xs[0]
    if x.size == 0:  # an empty batch, or 0 x 0 matrices (whose determinant is 1)
        out = np.ones(t.shape) if op == "det" else np.zeros(t.shape)
        if op == "slogdet" and out.size:
            out[..., 0] = 1.0
        return out
    if op == "cholesky":
        return _batched(_cholesky, x)
    if op == "solve":
        return _batched(_solve, x, xs[1])
    if op == "triangular_solve":
        return _batched(lambda m, b: _triangular_solve(m, b, a["lower"], a["transpose_a"],
                                                       a["unit_diagonal"]), x, xs[1])
    if op == "inv":
        return _batched(_inv, x)
    if op == "det":
        return np.linalg.det(x)
    if op == "slogdet":
        sign, logdet = np.linalg.slogdet(x)
        return np.stack([sign, logdet], axis=-1)
    fn = {"lu": _lu_packed, "qr": _qr, "eigh": _eigh, "svd": _svd}[op]
    flat = x.reshape((-1,) + x.shape[-2:])
    return np.stack([fn(m) for m in flat]).reshape(t.shape)


__all__ = ["eval_linalg", "LINALG_OPS"]
