"""Typed errors of rlx.sparse (codes RLX-S001..S019 belong to linear algebra and sparse)."""

from __future__ import annotations

from rlx_core.errors import RlxError


class SparseStructureError(RlxError):
    """A CSR/COO structure is malformed: lengths, indptr order, indices out of range."""

    code = "RLX-S001"


class ConcreteStructureError(RlxError):
    """An operation that computes a new sparsity pattern (COO -> CSR, transpose, SpGEMM) was
    given a structure that is a traced value rather than concrete integer arrays."""

    code = "RLX-S003"
