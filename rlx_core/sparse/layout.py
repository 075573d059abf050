"""Sparse layouts on the host: CSR (and its transpose view, CSC), COO -> CSR with sort and
dedupe, CSR transposition, and the SpGEMM pattern.

A layout is structure + values. The structure (``indptr``, ``indices``) is integer data that
decides the shape of everything downstream, so pattern work happens here, once, on concrete
numpy arrays, like scipy.sparse; the values may be numpy arrays or traced rlx tensors, and
whatever is done to them (summing duplicates, permuting for a transpose, SpGEMM's products)
is a gather or scatter_add of MIR (rlx_core/sparse/values.py), so it is differentiable and
runs on every target.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rlx_core.sparse.errors import ConcreteStructureError, SparseStructureError


def _np() -> Any:
    import numpy as np  # rlx_core imports without numpy; layouts need it

    return np


def is_concrete(x: Any) -> bool:
    """An array with values (numpy), not a traced tensor."""
    return hasattr(x, "shape") and hasattr(x, "dtype") and hasattr(x, "tolist") and \
        not hasattr(x, "value")


def _require_concrete(what: str, *arrays: Any) -> None:
    if not all(is_concrete(a) for a in arrays):
        raise ConcreteStructureError(
            f"{what} computes a new sparsity pattern, and the structure here is a traced value",
            hint="pass indptr/indices as numpy arrays (closed over or as constants), not as "
                 "arguments of the jitted function; the values may stay traced")


def check_csr(indptr: Any, indices: Any, shape: tuple[int, int], nnz_values: int | None) -> None:
    """SparseStructureError unless (indptr, indices) is a valid CSR structure of ``shape``."""
    np = _np()
    rows, cols = shape
    ip, ix = np.asarray(indptr), np.asarray(indices)
    if ip.ndim != 1 or ip.shape[0] != rows + 1:
        raise SparseStructureError(f"indptr has shape {list(ip.shape)}, expected [{rows + 1}] "
                                   f"for a {rows} x {cols} matrix",
                                   hint="indptr has one entry per row plus one")
    if ix.ndim != 1 or (nnz_values is not None and ix.shape[0] != nnz_values):
        raise SparseStructureError(f"indices has shape {list(ix.shape)} but there are "
                                   f"{nnz_values} values", hint="one column index per value")
    if rows + 1 and (ip[0] != 0 or ip[-1] != ix.shape[0] or (np.diff(ip) < 0).any()):
        raise SparseStructureError(
            f"indptr must start at 0, never decrease and end at nnz = {ix.shape[0]} "
            f"(starts at {ip[0]}, ends at {ip[-1]})",
            hint="build the matrix with rlx.sparse.coo(...).tocsr() from (row, col, value) "
                 "triplets")
    if ix.size and (ix.min() < 0 or ix.max() >= cols):
        raise SparseStructureError(f"column indices must lie in [0, {cols}), got "
                                   f"[{ix.min()}, {ix.max()}]",
                                   hint="check the shape, or the 0-based indexing")


def _i32(x: Any) -> Any:
    np = _np()
    arr = np.asarray(x)
    if arr.size and (arr.max() >= 2**31 or arr.min() < -(2**31)):
        raise SparseStructureError("an index does not fit in i32",
                                   hint="split the matrix: rlx's CSR structure is i32")
    return arr.astype(np.int32)


@dataclass(frozen=True)
class CSR:
    """A (rows, cols) CSR matrix: ``indptr`` (i32, rows + 1), ``indices`` (i32, nnz) and
    ``data`` (f32/f64, nnz) are numpy arrays or traced rlx tensors. ``.T`` is the transpose
    as a view (the CSC reading of the same arrays; ops then apply A^T)."""

    indptr: Any
    indices: Any
    data: Any
    shape: tuple[int, int]
    transposed: bool = False

    @property
    def T(self) -> CSR:  # noqa: N802 - numpy's spelling
        return CSR(self.indptr, self.indices, self.data, self.shape, not self.transposed)

    @property
    def dense_shape(self) -> tuple[int, int]:
        """The shape of the matrix this object stands for (transposed view included)."""
        rows, cols = self.shape
        return (cols, rows) if self.transposed else (rows, cols)

    @property
    def nnz(self) -> int:
        return int(self.indices.shape[0])

    def tocsr(self) -> CSR:
        """A CSR whose arrays store this matrix directly (materialises a transposed view)."""
        if not self.transposed:
            return self
        from rlx_core.sparse.values import take

        _require_concrete("transposing a CSR matrix", self.indptr, self.indices)
        indptr, indices, perm = transpose_structure(self.indptr, self.indices, self.shape)
        return CSR(indptr, indices, take(self.data, perm), self.dense_shape)

    def todense(self) -> Any:
        """A numpy array (concrete data only; for tests and small matrices)."""
        np = _np()
        m = self.tocsr()
        out = np.zeros(m.shape, np.asarray(m.data).dtype)
        rows = np.repeat(np.arange(m.shape[0]), np.diff(np.asarray(m.indptr)))
        np.add.at(out, (rows, np.asarray(m.indices)), np.asarray(m.data))
        return out


def csr(indptr: Any, indices: Any, data: Any, shape: tuple[int, int], check: bool = True) -> CSR:
    """A CSR matrix from its three arrays; the structure is checked (RLX-S001) when concrete.
    Unsorted column indices and duplicates are allowed: duplicates add."""
    shape = (int(shape[0]), int(shape[1]))
    if is_concrete(indptr) and is_concrete(indices):
        nnz = int(data.shape[0]) if hasattr(data, "shape") and len(data.shape) == 1 else None
        if check:
            check_csr(indptr, indices, shape, nnz)
        indptr, indices = _i32(indptr), _i32(indices)
    return CSR(indptr, indices, data, shape)


@dataclass(frozen=True)
class COO:
    """A (rows, cols) matrix as (row, col, value) triplets in any order, duplicates allowed."""

    row: Any
    col: Any
    data: Any
    shape: tuple[int, int]

    def tocsr(self) -> CSR:
        """Sort by (row, col) and sum duplicates: the structure on the host, the values with a
        scatter_add (so traced values stay traced and differentiable)."""
        from rlx_core.sparse.values import segment_sum

        np = _np()
        _require_concrete("COO -> CSR", self.row, self.col)
        rows, cols = self.shape
        r, c = np.asarray(self.row, np.int64), np.asarray(self.col, np.int64)
        if r.shape != c.shape or r.ndim != 1 or r.shape[0] != self.data.shape[0]:
            raise SparseStructureError(
                f"row {list(r.shape)}, col {list(c.shape)} and data "
                f"{list(self.data.shape)} must be vectors of one length",
                hint="one (row, col, value) triplet per entry")
        if r.size and (r.min() < 0 or r.max() >= rows or c.min() < 0 or c.max() >= cols):
            raise SparseStructureError(f"a (row, col) lies outside the {rows} x {cols} matrix",
                                       hint="check the shape, or the 0-based indexing")
        key = r * max(cols, 1) + c
        uniq, inverse = np.unique(key, return_inverse=True)  # sorted: row-major order
        urow, ucol = uniq // max(cols, 1), uniq % max(cols, 1)
        indptr = np.zeros(rows + 1, np.int64)
        np.add.at(indptr, urow + 1, 1)
        indptr = np.cumsum(indptr)
        values = segment_sum(self.data, inverse.reshape(-1), len(uniq))
        return CSR(_i32(indptr), _i32(ucol), values, (rows, cols))


def coo(row: Any, col: Any, data: Any, shape: tuple[int, int]) -> COO:
    """A COO matrix; ``.tocsr()`` sorts and sums duplicates."""
    return COO(row, col, data, (int(shape[0]), int(shape[1])))


def transpose_structure(indptr: Any, indices: Any, shape: tuple[int, int]) -> tuple[Any, Any, Any]:
    """(indptr, indices) of A^T in CSR (= A in CSC) and the permutation taking A's values to
    A^T's (a stable counting sort by column)."""
    np = _np()
    rows, cols = shape
    ip, ix = np.asarray(indptr, np.int64), np.asarray(indices, np.int64)
    row_of = np.repeat(np.arange(rows), np.diff(ip))
    perm = np.lexsort((row_of, ix))  # by column, then row
    counts = np.bincount(ix, minlength=cols)
    t_indptr = np.concatenate([[0], np.cumsum(counts)])
    return _i32(t_indptr), _i32(row_of[perm]), _i32(perm)


def spgemm_structure(a: CSR, b: CSR) -> tuple[Any, Any, Any, Any, Any]:
    """The pattern of C = A B and, for every product a_ik * b_kj, the value index in A, in B
    and in C: (indptr, indices, a_pos, b_pos, c_pos)."""
    np = _np()
    _require_concrete("SpGEMM", a.indptr, a.indices, b.indptr, b.indices)
    m, k = a.shape
    k2, n = b.shape
    if k != k2:
        raise SparseStructureError(f"SpGEMM of {m} x {k} and {k2} x {n} matrices",
                                   hint="the inner dimensions must agree")
    aip, aix = np.asarray(a.indptr, np.int64), np.asarray(a.indices, np.int64)
    bip, bix = np.asarray(b.indptr, np.int64), np.asarray(b.indices, np.int64)
    a_row = np.repeat(np.arange(m), np.diff(aip))
    b_len = np.diff(bip)[aix]  # products each stored a_ik makes: the length of B's row k
    a_pos = np.repeat(np.arange(len(aix)), b_len)
    start = np.repeat(bip[aix], b_len)
    offset = np.arange(len(a_pos)) - np.repeat(np.cumsum(b_len) - b_len, b_len)
    b_pos = start + offset
    key = a_row[a_pos] * max(n, 1) + bix[b_pos]
    uniq, c_pos = np.unique(key, return_inverse=True)
    crow, ccol = uniq // max(n, 1), uniq % max(n, 1)
    indptr = np.concatenate([[0], np.cumsum(np.bincount(crow, minlength=m))])
    return _i32(indptr), _i32(ccol), _i32(a_pos), _i32(b_pos), _i32(c_pos.reshape(-1))
