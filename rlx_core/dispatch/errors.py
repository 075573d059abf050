"""LegalizationError: every node of a graph that has no legal route on a target, in one report."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rlx_core.dispatch.decision import Decision
from rlx_core.errors import RlxError

# When several reasons explain one failure, the most specific, most actionable code is the one
# reported: a missing feature says more than "not claimed", and an approximation that is merely
# not allowed is one flag away from working.
SPECIFICITY: tuple[str, ...] = ("RLX-S020", "RLX-L003", "RLX-L004", "RLX-L002", "RLX-L008",
                                "RLX-L005", "RLX-L006", "RLX-L007", "RLX-L010", "RLX-S002",
                                "RLX-L001")


@dataclass(frozen=True)
class Failure:
    """One illegal node: its decision record carries the rejected routes, code and hint."""

    decision: Decision

    def to_json(self) -> dict[str, Any]:
        return self.decision.to_json()

    def render(self, index: int) -> str:
        d = self.decision
        origin = "" if (d.origin, d.origin_op) == (d.node, d.op) else \
            f", from HIR %{d.origin} = {d.origin_op}"
        lines = [f"  {index}. [{d.code}] %{d.node} = {d.op} : {d.types}  at {d.where}{origin}"]
        for rej in d.rejected:
            label = rej.route + (f" ({rej.rule})" if rej.rule else "")
            for r in rej.reasons:
                lines.append(f"       {label}: [{r.code}] {r.message}")
        if d.hint:
            lines.append(f"       fix: {d.hint}")
        return "\n".join(lines)


class LegalizationError(RlxError):
    """Some nodes have no legal route on the target; ``failures`` lists every one of them.

    The error's own code is RLX-L000; each failure carries the code of its cause (RLX-L001..).
    """

    code = "RLX-L000"

    def __init__(self, target: str, policy: str, failures: list[Failure],
                 decisions: list[Decision] | None = None):
        self.target = target
        self.policy = policy
        self.failures = list(failures)
        self.decisions = list(decisions or [])
        n = len(self.failures)
        body = "\n".join(f.render(i + 1) for i, f in enumerate(self.failures))
        hints = list(dict.fromkeys(f.decision.hint for f in self.failures if f.decision.hint))
        super().__init__(
            f"{n} node{'s' if n != 1 else ''} cannot run on {target} (policy {policy}); nothing "
            f"falls back to another device:\n{body}",
            hint="; ".join(hints) if hints else "use target cpu or numpy, or change the policy")

    @property
    def codes(self) -> list[str]:
        return [f.decision.code for f in self.failures]

    def to_json(self) -> dict[str, Any]:
        return {"code": self.code, "target": self.target, "policy": self.policy,
                "failures": [f.to_json() for f in self.failures]}


def primary_code(codes: list[str]) -> str:
    for c in SPECIFICITY:
        if c in codes:
            return c
    return codes[0] if codes else "RLX-L001"
