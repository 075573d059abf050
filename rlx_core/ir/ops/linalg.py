"""Dense linear algebra ops (HIR, no decomposition): cholesky, triangular_solve, solve, inv,
det, slogdet, lu, qr, eigh, svd.

They have no common-IR form (a factorization is a sequence of data-dependent pivots and
sweeps, not a loop nest of MIR primitives), so a target runs them natively or not at all:
numpy (numpy.linalg, the oracle) and cpu (LAPACK from the scipy-openblas32 wheel) claim
them; any other target fails legalization with RLX-S002 and a hint. Every op takes
matrices in the last two axes, with any leading batch axes, in f32 or f64.

An op has one result. Ops whose mathematical result is several arrays (lu, qr, eigh, svd,
slogdet) return them packed into one flat trailing axis, in the order ``packed_parts``
lists; ``rlx.linalg`` unpacks them with slices and reshapes. Semantics, edge cases and
the sign conventions that make qr/eigh/svd unique are in
rlx_core/targets/numpy_ref/linalg_semantics.py.
"""

from __future__ import annotations

import math
from typing import Any

from rlx_core.errors import DTypeError
from rlx_core.ir.graph import Level, Shape, TensorType
from rlx_core.ir.ops.base import AttrSpec, OpDef, require, require_same_dtype

T = TensorType

LINALG_DTYPES: tuple[str, ...] = ("f32", "f64")
LINALG_OPS: tuple[str, ...] = ("cholesky", "triangular_solve", "solve", "inv", "det", "slogdet",
                               "lu", "qr", "eigh", "svd")


def packed_parts(op: str, m: int, n: int) -> tuple[tuple[str, Shape], ...]:
    """The arrays packed (row-major, in this order) into the flat last axis of a multi-result
    op applied to an (m, n) matrix; ``()`` for an op whose result is one plain array."""
    k = min(m, n)
    if op == "lu":
        return (("lu", (n, n)), ("perm", (n,)))
    if op == "qr":
        return (("q", (m, k)), ("r", (k, n)))
    if op == "eigh":
        return (("w", (n,)), ("v", (n, n)))
    if op == "svd":
        return (("u", (m, k)), ("s", (k,)), ("vt", (k, n)))
    if op == "slogdet":
        return (("sign", ()), ("logabsdet", ()))
    return ()


def _matrix(op: str, x: T, square: bool = True) -> tuple[Shape, int, int]:
    require(x.dtype.name in LINALG_DTYPES, op, f"needs an f32 or f64 matrix, got {x}",
            hint="cast to f32 or f64 first (x.astype('f64'))", exc=DTypeError)
    require(x.rank >= 2, op, f"needs a matrix (rank >= 2, matrices in the last two axes), "
                             f"got {x}", hint="reshape a vector to (n, 1) or (1, n)")
    m, n = x.shape[-2:]
    if square:
        require(m == n, op, f"needs square matrices, got {x}",
                hint="lstsq-style problems: factor with qr and solve the triangular system")
    return x.shape[:-2], m, n


def _unary_square(op: str):
    def infer(ins: list[T], a: dict[str, Any]) -> T:
        _matrix(op, ins[0])
        return ins[0]

    return infer


def _with_rhs(op: str):
    def infer(ins: list[T], a: dict[str, Any]) -> T:
        batch, n, _ = _matrix(op, ins[0])
        rhs = ins[1]
        require_same_dtype(op, ins)
        require(rhs.rank == ins[0].rank and rhs.shape[:-2] == batch and rhs.shape[-2] == n, op,
                f"right-hand side {rhs} does not match {ins[0]}: expected "
                f"[{','.join(map(str, batch + (n,)))},k]",
                hint="pass b as (..., n, k) with the same batch axes (rlx.linalg reshapes a "
                     "vector b to (n, 1) and broadcasts batch axes)")
        return rhs

    return infer


def _reduced(op: str):
    def infer(ins: list[T], a: dict[str, Any]) -> T:
        batch, _, _ = _matrix(op, ins[0])
        return T(ins[0].dtype, batch)

    return infer


def _packed(op: str, square: bool):
    def infer(ins: list[T], a: dict[str, Any]) -> T:
        batch, m, n = _matrix(op, ins[0], square)
        size = sum(math.prod(s) for _, s in packed_parts(op, m, n))
        return T(ins[0].dtype, batch + (size,))

    return infer


def linalg_defs() -> dict[str, OpDef]:
    hir = Level.HIR
    t: dict[str, OpDef] = {}

    def add(name, arity, attrs, infer, doc):
        t[name] = OpDef(name, hir, "composite", arity, attrs, infer, doc)

    add("cholesky", (1, 1), {}, _unary_square("cholesky"),
        "lower-triangular L with A = L L^T, from A's lower triangle; NaN if A is not "
        "positive definite")
    add("triangular_solve", (2, 2), {"lower": AttrSpec("bool", True),
                                     "transpose_a": AttrSpec("bool", False),
                                     "unit_diagonal": AttrSpec("bool", False)},
        _with_rhs("triangular_solve"),
        "X with op(A) X = B for triangular A (its lower or upper triangle); op(A) = A or A^T")
    add("solve", (2, 2), {}, _with_rhs("solve"),
        "X with A X = B (LU with partial pivoting); NaN for an exactly singular A")
    add("inv", (1, 1), {}, _unary_square("inv"), "A^-1; NaN for an exactly singular A")
    add("det", (1, 1), {}, _reduced("det"), "det(A) from the LU factorization")
    add("slogdet", (1, 1), {}, _packed("slogdet", True),
        "packed (sign, log|det A|); (0, -inf) for a singular A")
    add("lu", (1, 1), {}, _packed("lu", True),
        "packed (LU, perm): A[perm] = L U, L unit lower, U upper, in one n x n array")
    add("qr", (1, 1), {}, _packed("qr", False),
        "packed (Q, R), reduced: Q (m, k) orthonormal columns, R (k, n) upper, diag(R) >= 0")
    add("eigh", (1, 1), {}, _packed("eigh", True),
        "packed (w, V): ascending eigenvalues of the symmetric A (lower triangle) and "
        "eigenvectors as columns, each with its largest-magnitude entry positive")
    add("svd", (1, 1), {}, _packed("svd", False),
        "packed (U, S, Vt), reduced: S descending, each column of U with its "
        "largest-magnitude entry positive")
    return t
