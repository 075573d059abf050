"""rlx.linalg: numpy.linalg-style dense linear algebra, one HIR op per call.

Each function records one op of rlx_core/ir/ops/linalg.py inside a trace (``rlx.jit``,
``rlx.compile``) and computes eagerly on the numpy reference outside one. The ops run on
the numpy and cpu targets (LAPACK); other targets refuse them at compile time (RLX-S002).
Failure is NaN, not an exception (see rlx_core/targets/numpy_ref/linalg_semantics.py).

    L = rlx.linalg.cholesky(A)          # A = L @ L.T
    x = rlx.linalg.solve(A, b)          # b (n,) or (..., n, k)
    w, V = rlx.linalg.eigh(A)
"""

from __future__ import annotations

import math
from typing import Any

from rlx_core.frontend import ops
from rlx_core.frontend.eager import eager
from rlx_core.frontend.tensor import Tensor
from rlx_core.frontend.tracer import current
from rlx_core.ir.graph import Value
from rlx_core.ir.ops.linalg import packed_parts

__all__ = ["cholesky", "triangular_solve", "solve", "inv", "det", "slogdet", "lu", "lu_factor",
           "qr", "eigh", "eigvalsh", "svd", "cho_solve"]


def _float(x: Any) -> Value:
    t = ops.asarray(x)
    if not t.dtype.is_float:
        t = ops.astype(t, "f64")
    return t.value


def _op(op: str, args: list[Value], attrs: dict[str, Any] | None = None) -> Tensor:
    return Tensor(current().emit(op, args, attrs))


def _unpack(op: str, packed: Tensor, m: int, n: int) -> tuple[Tensor, ...]:
    """Slice the packed trailing axis of a multi-result op into its arrays."""
    v = packed.value
    batch = v.type.shape[:-1]
    outs, at = [], 0
    for _, shape in packed_parts(op, m, n):
        size = math.prod(shape)
        part = current().emit("slice", [v], {
            "start": (0,) * len(batch) + (at,), "limit": batch + (at + size,),
            "stride": (1,) * (len(batch) + 1)})
        outs.append(ops.reshape(Tensor(part), batch + shape))
        at += size
    return tuple(outs)


def _rhs(a: Value, b: Any) -> tuple[Value, bool]:
    """``b`` as (..., n, k) with a's batch axes; True when it was a vector."""
    bv = ops.asarray(b, like=a.type.dtype).value
    vector = bv.type.rank == a.type.rank - 1
    if vector:
        bv = ops.reshape(Tensor(bv), bv.type.shape + (1,)).value
    batch = a.type.shape[:-2]
    if bv.type.shape[:-2] != batch and bv.type.rank >= 2:
        bv = ops.broadcast_to(Tensor(bv), batch + bv.type.shape[-2:]).value
    return bv, vector


def _drop_column(x: Tensor, vector: bool) -> Tensor:
    return ops.reshape(x, x.value.type.shape[:-1]) if vector else x


@eager
def cholesky(a: Any) -> Tensor:
    """Lower-triangular ``L`` with ``a = L @ L.T`` (reads a's lower triangle); NaN when ``a``
    is not positive definite."""
    return _op("cholesky", [_float(a)])


@eager
def triangular_solve(a: Any, b: Any, lower: bool = True, transpose_a: bool = False,
                     unit_diagonal: bool = False) -> Tensor:
    """``x`` with ``op(a) @ x = b`` for triangular ``a`` (scipy.linalg.solve_triangular)."""
    av = _float(a)
    bv, vector = _rhs(av, b)
    x = _op("triangular_solve", [av, bv], {"lower": bool(lower), "transpose_a": bool(transpose_a),
                                            "unit_diagonal": bool(unit_diagonal)})
    return _drop_column(x, vector)


@eager
def solve(a: Any, b: Any) -> Tensor:
    """``x`` with ``a @ x = b`` (LU, partial pivoting); NaN for an exactly singular ``a``."""
    av = _float(a)
    bv, vector = _rhs(av, b)
    return _drop_column(_op("solve", [av, bv]), vector)


@eager
def cho_solve(l_factor: Any, b: Any) -> Tensor:
    """``x`` with ``L @ L.T @ x = b`` given the Cholesky factor ``L`` (two triangular solves)."""
    lv = _float(l_factor)
    bv, vector = _rhs(lv, b)
    y = _op("triangular_solve", [lv, bv], {"lower": True})
    x = _op("triangular_solve", [lv, y.value], {"lower": True, "transpose_a": True})
    return _drop_column(x, vector)


@eager
def inv(a: Any) -> Tensor:
    """``a``'s inverse; NaN for an exactly singular ``a``."""
    return _op("inv", [_float(a)])


@eager
def det(a: Any) -> Tensor:
    """The determinant (0 for a singular matrix)."""
    return _op("det", [_float(a)])


@eager
def slogdet(a: Any) -> tuple[Tensor, Tensor]:
    """(sign, log|det|), as numpy.linalg.slogdet; (0, -inf) for a singular matrix."""
    av = _float(a)
    n = av.type.shape[-1]
    return _unpack("slogdet", _op("slogdet", [av]), n, n)


@eager
def lu_factor(a: Any) -> tuple[Tensor, Tensor]:
    """(LU, perm): ``L`` (unit lower) and ``U`` packed in one array, ``a[perm] = L @ U``;
    ``perm`` is a float vector of row indices."""
    av = _float(a)
    n = av.type.shape[-1]
    return _unpack("lu", _op("lu", [av]), n, n)


@eager
def lu(a: Any) -> tuple[Tensor, Tensor, Tensor]:
    """(P, L, U) with ``a = P @ L @ U``, as scipy.linalg.lu."""
    av = _float(a)
    n = av.type.shape[-1]
    packed, perm = _unpack("lu", _op("lu", [av]), n, n)
    d = av.type.dtype
    row = ops.iota(packed.value.type.shape, dim=packed.value.type.rank - 2, dtype=d)
    col = ops.iota(packed.value.type.shape, dim=packed.value.type.rank - 1, dtype=d)
    zero, one = ops.zeros(packed.value.type.shape, d), ops.ones(packed.value.type.shape, d)
    lower = ops.where(row > col, packed, zero) + ops.where(row == col, one, zero)
    upper = ops.where(row <= col, packed, zero)
    # P[i, j] = 1 where perm[j] == i, so that P @ (L @ U) = a
    perm_row = ops.broadcast_to(ops.reshape(perm, perm.value.type.shape[:-1] + (1, n)),
                                packed.value.type.shape)
    p = ops.where(perm_row == row, one, zero)
    return p, lower, upper


@eager
def qr(a: Any) -> tuple[Tensor, Tensor]:
    """Reduced QR: ``q`` (m, k) with orthonormal columns, ``r`` (k, n) upper triangular with a
    non-negative diagonal, k = min(m, n)."""
    av = _float(a)
    m, n = av.type.shape[-2:]
    return _unpack("qr", _op("qr", [av]), m, n)


@eager
def eigh(a: Any) -> tuple[Tensor, Tensor]:
    """(w, V) of a symmetric matrix (its lower triangle): ascending eigenvalues, eigenvectors
    in the columns of ``V``, each with its largest-magnitude entry positive."""
    av = _float(a)
    n = av.type.shape[-1]
    return _unpack("eigh", _op("eigh", [av]), n, n)


@eager
def eigvalsh(a: Any) -> Tensor:
    """The ascending eigenvalues of a symmetric matrix."""
    return eigh.__wrapped__(a)[0]  # type: ignore[attr-defined]


@eager
def svd(a: Any, full_matrices: bool = False) -> tuple[Tensor, Tensor, Tensor]:
    """Reduced SVD (u, s, vt): ``a = u @ diag(s) @ vt``, ``s`` descending."""
    if full_matrices:
        from rlx_core.errors import ShapeError

        raise ShapeError("svd: only the reduced SVD (full_matrices=False) is implemented",
                         hint="call svd(a) and complete u with qr if you need a full basis")
    av = _float(a)
    m, n = av.type.shape[-2:]
    return _unpack("svd", _op("svd", [av]), m, n)
