"""Capability table of the numpy reference target: every MIR primitive in every dtype.

It claims no composite on purpose: the reference exists to check the common IR, so every HIR
op is lowered through its decomposition here and the result is the semantic oracle. The
exceptions are the ops that have no decomposition at all: the splatting ops (the numpy oracle
of rlx_core/splat/reference.py runs them whole), and dense linear algebra and the sparse ops
(ir/ops/linalg.py, ir/ops/sparse.py), which numpy evaluates whole, in f64.
It also claims the collective ops (rlx_core/ir/ops/collective.py), which it runs
through mpi4py on the active communicator.
"""

from __future__ import annotations

from rlx_core.dispatch.capabilities import MIR_PRIMITIVES, Capabilities, OpClaim, native_dtypes
from rlx_core.ir import dtypes as dt
from rlx_core.ir.ops.collective import COLLECTIVE_OPS
from rlx_core.ir.ops.linalg import LINALG_DTYPES, LINALG_OPS
from rlx_core.ir.ops.sparse import SPARSE_DTYPES, SPARSE_OPS
from rlx_core.ir.ops.splat import SPLAT_OPS

ALL_DTYPES: tuple[str, ...] = tuple(d.name for d in dt.ALL)

CAPS = Capabilities(
    target="numpy",
    verification="executes",
    claims=(OpClaim(MIR_PRIMITIVES, ALL_DTYPES, note="interpreted with numpy"),
            OpClaim(SPLAT_OPS, ("f32",), note="the splatting oracle (rlx_core/splat/reference.py)"),
            OpClaim(LINALG_OPS, LINALG_DTYPES, note="numpy.linalg in f64 (no decomposition)"),
            OpClaim(SPARSE_OPS, SPARSE_DTYPES + ("i32",),
                    note="CSR in f64 with numpy (no decomposition)"),
            OpClaim(tuple(COLLECTIVE_OPS), ALL_DTYPES,
                    note="mpi4py buffer operations on the active communicator")),
    dtype_rules=native_dtypes(ALL_DTYPES),
    note="the semantic oracle: interprets MIR node by node; no composite is native but the "
         "ops without a decomposition (splatting, linear algebra, sparse, collectives)",
)
