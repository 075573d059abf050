"""Capability tables as data: which ops, dtypes, constraints and limits a target claims.

A target's ``caps.py`` builds one ``Capabilities`` value from the pieces below; the dispatcher
asks it ``check(node, in_types)`` and gets back either no reasons (the node is native there)
or the reasons it is not, each with a stable code and a fix hint. Nothing here executes code
of the target: the table is what the static probe (``explain``) reads.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from rlx_core.ir.graph import Node, TensorType
from rlx_core.ir.ops import MIR_OPS

# How much of a table is backed by a renderer that runs here (DESIGN.md section 6), plus
# "planned": the renderer is not written yet, the table says what it will implement.
VERIFICATION_LEVELS = ("executes", "executes (emulated)", "compile-check", "syntax-checked",
                       "text-only", "planned")


@dataclass(frozen=True)
class Reason:
    """Why a route was rejected: a stable code (docs/errors.md), what failed, what to do."""

    code: str
    message: str
    hint: str = ""

    def to_json(self) -> dict[str, str]:
        return {"code": self.code, "message": self.message, "hint": self.hint}


@dataclass(frozen=True)
class Constraint:
    """A shape or attribute condition on a claim.

    kinds: ``max_rank`` (every operand and the result have rank <= limit), ``attr_in`` (attribute
    ``key`` takes one of ``values``), ``max_elements`` (the result has at most ``limit``
    elements), ``static_attr`` (attribute ``key`` equals ``values[0]``), ``attr_max`` (integer
    attribute ``key`` is at most ``limit``).
    """

    kind: str
    key: str = ""
    values: tuple[Any, ...] = ()
    limit: int = 0
    why: str = ""

    def violated(self, node: Node, in_types: list[TensorType]) -> str | None:
        """A sentence saying how ``node`` breaks this constraint, or None when it holds."""
        if self.kind == "max_rank":
            ranks = [t.rank for t in (*in_types, node.out.type)]
            if max(ranks, default=0) > self.limit:
                return f"rank {max(ranks)} exceeds the claimed maximum {self.limit}"
        elif self.kind == "attr_in":
            got = node.attr(self.key)
            if got not in self.values:
                return f"{self.key}={got!r} is not one of {list(self.values)}"
        elif self.kind == "static_attr":
            got = node.attr(self.key)
            if got != self.values[0]:
                return f"{self.key}={got!r}, only {self.values[0]!r} is claimed"
        elif self.kind == "attr_max":
            got = node.attr(self.key)
            if int(got) > self.limit:
                return f"{self.key}={got} is over the claimed maximum {self.limit}"
        elif self.kind == "max_elements":
            if node.out.type.size > self.limit:
                return f"result has {node.out.type.size} elements, at most {self.limit} claimed"
        else:
            return f"unknown constraint kind {self.kind!r} in the capability table"
        return None


@dataclass(frozen=True)
class OpClaim:
    """The target runs ``ops`` natively when every dtype touched is in ``dtypes``."""

    ops: tuple[str, ...]
    dtypes: tuple[str, ...]
    constraints: tuple[Constraint, ...] = ()
    note: str = ""


@dataclass(frozen=True)
class DTypeRule:
    """How a target treats one dtype.

    status: ``native``; ``feature`` (native only with optional feature ``feature`` enabled);
    ``storage`` (held as ``stored_as`` in memory, computed natively); ``emulated`` (computed
    by a software library of the target's, with the precision and range ``stored_as`` states:
    webgpu's f64); ``narrow`` (not in kernels; values are rewritten to ``stored_as`` where
    provably in range); ``unsupported``.
    ``code`` / ``hint`` are what a node touching an unusable dtype reports.
    """

    dtype: str
    status: str
    feature: str = ""
    stored_as: str = ""
    code: str = "RLX-L002"
    hint: str = ""


@dataclass(frozen=True)
class Limits:
    """Device limits as defaults; a live adapter may override them (``with_limits``)."""

    max_workgroup_size: int | None = None
    max_storage_buffers: int | None = None  # per shader stage: operands + result of one kernel
    max_buffer_bytes: int | None = None
    # the most elements one tensor may have: what the kernels' index type can count (a loop
    # bound past it wraps, and the kernel silently does nothing). int64 unless a target says
    max_elements: int | None = 2**63 - 1
    index_type: str = "int64"
    source: str = "defaults"  # "defaults" or the adapter that reported them

    def to_json(self) -> dict[str, Any]:
        return {"max_workgroup_size": self.max_workgroup_size,
                "max_storage_buffers": self.max_storage_buffers,
                "max_buffer_bytes": self.max_buffer_bytes, "max_elements": self.max_elements,
                "index_type": self.index_type, "source": self.source}


@dataclass(frozen=True)
class Capabilities:
    """One target's table. ``claims`` are checked in order; the first claim naming the op wins."""

    target: str
    verification: str
    claims: tuple[OpClaim, ...]
    dtype_rules: tuple[DTypeRule, ...]
    limits: Limits = field(default_factory=Limits)
    features: tuple[str, ...] = ()  # optional features the target knows about
    enabled: tuple[str, ...] = ()  # those switched on for this compile
    note: str = ""

    # ---- queries ---------------------------------------------------------------------------
    def claim_for(self, op: str) -> OpClaim | None:
        for c in self.claims:
            if op in c.ops:
                return c
        return None

    def claims_op(self, op: str) -> bool:
        return self.claim_for(op) is not None

    def dtype_rule(self, name: str) -> DTypeRule | None:
        for r in self.dtype_rules:
            if r.dtype == name:
                return r
        return None

    def native_composites(self) -> frozenset[str]:
        """HIR ops this table claims: they may stay in the MIR graph."""
        return frozenset(op for c in self.claims for op in c.ops if op not in MIR_OPS)

    def dtype_reasons(self, node: Node, in_types: list[TensorType]) -> list[Reason]:
        """Reasons the dtypes ``node`` touches cannot be used on this target at all."""
        reasons: list[Reason] = []
        seen: list[str] = []
        for t in (*in_types, node.out.type):
            name = t.dtype.name
            if name in seen:
                continue
            seen.append(name)
            rule = self.dtype_rule(name)
            if rule is None:
                reasons.append(Reason("RLX-L002", f"{self.target} has no {name} type",
                                      "cast to a dtype the target supports before this op"))
            elif rule.status == "feature" and rule.feature not in self.enabled:
                reasons.append(Reason(rule.code, f"{name} on {self.target} needs the "
                                      f"{rule.feature!r} feature, which is not enabled",
                                      rule.hint or f"enable the {rule.feature} feature"))
            elif rule.status in ("unsupported", "narrow"):
                what = (f"{name} is not available in {self.target} kernels" if rule.status ==
                        "narrow" else f"{self.target} does not support {name}")
                reasons.append(Reason(rule.code, what, rule.hint))
        return reasons

    def limit_reasons(self, node: Node, in_types: list[TensorType]) -> list[Reason]:
        lim = self.limits
        reasons: list[Reason] = []
        if lim.max_elements is not None:
            for t in (*in_types, node.out.type):
                if t.size > lim.max_elements:
                    reasons.append(Reason(
                        "RLX-L005", f"{t} has {t.size} elements; {self.target} indexes tensors "
                        f"with {lim.index_type}, which counts to {lim.max_elements}",
                        "split the tensor (a smaller batch or a loop over chunks)"))
                    break
        if lim.max_buffer_bytes is not None:
            for t in (*in_types, node.out.type):
                if t.nbytes > lim.max_buffer_bytes:
                    reasons.append(Reason(
                        "RLX-L005", f"a {t} buffer is {t.nbytes} bytes, over the "
                        f"{lim.max_buffer_bytes}-byte buffer limit ({lim.source})",
                        "split the tensor (smaller batch) or use target cpu"))
                    break
        if lim.max_storage_buffers is not None and len(in_types) + 1 > lim.max_storage_buffers:
            reasons.append(Reason(
                "RLX-L005", f"{len(in_types) + 1} buffers in one kernel, over the limit of "
                f"{lim.max_storage_buffers} storage buffers per stage ({lim.source})",
                "concatenate operands first, or split the op"))
        return reasons

    def check(self, node: Node, in_types: list[TensorType]) -> list[Reason]:
        """Every reason ``node`` is not native here; an empty list means it is."""
        claim = self.claim_for(node.op)
        if claim is None:
            return [Reason("RLX-L001", f"{self.target} does not claim {node.op}",
                           "")]
        reasons = self.dtype_reasons(node, in_types)
        if not reasons:
            for t in (*in_types, node.out.type):
                if t.dtype.name not in claim.dtypes:
                    # a dtype the target has, but not for this op: its rule says what to do
                    # (c64 on cpu: split into real and imaginary parts, not a cast)
                    rule = next((r for r in self.dtype_rules if r.dtype == t.dtype.name), None)
                    reasons.append(Reason(
                        "RLX-L002", f"{self.target} claims {node.op} for "
                        f"{', '.join(claim.dtypes)}, not {t.dtype.name}",
                        rule.hint if rule is not None and rule.hint else
                        f"cast to one of {', '.join(claim.dtypes)} before this op"))
                    break
        for con in claim.constraints:
            broken = con.violated(node, in_types)
            if broken:
                reasons.append(Reason("RLX-L006", f"{node.op}: {broken}" +
                                      (f" ({con.why})" if con.why else ""),
                                      "reshape/split the op so it fits, or use another target"))
        reasons.extend(self.limit_reasons(node, in_types))
        return reasons

    # ---- variants --------------------------------------------------------------------------
    def with_features(self, *names: str) -> Capabilities:
        """The same table with optional features switched on (e.g. ``shader-f16``)."""
        return replace(self, enabled=tuple(dict.fromkeys((*self.enabled, *names))))

    def with_limits(self, **limits: Any) -> Capabilities:
        """The same table with device limits reported by a live adapter."""
        return replace(self, limits=replace(self.limits, **limits))

    def to_json(self) -> dict[str, Any]:
        return {
            "target": self.target, "verification": self.verification, "note": self.note,
            "claims": [{"ops": list(c.ops), "dtypes": list(c.dtypes), "note": c.note,
                        "constraints": [{"kind": k.kind, "key": k.key, "values": list(k.values),
                                         "limit": k.limit, "why": k.why}
                                        for k in c.constraints]} for c in self.claims],
            "dtypes": [{"dtype": r.dtype, "status": r.status, "feature": r.feature,
                        "stored_as": r.stored_as} for r in self.dtype_rules],
            "limits": self.limits.to_json(), "features": list(self.features),
            "enabled": list(self.enabled),
        }


def native_dtypes(names: tuple[str, ...]) -> tuple[DTypeRule, ...]:
    return tuple(DTypeRule(n, "native") for n in names)


MIR_PRIMITIVES: tuple[str, ...] = tuple(MIR_OPS)
