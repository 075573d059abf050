"""What the fuzzer may generate for one target: the dtypes and ops its capability table claims,
and whether it is fed special values (decided by the known-deviations table, never silently)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from rlx_core.ir import dtypes as dt
from rlx_core.ir.ops.hir import HIR_OPS
from rlx_core.ir.ops.mir import MIR_OPS
from rlx_core.targets.registry import get_target
from rlx_core.testing.deviations import input_policy

# dtype statuses a target computes with (``storage`` is computed natively, stored wider)
# not "emulated": the oracle's tolerance is the dtype's own epsilon, and webgpu's double-float
# f64 is 2^-47, not 2^-53 (tests/targets/test_webgpu_f64.py holds it to its own promise)
_USABLE = ("native", "storage")
# not an (op, dtype): a refusal of every tensor with no elements (RLX-U014 on the int8
# firmware), learned like one and kept in the same list; the generator then draws no 0 axes
ZERO_SIZE = ("zero-size tensors", "*")


@dataclass(frozen=True)
class Profile:
    """The generator's view of one target."""

    target: str
    dtypes: tuple[str, ...]  # value dtypes the generator may use
    ops: frozenset[tuple[str, str]]  # (MIR op, dtype) pairs the table claims
    hir: tuple[str, ...]  # HIR ops (claimed natively or decomposed: both are exercised)
    specials: bool  # feed NaN / +-inf / subnormals / extremes
    index_dtype: str  # gather / embedding / argmax index type
    # (op, dtype) pairs the target refused during this run: never drawn again, whether the op
    # is drawn as a MIR primitive or as the HIR op of the same name (neg, requantize, ...)
    refused: frozenset[tuple[str, str]] = frozenset()

    def claims(self, op: str, *dtypes: str) -> bool:
        if any((op, d) in self.refused for d in dtypes):
            return False
        if op in HIR_OPS:
            return op in self.hir and all(d in self.dtypes for d in dtypes)
        return all((op, d) in self.ops for d in dtypes)

    def without(self, pairs: set[tuple[str, str]]) -> Profile:
        """This profile with ``pairs`` refused: dropped from the claimed MIR pairs and never drawn
        as an HIR op either."""
        return replace(self, ops=self.ops - pairs, refused=self.refused | frozenset(pairs))

    @property
    def zero_size(self) -> bool:
        """May the generator draw axes of size 0 (no refusal of empty tensors so far)?"""
        return ZERO_SIZE not in self.refused

    @property
    def floats(self) -> tuple[str, ...]:
        return tuple(d for d in self.dtypes if dt.get(d).is_float)


def usable_dtypes(caps: Any) -> tuple[str, ...]:
    out = []
    for d in dt.ALL:
        rule = caps.dtype_rule(d.name)
        if rule is not None and rule.status in _USABLE:
            out.append(d.name)
    return tuple(out)


def profile_for(target: str, specials: bool | None = None) -> Profile:
    """The profile of a registry target; ``specials`` overrides the deviations table's policy."""
    tgt = get_target(target)
    caps = tgt.caps
    dtypes = usable_dtypes(caps)
    ops = set()
    for op in MIR_OPS:
        claim = caps.claim_for(op)
        if claim is not None:
            ops.update((op, d) for d in dtypes if d in claim.dtypes)
    # every HIR op: claimed ones stay whole, the rest go through their decompositions; a target
    # that runs only a narrow class of models (cortex-m: int8) names the HIR ops worth drawing
    hir = tuple(getattr(tgt, "fuzz_hir_ops", HIR_OPS))
    index = "i64" if ("gather", "i64") in ops else "i32"
    allow = input_policy(target) if specials is None else specials
    return Profile(target, dtypes, frozenset(ops), hir, allow, index)
