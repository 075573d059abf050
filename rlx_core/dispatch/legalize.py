"""Legalization: choose a route for every node on one target, in policy order, and record why.

For each node the routes are tried in the order its policy gives (rlx_core/dispatch/policy.py):

    native      the capability table claims (op, dtypes, constraints, limits)
    common-IR   the registered decomposition, whose every produced node is itself legal
    rewritten   a named rule (rlx_core/dispatch/rewrites.py), whose output is itself legal

"Itself legal" is checked recursively, so gelu -> erf -> polynomial works on a target without
erf. A node with no legal route is collected, not raised at once: the LegalizationError lists
every illegal node of the graph. Nothing ever falls back to another device.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rlx_core.compile_trace import CompileTrace
from rlx_core.dispatch.capabilities import Capabilities, Reason
from rlx_core.dispatch.decision import Decision, Rejection, estimate
from rlx_core.dispatch.errors import Failure, LegalizationError, primary_code
from rlx_core.dispatch.lower import expand
from rlx_core.dispatch.narrow import narrow_i64
from rlx_core.dispatch.policy import (
    COMMON,
    FORCE_COMMON,
    FORCE_NATIVE,
    NATIVE,
    REWRITTEN,
    UNSUPPORTED,
    ResolvedPolicy,
    resolve_policy,
)
from rlx_core.dispatch.registry import caps_for, decomposition_for, rewrites_for
from rlx_core.dispatch.rewrites import NotApplicable, RewriteEnv
from rlx_core.ir.builder import NameGen
from rlx_core.ir.graph import Graph, Level, Node, Value
from rlx_core.ir.printer import fmt_node
from rlx_core.ir.verifier import verify

MAX_DEPTH = 8  # nested lowerings (attention -> softmax -> primitives -> erf rewrite ...)


@dataclass
class LegalizeResult:
    """The MIR graph (None when some node is illegal) and every decision, nested ones included."""

    graph: Graph | None
    target: str
    policy: str
    decisions: list[Decision] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.failures

    def top_level(self) -> list[Decision]:
        """One decision per node of the input graph."""
        return [d for d in self.decisions if d.depth == 0]

    def decision(self, node: str) -> Decision:
        return next(d for d in self.decisions if d.node == node and d.depth == 0)

    def to_json(self) -> dict[str, Any]:
        return {"target": self.target, "policy": self.policy, "ok": self.ok,
                "decisions": [d.to_json() for d in self.decisions],
                "failures": [f.to_json() for f in self.failures]}


@dataclass
class _Outcome:
    ok: bool
    nodes: list[Node]
    decisions: list[Decision]  # this node's first, then the nested ones


class _Router:
    """Routes nodes of one graph on one target; ``values`` grows as lowerings make nodes."""

    def __init__(self, caps: Capabilities, policy: ResolvedPolicy, env: RewriteEnv,
                 values: dict[str, Value], names: NameGen):
        self.caps = caps
        self.policy = policy
        self.env = env
        self.values = values
        self.names = names
        self._last_failed: list[Decision] = []  # failed nested decisions of the last _nested

    def _decision(self, node: Node, route: str, rule: str, depth: int, parent: str,
                  produced: list[Node], rejected: list[Rejection], **extra: Any) -> Decision:
        types = {k: v.type for k, v in self.values.items()}
        in_types = ", ".join(str(self.values[i].type) for i in node.inputs)
        return Decision(
            node=node.out.name, op=node.op, target=self.caps.target, route=route, rule=rule,
            policy=self.policy.name_for(node.op), types=f"({in_types}) -> {node.out.type}",
            where=node.loc.where, origin=node.loc.origin or node.out.name,
            origin_op=node.loc.origin_op or node.op,
            produced=tuple(fmt_node(n) for n in produced), rejected=tuple(rejected),
            cost=estimate(produced, types), depth=depth, parent=parent,
            notes=self._notes(node), **extra)

    def _notes(self, node: Node) -> tuple[str, ...]:
        notes = []
        for i in (*node.inputs, node.out.name):
            v = self.values.get(i)
            rule = self.caps.dtype_rule(v.type.dtype.name) if v is not None else None
            if rule is not None and rule.status == "storage":
                notes.append(f"{rule.dtype} stored as {rule.stored_as}")
            if rule is not None and rule.status == "emulated":
                notes.append(f"{rule.dtype} emulated as {rule.stored_as}")
        return tuple(dict.fromkeys(notes))

    def _nested(self, node: Node, fn: Callable[..., Any], depth: int,
                ) -> tuple[list[Node], list[Decision], list[Reason]]:
        """Expand ``node`` with ``fn`` and route every produced node; reasons if any fails."""
        made = expand(node, self.values, self.names, fn)
        for m in made:
            self.values[m.out.name] = m.out
        nodes: list[Node] = []
        decisions: list[Decision] = []
        reasons: list[Reason] = []
        failed: list[Decision] = []
        for m in made:
            sub = self.route(m, depth + 1, node.out.name)
            decisions.extend(sub.decisions)
            if sub.ok:
                nodes.extend(sub.nodes)
            else:
                failed.extend(sub.decisions)
                d = sub.decisions[0]
                first = why_failed(d)
                reasons.append(Reason(d.code, f"produces %{m.out.name} = {m.op} : {m.out.type}"
                                      f", which has no legal route ({first})", d.hint))
        self._last_failed = failed
        return nodes, decisions, reasons

    def route(self, node: Node, depth: int = 0, parent: str = "") -> _Outcome:
        in_types = [self.values[i].type for i in node.inputs]
        name = self.policy.name_for(node.op)
        decomp = decomposition_for(node.op)
        rejected: list[Rejection] = []
        failed_subs: list[Decision] = []
        if name == FORCE_COMMON and decomp is not None:
            # said up front: under force-common the native route is not taken even if claimed
            rejected.append(Rejection(NATIVE, "", (Reason(
                "RLX-L007", f"policy force-common: {node.op} has a common-IR decomposition, "
                "so native is not used", f"set {node.op} to prefer-native to allow the native "
                "route"),)))
        if depth > MAX_DEPTH:
            rejected.append(Rejection(COMMON, "", (Reason(
                "RLX-L010", f"lowering of {node.op} nests deeper than {MAX_DEPTH}",
                "please report this: a decomposition or rewrite loops"),)))
        for route in self.policy.routes_for(node.op) if depth <= MAX_DEPTH else ():
            if route == NATIVE:
                if name == FORCE_COMMON and decomp is not None:
                    continue  # rejected above
                reasons = self.caps.check(node, in_types)
                if not reasons:
                    d = self._decision(node, NATIVE, "", depth, parent, [node], rejected)
                    return _Outcome(True, [node], [d])
                rejected.append(Rejection(NATIVE, "", tuple(reasons)))
            elif route == COMMON:
                if decomp is None:
                    rejected.append(Rejection(COMMON, "", (Reason(
                        "RLX-L001", f"{node.op} has no common-IR decomposition"),)))
                    continue
                nodes, subs, reasons = self._nested(node, decomp, depth)
                if not reasons:
                    d = self._decision(node, COMMON, decomp.__name__, depth, parent, nodes,
                                       rejected)
                    return _Outcome(True, nodes, [d, *subs])
                rejected.append(Rejection(COMMON, decomp.__name__, tuple(reasons)))
                failed_subs.extend(self._last_failed)
            elif route == REWRITTEN:
                rules = rewrites_for(node, in_types, self.caps)
                if not rules:
                    rejected.append(Rejection(REWRITTEN, "", (Reason(
                        "RLX-L001", f"no rewrite rule matches {node.op} : {node.out.type}"),)))
                for rule in rules:
                    try:
                        nodes, subs, reasons = self._nested(
                            node, lambda n, ins, b, r=rule: r.fn(n, ins, b, self.env), depth)
                    except NotApplicable as na:
                        rejected.append(Rejection(REWRITTEN, rule.name, (na.reason,)))
                        continue
                    if not reasons:
                        d = self._decision(node, REWRITTEN, rule.name, depth, parent, nodes,
                                           rejected)
                        return _Outcome(True, nodes, [d, *subs])
                    rejected.append(Rejection(REWRITTEN, rule.name, tuple(reasons)))
                    failed_subs.extend(self._last_failed)
        if name == FORCE_NATIVE and decomp is not None:
            rejected.append(Rejection(COMMON, decomp.__name__, (Reason(
                "RLX-L007", f"policy force-native: the common-IR decomposition of {node.op} "
                "is not used", f"set {node.op} to prefer-native to allow common-IR"),)))
        failed = [d for d in failed_subs if d.route == UNSUPPORTED]
        return _Outcome(False, [], [self._failure(node, depth, parent, rejected), *failed])

    def _failure(self, node: Node, depth: int, parent: str,
                 rejected: list[Rejection]) -> Decision:
        reasons = [r for rej in rejected for r in rej.reasons]
        code = primary_code([r.code for r in reasons])
        hint = next((r.hint for r in reasons if r.code == code and r.hint), "")
        if not hint:
            hint = (f"{node.op} cannot run on {self.caps.target}: compile for target cpu or "
                    "numpy, or restructure the model to avoid it")
        return self._decision(node, UNSUPPORTED, "", depth, parent, [], rejected, code=code,
                              hint=hint)


def why_failed(d: Decision) -> str:
    """The most telling sentence of a failed decision: the last (deepest) reason with its code."""
    found = [r.message for rej in d.rejected for r in rej.reasons if r.code == d.code]
    return found[-1] if found else "no legal route"


def _caps_of(target: Any, options: Any) -> Capabilities:
    if isinstance(target, Capabilities):
        return target
    if target is not None and getattr(target, "caps", None) is not None:
        return target.caps
    if isinstance(target, str):
        return caps_for(target)
    return caps_for(getattr(options, "target", None) or "numpy")


def legalize_graph(g: Graph, target: Any = None, options: Any = None,
                   trace: CompileTrace | None = None, raise_errors: bool = True) -> LegalizeResult:
    """Route every node of ``g`` on ``target`` (a Target, a Capabilities table or a name).

    Returns the MIR graph and the decisions; when some node is illegal, raises
    LegalizationError (or, with ``raise_errors=False``, returns a result whose graph is None:
    what the static probe uses). Decisions are appended to ``trace.decisions`` when tracing.
    """
    caps = _caps_of(target, options)
    policy = resolve_policy(getattr(options, "policy", None))
    i64_rule = caps.dtype_rule("i64")
    narrowed: tuple[str, ...] = ()
    env = RewriteEnv(caps, bool(getattr(options, "allow_approximate", False)))
    if i64_rule is not None and i64_rule.status == "narrow":
        nar = narrow_i64(g, getattr(options, "input_ranges", None))
        g, narrowed = nar.graph, nar.narrowed
        env = RewriteEnv(caps, env.allow_approximate, nar.ranges, nar.unknown_why)
    values = dict(g.values())
    router = _Router(caps, policy, env, values, NameGen(values))
    nodes: list[Node] = []
    decisions: list[Decision] = []
    failures: list[Failure] = []
    for n in g.nodes:
        outcome = router.route(n)
        first = outcome.decisions[0]
        if n.out.name in narrowed and outcome.ok:
            first = _as_narrowed(first, caps.target)
        decisions.extend([first, *outcome.decisions[1:]])
        if outcome.ok:
            nodes.extend(outcome.nodes)
        else:
            failures.append(Failure(first))
    pol = policy.describe()
    if trace is not None:
        trace.decisions.extend(d.to_json() for d in decisions)
    if failures:
        err = LegalizationError(caps.target, pol, failures, decisions)
        if trace is not None:
            trace.errors.append(err.to_json())
        if raise_errors:
            raise err
        return LegalizeResult(None, caps.target, pol, decisions, failures)
    mir = g.with_nodes(nodes, level=Level.MIR)
    verify(mir, native_composites=caps.native_composites())
    return LegalizeResult(mir, caps.target, pol, decisions, failures)


def _as_narrowed(d: Decision, target: str) -> Decision:
    """A node retyped i64 -> i32 took the rewritten route (its inner route stays as a note)."""
    from dataclasses import replace

    inner = d.route + (f" ({d.rule})" if d.rule else "")
    native_rej = Rejection(NATIVE, "", (Reason(
        "RLX-L004", f"i64 is not available in {target} kernels", ""),))
    return replace(d, route=REWRITTEN, rule="i64_to_i32", rejected=(native_rej, *d.rejected),
                   notes=(*d.notes, f"narrowed i64 -> i32 (range proven), then {inner}"))
