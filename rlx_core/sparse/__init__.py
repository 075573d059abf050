"""rlx.sparse: CSR/COO matrices, SpMV, SpMM, SDDMM, SpGEMM and Krylov solvers.

    A = rlx.sparse.coo(rows, cols, vals, (n, n)).tocsr()   # sorted, duplicates summed
    y = rlx.sparse.spmv(A, x)                             # A @ x;  spmv(A.T, x): A^T @ x
    x, info = rlx.sparse.cg(A, b, tol=1e-8, M="jacobi", return_info=True)

Inside ``rlx.jit`` / ``rlx.compile`` the values (and x, b) may be traced; the structure is
either concrete numpy (closed over: it becomes a parameter) or traced i32 arguments. Outside
a trace every call computes eagerly on the numpy reference. The ops are HIR (rlx_core/ir/
ops/sparse.py) and run on numpy and cpu; other targets refuse them (RLX-S002). SpGEMM and
COO -> CSR compute the pattern on the host and the values with gather/scatter_add, so their
values part runs anywhere.
"""

from __future__ import annotations

from typing import Any

from rlx_core.errors import TraceError
from rlx_core.frontend import ops
from rlx_core.frontend.eager import eager
from rlx_core.frontend.tensor import Tensor
from rlx_core.frontend.tracer import current
from rlx_core.sparse.errors import ConcreteStructureError, SparseStructureError
from rlx_core.sparse.layout import COO, CSR, coo, csr, spgemm_structure, transpose_structure
from rlx_core.sparse.values import segment_sum, take

__all__ = ["CSR", "COO", "csr", "coo", "spmv", "spmm", "sddmm", "spgemm", "cg", "bicgstab",
           "gmres", "transpose_structure", "SparseStructureError", "ConcreteStructureError"]


def _index(x: Any) -> Any:
    t = ops.asarray(x)
    return t if t.dtype.name == "i32" else ops.astype(t, "i32")


def _float(x: Any, like: Any = None) -> Any:
    t = ops.asarray(x, like=like)
    return t if t.dtype.is_float else ops.astype(t, "f64")


@eager
def _apply(op: str, indptr: Any, indices: Any, data: Any, x: Any, shape: tuple[int, int],
           transpose: bool) -> Tensor:
    d = _float(data)
    xv = _float(x, like=d.dtype)
    vals = [_index(indptr).value, _index(indices).value, d.value, xv.value]
    return Tensor(current().emit(op, vals, {"shape": tuple(shape), "transpose": transpose}))


def spmv(a: CSR, x: Any) -> Any:
    """``a @ x`` for a vector ``x`` (``a`` may be a transposed view: ``spmv(A.T, y)``)."""
    return _apply("spmv", a.indptr, a.indices, a.data, x, a.shape, a.transposed)


def spmm(a: CSR, x: Any) -> Any:
    """``a @ x`` for a dense (cols, k) matrix ``x``."""
    return _apply("spmm", a.indptr, a.indices, a.data, x, a.shape, a.transposed)


@eager
def _sddmm(indptr: Any, indices: Any, x: Any, y: Any, shape: tuple[int, int]) -> Tensor:
    xv = _float(x)
    yv = _float(y, like=xv.dtype)
    vals = [_index(indptr).value, _index(indices).value, xv.value, yv.value]
    return Tensor(current().emit("sddmm", vals, {"shape": tuple(shape)}))


def sddmm(pattern: CSR, x: Any, y: Any, scale_by_values: bool = False) -> CSR:
    """The CSR matrix with ``pattern``'s structure and values ``(x @ y.T)[row, col]`` at each
    stored entry (times the pattern's values with ``scale_by_values``). ``x`` is (rows, k),
    ``y`` (cols, k)."""
    if pattern.transposed:
        pattern = pattern.tocsr()
    vals = _sddmm(pattern.indptr, pattern.indices, x, y, pattern.shape)
    if scale_by_values:
        vals = vals * pattern.data
    return CSR(pattern.indptr, pattern.indices, vals, pattern.shape)


def spgemm(a: CSR, b: CSR) -> CSR:
    """``a @ b`` as CSR: the pattern on the host (concrete structures), the values as
    gathers, a product and a segment sum (differentiable, legal on every target)."""
    a, b = a.tocsr(), b.tocsr()
    indptr, indices, a_pos, b_pos, c_pos = spgemm_structure(a, b)
    prod = take(a.data, a_pos) * take(b.data, b_pos)
    return CSR(indptr, indices, segment_sum(prod, c_pos, int(indices.shape[0])),
               (a.shape[0], b.shape[1]))


@eager
def _krylov(indptr: Any, indices: Any, data: Any, b: Any, shape: tuple[int, int], method: str,
            precond: str, tol: float, maxiter: int, restart: int) -> tuple[Tensor, Tensor]:
    d = _float(data)
    bv = _float(b, like=d.dtype)
    n = shape[0]
    vals = [_index(indptr).value, _index(indices).value, d.value, bv.value]
    packed = current().emit("krylov_solve", vals, {
        "shape": tuple(shape), "method": method, "precond": precond, "tol": float(tol),
        "maxiter": int(maxiter), "restart": int(restart)})
    x = current().emit("slice", [packed], {"start": (0,), "limit": (n,), "stride": (1,)})
    info = current().emit("slice", [packed], {"start": (n,), "limit": (n + 2,), "stride": (1,)})
    return Tensor(x), Tensor(info)


def _solve(method: str, a: CSR, b: Any, tol: float, maxiter: int | None, M: Any,  # noqa: N803
           restart: int, return_info: bool) -> Any:
    allowed = (None, "jacobi", "ic0") if method == "cg" else (None, "jacobi")
    if M not in allowed:
        raise TraceError(f"preconditioner {M!r} is not available for {method}",
                         hint=f"use M in {allowed}")
    a = a.tocsr()
    n = a.shape[0]
    x, info = _krylov(a.indptr, a.indices, a.data, b, a.shape, method, M or "none", tol,
                      maxiter if maxiter is not None else 10 * max(n, 1), restart)
    return (x, info) if return_info else x


def cg(a: CSR, b: Any, tol: float = 1e-8, maxiter: int | None = None, M: Any = None,  # noqa: N803
       return_info: bool = False) -> Any:
    """Conjugate gradients for a symmetric positive definite ``a`` (``M="jacobi"``: Jacobi,
    ``M="ic0"``: incomplete Cholesky with zero fill-in, applied by one thread), from x0 = 0 until ||b - a x|| <= tol ||b||. With ``return_info`` also
    returns [iterations, relative residual]. The loop runs inside one kernel."""
    return _solve("cg", a, b, tol, maxiter, M, 30, return_info)


def bicgstab(a: CSR, b: Any, tol: float = 1e-8, maxiter: int | None = None, M: Any = None,  # noqa: N803
             return_info: bool = False) -> Any:
    """BiCGSTAB for a general square ``a`` (right-preconditioned with ``M="jacobi"``)."""
    return _solve("bicgstab", a, b, tol, maxiter, M, 30, return_info)


def gmres(a: CSR, b: Any, tol: float = 1e-8, restart: int = 30, maxiter: int | None = None,
          M: Any = None, return_info: bool = False) -> Any:  # noqa: N803
    """GMRES(restart) with modified Gram-Schmidt and Givens rotations (right-preconditioned
    with ``M="jacobi"``); ``maxiter`` counts inner iterations."""
    return _solve("gmres", a, b, tol, maxiter, M, restart, return_info)
