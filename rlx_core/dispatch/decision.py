"""Decision records: for one node on one target, the route taken and why the others were not."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rlx_core.dispatch.capabilities import Reason
from rlx_core.ir.graph import Node, TensorType


@dataclass(frozen=True)
class Rejection:
    """A route (and the rule it would have used) that was tried and refused, with reasons."""

    route: str
    rule: str
    reasons: tuple[Reason, ...]

    def to_json(self) -> dict[str, Any]:
        return {"route": self.route, "rule": self.rule,
                "reasons": [r.to_json() for r in self.reasons]}


@dataclass(frozen=True)
class Cost:
    """A static estimate of what the chosen lowering does: nodes, arithmetic, bytes touched."""

    nodes: int = 0
    flops: int = 0
    bytes: int = 0

    def to_json(self) -> dict[str, int]:
        return {"nodes": self.nodes, "flops": self.flops, "bytes": self.bytes}


@dataclass(frozen=True)
class Decision:
    """How ``node`` runs on ``target``: ``route`` is native / common-IR / rewritten / unsupported.

    ``produced`` are the text lines of the nodes the route made (the node itself for native);
    ``parent`` names the enclosing node when this node was produced by another's lowering
    (depth > 0), so the explorer can fold nested decisions under their HIR node.
    """

    node: str
    op: str
    target: str
    route: str
    rule: str
    policy: str
    types: str
    where: str
    origin: str
    origin_op: str
    produced: tuple[str, ...] = ()
    rejected: tuple[Rejection, ...] = ()
    cost: Cost = field(default_factory=Cost)
    depth: int = 0
    parent: str = ""
    notes: tuple[str, ...] = ()
    code: str = ""  # for unsupported nodes: the code that best explains the failure
    hint: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "node": self.node, "op": self.op, "target": self.target, "route": self.route,
            "rule": self.rule, "policy": self.policy, "types": self.types, "where": self.where,
            "origin": self.origin, "origin_op": self.origin_op, "produced": list(self.produced),
            "rejected": [r.to_json() for r in self.rejected], "cost": self.cost.to_json(),
            "depth": self.depth, "parent": self.parent, "notes": list(self.notes),
            "code": self.code, "hint": self.hint,
        }


def estimate(nodes: list[Node], types: dict[str, TensorType]) -> Cost:
    """flops: one per output element for elementwise/reduce inputs, 2*M*N*K for contractions;
    bytes: every operand read once plus the result written once (no fusion assumed)."""
    flops = 0
    nbytes = 0
    for n in nodes:
        ins = [types[i] for i in n.inputs if i in types]
        nbytes += sum(t.nbytes for t in ins) + n.out.type.nbytes
        if n.op == "dot_general":
            (lc, _), _ = n.attr("contract"), n.attr("batch")
            k = 1
            for ax in lc:
                k *= ins[0].shape[ax] if ins else 1
            flops += 2 * n.out.type.size * k
        elif n.op.startswith("reduce_") or n.op == "argmax":
            flops += ins[0].size if ins else 0
        elif n.op not in ("reshape", "transpose", "slice", "pad", "concat", "broadcast_in_dim",
                          "gather", "iota", "constant"):
            flops += n.out.type.size
    return Cost(len(nodes), flops, nbytes)
