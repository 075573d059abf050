"""Sparse ops (HIR, no decomposition): spmv, spmm, sddmm, and the Krylov solvers.

A sparse matrix in the IR is a CSR layout spread over three values: ``indptr`` (i32,
rows + 1), ``indices`` (i32, nnz column ids) and ``values`` (f32/f64, nnz), with the dense
shape ``(rows, cols)`` as the ``shape`` attribute. The structure arrives as ordinary
integer values (graph inputs, parameters or constants), so a compiled function is
specialised on nnz, not on the pattern. ``transpose=True`` applies A^T from the same CSR
arrays (that is the CSC view of A^T: no conversion is needed), which is what the VJPs use.
COO -> CSR (sort, dedupe) and CSR transposition of the structure are host-side work on
integer arrays, done once by ``rlx.sparse`` (rlx_core/sparse/layout.py), not IR ops.

Semantics in rlx_core/targets/numpy_ref/sparse_semantics.py; the CPU kernels in
rlx_core/targets/cpu/sparse.py.
"""

from __future__ import annotations

from typing import Any

from rlx_core.errors import DTypeError
from rlx_core.ir import dtypes as dt
from rlx_core.ir.graph import Level, TensorType
from rlx_core.ir.ops.base import AttrSpec, OpDef, require, require_same_dtype

T = TensorType

SPARSE_DTYPES: tuple[str, ...] = ("f32", "f64")
SPARSE_OPS: tuple[str, ...] = ("spmv", "spmm", "sddmm", "krylov_solve")
KRYLOV_METHODS: tuple[str, ...] = ("cg", "bicgstab", "gmres")
PRECONDITIONERS: tuple[str, ...] = ("none", "jacobi", "ic0")


def _structure(op: str, indptr: T, indices: T, a: dict[str, Any]) -> tuple[int, int, int]:
    shape = tuple(a["shape"])
    require(len(shape) == 2 and all(d >= 0 for d in shape), op,
            f"shape must be (rows, cols), got {list(shape)}")
    rows, cols = shape
    for what, v in (("indptr", indptr), ("indices", indices)):
        require(v.dtype == dt.i32 and v.rank == 1, op, f"{what} must be an i32 vector, got {v}",
                hint="CSR structure is i32 (scipy's default); cast with .astype('int32')",
                exc=DTypeError)
    require(indptr.shape == (rows + 1,), op,
            f"indptr {indptr} must have rows + 1 = {rows + 1} entries")
    return rows, cols, indices.shape[0]


def _values(op: str, values: T, nnz: int) -> None:
    require(values.dtype.name in SPARSE_DTYPES, op, f"values must be f32 or f64, got {values}",
            hint="cast the values to f32 or f64", exc=DTypeError)
    require(values.shape == (nnz,), op, f"values {values} must have one entry per index ({nnz})")


def _sp_apply(op: str, rank: int):
    def infer(ins: list[T], a: dict[str, Any]) -> T:
        indptr, indices, values, x = ins
        rows, cols, nnz = _structure(op, indptr, indices, a)
        _values(op, values, nnz)
        require_same_dtype(op, [values, x])
        inner, outer = (rows, cols) if a["transpose"] else (cols, rows)
        require(x.rank == rank and x.shape[0] == inner, op,
                f"dense operand {x} does not match the {'transposed ' if a['transpose'] else ''}"
                f"sparse ({rows}, {cols}) matrix: expected its first axis to be {inner}"
                + ("" if rank == 1 else " and rank 2"),
                hint="spmv takes a vector, spmm a matrix (k columns)")
        return T(x.dtype, (outer,) + x.shape[1:])

    return infer


def _sddmm(ins: list[T], a: dict[str, Any]) -> T:
    indptr, indices, x, y = ins
    rows, cols, nnz = _structure("sddmm", indptr, indices, a)
    require(x.dtype.name in SPARSE_DTYPES, "sddmm", f"needs f32 or f64 operands, got {x}",
            exc=DTypeError)
    require_same_dtype("sddmm", [x, y])
    require(x.rank == 2 and y.rank == 2 and x.shape[0] == rows and y.shape[0] == cols
            and x.shape[1] == y.shape[1], "sddmm",
            f"operands {x} and {y} must be ({rows}, k) and ({cols}, k)")
    return T(x.dtype, (nnz,))


def _krylov(ins: list[T], a: dict[str, Any]) -> T:
    indptr, indices, values, b = ins
    rows, cols, nnz = _structure("krylov_solve", indptr, indices, a)
    _values("krylov_solve", values, nnz)
    require_same_dtype("krylov_solve", [values, b])
    require(rows == cols, "krylov_solve", f"needs a square matrix, got shape {[rows, cols]}")
    require(b.shape == (rows,), "krylov_solve", f"right-hand side {b} must be [{rows}]")
    require(a["method"] in KRYLOV_METHODS, "krylov_solve",
            f"method must be one of {', '.join(KRYLOV_METHODS)}, got {a['method']!r}")
    require(a["precond"] in PRECONDITIONERS, "krylov_solve",
            f"precond must be one of {', '.join(PRECONDITIONERS)}, got {a['precond']!r}")
    require(a["precond"] != "ic0" or a["method"] == "cg", "krylov_solve",
            f"the ic0 preconditioner is implemented for cg, not {a['method']}",
            hint="use precond='jacobi' with bicgstab or gmres")
    require(a["maxiter"] >= 0 and a["restart"] >= 1 and a["tol"] >= 0, "krylov_solve",
            "maxiter >= 0, restart >= 1 and tol >= 0 are required")
    return T(b.dtype, (rows + 2,))


def sparse_defs() -> dict[str, OpDef]:
    hir = Level.HIR
    shape = AttrSpec("ints")
    t: dict[str, OpDef] = {}

    def add(name, arity, attrs, infer, doc):
        t[name] = OpDef(name, hir, "composite", arity, attrs, infer, doc)

    add("spmv", (4, 4), {"shape": shape, "transpose": AttrSpec("bool", False)},
        _sp_apply("spmv", 1), "y = A x (or A^T x) for CSR A = (indptr, indices, values)")
    add("spmm", (4, 4), {"shape": shape, "transpose": AttrSpec("bool", False)},
        _sp_apply("spmm", 2), "Y = A X (or A^T X) for CSR A and a dense (cols, k) X")
    add("sddmm", (4, 4), {"shape": shape}, _sddmm,
        "out[e] = sum_j X[row(e), j] * Y[col(e), j] for every stored entry e of the pattern")
    add("krylov_solve", (4, 4),
        {"shape": shape, "method": AttrSpec("str", "cg"), "precond": AttrSpec("str", "none"),
         "tol": AttrSpec("float", 1e-8), "maxiter": AttrSpec("int", 1000),
         "restart": AttrSpec("int", 30)}, _krylov,
        "packed (x, iterations, relative residual) of A x = b by cg (preconditioned: none, "
        "jacobi, ic0), bicgstab or gmres(restart) (none, jacobi)"
        ", from x0 = 0, until ||b - A x|| <= tol ||b|| or maxiter iterations; the whole "
        "loop runs in the kernel")
    return t
