"""Capability table of the numpy reference target: every MIR primitive in every dtype.

It claims no composite on purpose: the reference exists to check the common IR, so every HIR
op is lowered through its decomposition here and the result is the semantic oracle. The one
exception is the splatting ops, which have no decomposition: the numpy oracle of
rlx_core/splat/reference.py runs them whole.
"""

from __future__ import annotations

from rlx_core.dispatch.capabilities import MIR_PRIMITIVES, Capabilities, OpClaim, native_dtypes
from rlx_core.ir import dtypes as dt
from rlx_core.ir.ops.splat import SPLAT_OPS

ALL_DTYPES: tuple[str, ...] = tuple(d.name for d in dt.ALL)

CAPS = Capabilities(
    target="numpy",
    verification="executes",
    claims=(OpClaim(MIR_PRIMITIVES, ALL_DTYPES, note="interpreted with numpy"),
            OpClaim(SPLAT_OPS, ("f32",), note="the splatting oracle (rlx_core/splat/reference.py)")),
    dtype_rules=native_dtypes(ALL_DTYPES),
    note="the semantic oracle: interprets MIR node by node; no composite is native but the "
         "splatting ops (no decomposition)",
)
