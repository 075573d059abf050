"""The op registry: every HIR and MIR op by name, one readable table per level."""

from __future__ import annotations

from rlx_core.errors import RlxError
from rlx_core.ir.ops.base import REQUIRED, AttrSpec, OpDef
from rlx_core.ir.ops.collective import COLLECTIVE_OPS
from rlx_core.ir.ops.hir import HIR_OPS
from rlx_core.ir.ops.mir import ELEMENTWISE_CATEGORIES, MIR_OPS

OPS: dict[str, OpDef] = {**MIR_OPS, **HIR_OPS, **COLLECTIVE_OPS}


class UnknownOpError(RlxError):
    """An op name that no level defines."""

    code = "RLX-V002"


def opdef(name: str) -> OpDef:
    """The definition of op ``name``, or UnknownOpError listing close matches."""
    try:
        return OPS[name]
    except KeyError:
        import difflib

        close = difflib.get_close_matches(name, OPS, n=3)
        raise UnknownOpError(
            f"unknown op {name!r}",
            hint=f"did you mean {', '.join(close)}?" if close else "see rlx_core/ir/ops for the op set",
        ) from None


def is_elementwise(op: str) -> bool:
    return op in MIR_OPS and MIR_OPS[op].category in ELEMENTWISE_CATEGORIES


__all__ = ["OPS", "HIR_OPS", "MIR_OPS", "COLLECTIVE_OPS", "OpDef", "AttrSpec", "REQUIRED", "opdef", "is_elementwise",
           "UnknownOpError"]
