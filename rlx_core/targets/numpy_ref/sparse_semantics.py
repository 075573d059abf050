"""Reference semantics of the sparse ops (rlx_core/ir/ops/sparse.py), in f64.

- CSR entries are summed as given: duplicate (row, col) entries add, the order of indices
  within a row does not matter (only the rounding of the sum), empty rows give 0.
- An index outside [0, cols) or an indptr that decreases or does not end at nnz is
  IndexOutOfRangeError (RLX-R002) here; ``rlx.sparse.csr`` checks the structure on the host
  (RLX-S001) before it reaches a kernel, which trusts it.
- ``krylov_solve`` starts from x0 = 0 and stops after the first iteration whose residual
  (the recurrence's for cg and bicgstab, the Givens estimate for gmres) is <= tol * ||b||,
  or after ``maxiter`` iterations (gmres counts inner Arnoldi steps); it returns
  (x, iterations, residual / ||b||). b = 0 gives x = 0 after 0 iterations. A breakdown
  (p.Ap = 0 in cg, rho = 0 or omega = 0 in bicgstab, a zero Arnoldi vector in gmres) stops
  the loop with the current iterate. The Jacobi preconditioner divides by the diagonal (the
  sum of the stored (i, i) entries); a zero diagonal entry is treated as 1. IC(0) (cg only)
  is ``ic0`` below, applied as two triangular solves; the same breakdown fallback as the
  kernel
  The algorithms, step for step, are those of the CPU kernel (rlx_core/targets/cpu/sparse.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from rlx_core.errors import IndexOutOfRangeError
from rlx_core.ir.graph import TensorType

Array = np.ndarray
MatVec = Callable[[Array], Array]


def row_ids(indptr: Array, rows: int, cols: int, indices: Array) -> Array:
    """The row of every stored entry, after checking the structure."""
    counts = np.diff(indptr)
    nnz = len(indices)
    if indptr[0] != 0 or indptr[-1] != nnz or (counts < 0).any():
        raise IndexOutOfRangeError(
            f"CSR indptr must start at 0, never decrease and end at nnz = {nnz}",
            hint="build the matrix with rlx.sparse.csr/coo, which checks the structure")
    if nnz and (indices.min() < 0 or indices.max() >= cols):
        raise IndexOutOfRangeError(f"CSR column index outside [0, {cols})",
                                   hint="build the matrix with rlx.sparse.csr/coo, which "
                                        "checks the structure")
    return np.repeat(np.arange(rows), counts)


def _apply(rows: int, cols: int, r: Array, c: Array, v: Array, x: Array, transpose: bool) -> Array:
    out_n, src, dst = (cols, r, c) if transpose else (rows, c, r)
    y = np.zeros((out_n,) + x.shape[1:])
    contrib = v.reshape((-1,) + (1,) * (x.ndim - 1)) * x[src]
    np.add.at(y, dst, contrib)
    return y


def _jacobi(rows: int, r: Array, c: Array, v: Array) -> Array:
    d = np.zeros(rows)
    on = r == c
    np.add.at(d, r[on], v[on])
    return 1.0 / np.where(d == 0, 1.0, d)


def ic0(rows: int, indptr: Array, indices: Array, values: Array
        ) -> tuple[list[list[int]], list[list[float]]]:
    """IC(0) as the CPU kernel computes it: per row, tril(A)'s columns sorted with duplicates
    summed and the diagonal last (added as 0 if missing); L[i, k] = (a_ik - sum_j L[i, j]
    L[k, j]) / L[k, k] over the common columns j < k, L[i, i] = sqrt(a_ii - sum_j L[i, j]^2),
    a pivot <= 0 replaced by sqrt(|a_ii|) (1 when a_ii = 0)."""
    cols: list[list[int]] = []
    vals: list[list[float]] = []
    for r in range(rows):
        row: dict[int, float] = {}
        for e in range(int(indptr[r]), int(indptr[r + 1])):
            c = int(indices[e])
            if c <= r:
                row[c] = row.get(c, 0.0) + float(values[e])
        row.setdefault(r, 0.0)
        order = sorted(row)
        cols.append(order)
        vals.append([row[c] for c in order])
    for i in range(rows):
        ci, li = cols[i], vals[i]
        for a in range(len(ci) - 1):
            k = ci[a]
            ck, lk = cols[k], vals[k]
            s = li[a]
            p1 = p2 = 0
            while p1 < a and p2 < len(ck) - 1:  # the sorted merge of the kernel
                if ci[p1] == ck[p2]:
                    s -= li[p1] * lk[p2]
                    p1, p2 = p1 + 1, p2 + 1
                elif ci[p1] < ck[p2]:
                    p1 += 1
                else:
                    p2 += 1
            li[a] = s / lk[-1]
        aii = li[-1]
        d = aii - sum(x * x for x in li[:-1])
        li[-1] = float(np.sqrt(d)) if d > 0 else (float(np.sqrt(abs(aii))) if aii else 1.0)
    return cols, vals


def _ic0_apply(cols: list[list[int]], vals: list[list[float]], r: Array) -> Array:
    z = np.zeros_like(r)
    n = len(r)
    for i in range(n):
        s = r[i] - sum(v * z[c] for c, v in zip(cols[i][:-1], vals[i][:-1], strict=True))
        z[i] = s / vals[i][-1]
    for i in range(n - 1, -1, -1):
        z[i] = z[i] / vals[i][-1]
        for c, v in zip(cols[i][:-1], vals[i][:-1], strict=True):
            z[c] -= v * z[i]
    return z


def _cg(mv: MatVec, m: Any, b: Array, tol: float, maxiter: int) -> tuple[Array, int, float]:
    """CG; ``m`` is the preconditioner: a vector (diagonal) or a function of r."""
    if not callable(m):
        diag = m

        def m(r: Array) -> Array:
            return diag * r

    x = np.zeros_like(b)
    bnorm = float(np.linalg.norm(b))
    if bnorm == 0:
        return x, 0, 0.0
    r = b.copy()
    z = m(r)
    p = z.copy()
    rz = float(r @ z)
    rnorm, it = bnorm, 0
    while it < maxiter:
        it += 1
        q = mv(p)
        pq = float(p @ q)
        if pq == 0:
            break
        alpha = rz / pq
        x += alpha * p
        r -= alpha * q
        rnorm = float(np.linalg.norm(r))
        if rnorm <= tol * bnorm:
            break
        z = m(r)
        rz_new = float(r @ z)
        p = z + (rz_new / rz) * p
        rz = rz_new
    return x, it, rnorm / bnorm


def _bicgstab(mv: MatVec, m: Array, b: Array, tol: float, maxiter: int
              ) -> tuple[Array, int, float]:
    x = np.zeros_like(b)
    bnorm = float(np.linalg.norm(b))
    if bnorm == 0:
        return x, 0, 0.0
    r = b.copy()
    rhat = r.copy()
    rho = alpha = omega = 1.0
    v = np.zeros_like(b)
    p = np.zeros_like(b)
    rnorm, it = bnorm, 0
    while it < maxiter:
        it += 1
        rho_new = float(rhat @ r)
        if rho_new == 0:
            break
        p = r + (rho_new / rho) * (alpha / omega) * (p - omega * v)
        ph = m * p
        v = mv(ph)
        rv = float(rhat @ v)
        if rv == 0:
            break
        alpha = rho_new / rv
        s = r - alpha * v
        snorm = float(np.linalg.norm(s))
        if snorm <= tol * bnorm:
            x += alpha * ph
            rnorm = snorm
            break
        sh = m * s
        t = mv(sh)
        tt = float(t @ t)
        omega = float(t @ s) / tt if tt != 0 else 0.0
        x += alpha * ph + omega * sh
        r = s - omega * t
        rnorm = float(np.linalg.norm(r))
        rho = rho_new
        if rnorm <= tol * bnorm or omega == 0:
            break
    return x, it, rnorm / bnorm


def _gmres(mv: MatVec, m: Array, b: Array, tol: float, maxiter: int, restart: int
           ) -> tuple[Array, int, float]:
    n = len(b)
    x = np.zeros_like(b)
    bnorm = float(np.linalg.norm(b))
    if bnorm == 0:
        return x, 0, 0.0
    total, resid = 0, bnorm
    while total < maxiter:
        r = b - mv(m * x) if total else b.copy()
        beta = float(np.linalg.norm(r))
        resid = beta
        if beta <= tol * bnorm:
            break
        vs = np.zeros((restart + 1, n))
        h = np.zeros((restart + 1, restart))
        cs, sn, g = np.zeros(restart), np.zeros(restart), np.zeros(restart + 1)
        vs[0] = r / beta
        g[0] = beta
        k, broke = 0, False
        for j in range(restart):
            total += 1
            w = mv(m * vs[j])
            for i in range(j + 1):  # modified Gram-Schmidt
                h[i, j] = float(w @ vs[i])
                w = w - h[i, j] * vs[i]
            hn = float(np.linalg.norm(w))
            h[j + 1, j] = hn
            if hn != 0:
                vs[j + 1] = w / hn
            for i in range(j):  # the earlier rotations, on the new column
                a, c = h[i, j], h[i + 1, j]
                h[i, j], h[i + 1, j] = cs[i] * a + sn[i] * c, -sn[i] * a + cs[i] * c
            d = float(np.hypot(h[j, j], h[j + 1, j]))
            cs[j], sn[j] = (h[j, j] / d, h[j + 1, j] / d) if d != 0 else (1.0, 0.0)
            h[j, j], h[j + 1, j] = d, 0.0
            g[j + 1], g[j] = -sn[j] * g[j], cs[j] * g[j]
            resid = abs(float(g[j + 1]))
            k = j + 1
            if resid <= tol * bnorm or total >= maxiter or hn == 0:
                broke = hn == 0
                break
        y = np.zeros(k)
        for i in range(k - 1, -1, -1):  # back substitution on the rotated Hessenberg matrix
            y[i] = (g[i] - h[i, i + 1:k] @ y[i + 1:]) / h[i, i] if h[i, i] != 0 else 0.0
        x = x + vs[:k].T @ y  # x lives in the preconditioned variable: A M u = b, x = M u
        if resid <= tol * bnorm or broke:
            break
    return m * x, total, resid / bnorm


def eval_sparse(op: str, a: dict[str, Any], args: list[Array], t: TensorType) -> Array:
    """One sparse op on host arrays, computed in f64."""
    rows, cols = a["shape"]
    indptr, indices = np.asarray(args[0], np.int64), np.asarray(args[1], np.int64)
    r = row_ids(indptr, rows, cols, indices)
    c = indices
    if op in ("spmv", "spmm"):
        v, x = (np.asarray(z, np.float64) for z in args[2:])
        return _apply(rows, cols, r, c, v, x, a["transpose"])
    if op == "sddmm":
        x, y = (np.asarray(z, np.float64) for z in args[2:])
        return np.einsum("ej,ej->e", x[r], y[c]) if len(c) else np.zeros(0)
    v, b = (np.asarray(z, np.float64) for z in args[2:])

    def mv(z: Array) -> Array:
        return _apply(rows, cols, r, c, v, z, False)

    m: Any = _jacobi(rows, r, c, v) if a["precond"] == "jacobi" else np.ones(rows)
    if a["precond"] == "ic0":
        factor = ic0(rows, indptr, indices, v)

        def m(z: Array) -> Array:
            return _ic0_apply(*factor, z)

    tol, maxiter = float(a["tol"]), int(a["maxiter"])
    if a["method"] == "cg":
        x, it, rel = _cg(mv, m, b, tol, maxiter)
    elif a["method"] == "bicgstab":
        x, it, rel = _bicgstab(mv, m, b, tol, maxiter)
    else:
        x, it, rel = _gmres(mv, m, b, tol, maxiter, int(a["restart"]))
    return np.concatenate([x, [float(it), rel]])


SPARSE_SEMANTIC_OPS = ("spmv", "spmm", "sddmm", "krylov_solve")
__all__ = ["eval_sparse", "row_ids", "SPARSE_SEMANTIC_OPS"]
