"""The static dispatch probe: for a graph and some targets, how every node would run (or why it
cannot), without compiling a kernel. Also the what-if diff of two policies.

Text form, one block per target (counts of top-level nodes per op kind)::

    target webgpu (planned)  policy prefer-native  compile-ready: no
      kind        native  common-IR  rewritten  unsupported
      linear           0          1          0            0
      embedding        0          0          0            1
      -> %3 embedding (model.py:12) [RLX-L004] i64 %ids cannot be narrowed ... fix: ...
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from rlx_core.dispatch.legalize import LegalizeResult, legalize_graph, why_failed
from rlx_core.dispatch.policy import COMMON, NATIVE, REWRITTEN, UNSUPPORTED
from rlx_core.dispatch.registry import caps_for, caps_names
from rlx_core.ir.graph import Graph
from rlx_core.passes.base import CompileOptions

COLUMNS: tuple[str, ...] = (NATIVE, COMMON, REWRITTEN, UNSUPPORTED)


def route_counts(result: LegalizeResult) -> dict[str, dict[str, int]]:
    """op kind -> route -> number of top-level nodes, kinds in first-seen order."""
    table: dict[str, dict[str, int]] = {}
    for d in result.top_level():
        row = table.setdefault(d.op, {c: 0 for c in COLUMNS})
        row[d.route] += 1
    return table


@dataclass
class ExplainReport:
    """Per target: the legalization result (decisions, failures) of the probed graph."""

    graph: str
    results: dict[str, LegalizeResult] = field(default_factory=dict)
    verification: dict[str, str] = field(default_factory=dict)

    @property
    def targets(self) -> list[str]:
        return list(self.results)

    def compile_ready(self, target: str) -> bool:
        return self.results[target].ok

    def counts(self, target: str) -> dict[str, dict[str, int]]:
        return route_counts(self.results[target])

    def routes(self, target: str) -> dict[str, str]:
        """node name -> route, for the top-level nodes."""
        return {d.node: d.route for d in self.results[target].top_level()}

    def to_json(self) -> dict[str, Any]:
        return {
            "graph": self.graph,
            "targets": {
                t: {"verification": self.verification.get(t, ""),
                    "policy": r.policy, "compile_ready": r.ok, "counts": route_counts(r),
                    "decisions": [d.to_json() for d in r.decisions],
                    "failures": [f.to_json() for f in r.failures]}
                for t, r in self.results.items()},
        }

    def to_text(self) -> str:
        out: list[str] = [f"dispatch report for @{self.graph}"]
        for t, r in self.results.items():
            out.append(f"target {t} ({self.verification.get(t, '?')})  policy {r.policy}  "
                       f"compile-ready: {'yes' if r.ok else 'no'}")
            counts = route_counts(r)
            width = max([len("kind"), *(len(k) for k in counts)])
            out.append(f"  {'kind':<{width}}  " + "  ".join(f"{c:>11}" for c in COLUMNS))
            for kind, row in counts.items():
                out.append(f"  {kind:<{width}}  " + "  ".join(f"{row[c]:>11}" for c in COLUMNS))
            for f in r.failures:
                d = f.decision
                out.append(f"  -> %{d.node} {d.op} ({d.where}) [{d.code}] {why_failed(d)}; "
                           f"fix: {d.hint}")
        return "\n".join(out)

    def __str__(self) -> str:
        return self.to_text()


def _target_list(targets: str | Sequence[str]) -> list[str]:
    if targets == "all":
        return list(caps_names())
    if isinstance(targets, str):
        return [t.strip() for t in targets.split(",") if t.strip()]
    return list(targets)


def _caps(name: str) -> Any:
    """The static table of ``name``; a registered target without one in CAPS_TABLES (its table
    depends on the target object: cortex-m, fpga, webgpu-browser) is asked for its ``caps``."""
    from rlx_core.targets.registry import TARGETS, get_target

    if name in caps_names() or name not in TARGETS:
        return caps_for(name)  # unknown names raise caps_for's typed error
    return get_target(name).caps


def _as_graph(fn_or_graph: Any, example_args: tuple[Any, ...]) -> Graph:
    if isinstance(fn_or_graph, Graph):
        return fn_or_graph
    from rlx_core.frontend.tracer import trace  # the frontend only when given a function

    return trace(fn_or_graph, *example_args)


def explain(fn_or_graph: Any, *example_args: Any, targets: str | Sequence[str] = "all",
            policy: Any = None, allow_approximate: bool = False,
            features: Sequence[str] = ()) -> ExplainReport:
    """Probe how ``fn(*example_args)`` (or a graph) dispatches on each target. No kernels are
    compiled; only capability tables are read. ``features`` switches optional target features
    on (e.g. ``("shader-f16",)``) where a target knows them."""
    g = _as_graph(fn_or_graph, example_args)
    report = ExplainReport(g.name)
    for name in _target_list(targets):
        caps = _caps(name)
        known = tuple(f for f in features if f in caps.features)
        if known:
            caps = caps.with_features(*known)
        opts = CompileOptions(target=name, policy=policy, allow_approximate=allow_approximate)
        report.results[name] = legalize_graph(g, caps, opts, raise_errors=False)
        report.verification[name] = caps.verification
    return report


@dataclass(frozen=True)
class KindMove:
    """One kind of node whose route counts differ between two policies (what_if): route ->
    count before and after."""

    kind: str
    before: dict[str, int]
    after: dict[str, int]

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "before": self.before, "after": self.after}


@dataclass
class PolicyDiff:
    """Which op kinds moved route when the policy changed from ``before`` to ``after``."""

    target: str
    before: str
    after: str
    moved: list[KindMove]
    ready_before: bool
    ready_after: bool

    def to_json(self) -> dict[str, Any]:
        return {"target": self.target, "before": self.before, "after": self.after,
                "moved": [m.to_json() for m in self.moved],
                "compile_ready": {"before": self.ready_before, "after": self.ready_after}}

    def to_text(self) -> str:
        head = f"policy {self.before} -> {self.after} on {self.target}"
        if not self.moved:
            return head + ": no kind moved route"

        def fmt(row: dict[str, int]) -> str:
            return ", ".join(f"{n} {r}" for r, n in row.items() if n) or "-"

        lines = [head + f": {len(self.moved)} kind(s) moved"]
        lines += [f"  {m.kind}: {fmt(m.before)} -> {fmt(m.after)}" for m in self.moved]
        return "\n".join(lines)


def what_if(fn_or_graph: Any, *example_args: Any, target: str, before: Any = None,
            after: Any, allow_approximate: bool = False) -> PolicyDiff:
    """Probe twice and report the kinds whose route counts differ between the two policies."""
    g = _as_graph(fn_or_graph, example_args)
    a = explain(g, targets=[target], policy=before, allow_approximate=allow_approximate)
    b = explain(g, targets=[target], policy=after, allow_approximate=allow_approximate)
    ca, cb = a.counts(target), b.counts(target)
    moved = [KindMove(k, ca[k], cb[k]) for k in ca if ca[k] != cb.get(k)]
    ra, rb = a.results[target], b.results[target]
    return PolicyDiff(target, ra.policy, rb.policy, moved, ra.ok, rb.ok)
