"""Pass stepper view model: every pass as a graph diff (added / changed / removed nodes) with the
rule firings inside it, each naming the rule, where it is written and the nodes it touched."""

from __future__ import annotations

import difflib
import re
from typing import Any

from rlx_core.compile_trace import CompileTrace, PassStep
from rlx_explorer.views.graphs import graph_view, parse_level
from rlx_explorer.views.textgraph import text_graph_view

_DEF = re.compile(r"^\s*%([A-Za-z0-9_.]+) :")
MAX_DIFF_NODES = 4000  # above this the stepper shows the text diff only (keeps bundles small)
MAX_DIFF_LINES = 3000


def _defined(lines: list[str]) -> list[str]:
    out = []
    for line in lines:
        m = _DEF.match(line)
        if m:
            out.append(m.group(1))
    return out


def _read(text: str) -> dict[str, Any] | None:
    view = text_graph_view(text)
    if view is None:  # not in the plain form the fast reader knows: use the real parser
        g = parse_level(text)
        view = graph_view(g) if g is not None else None
    return view


def diff_graph(before_text: str, after_text: str) -> dict[str, Any] | None:
    """The after-graph plus the removed nodes of the before-graph, each node with a ``status``."""
    view, old = _read(after_text), _read(before_text)
    if view is None or old is None:
        return None
    if len(view["nodes"]) + len(old["nodes"]) > MAX_DIFF_NODES:
        return None
    old_by_name = {n["name"]: n for n in old["nodes"]}
    new_names = {n["name"] for n in view["nodes"]}
    for n in view["nodes"]:
        prev = old_by_name.get(n["name"])
        n["status"] = ("added" if prev is None else
                       "same" if (prev["op"], prev["type"], prev["inputs"], prev["attrs"]) ==
                       (n["op"], n["type"], n["inputs"], n["attrs"]) else "changed")
    ids = {n["name"]: n["id"] for n in view["nodes"]}
    removed = [n for n in old["nodes"] if n["name"] not in new_names]
    for i, n in enumerate(removed):
        item = dict(n, id=f"r{i}", status="removed", cluster=n.get("cluster", ""), kernel="")
        ids.setdefault(n["name"], item["id"])
        view["nodes"].append(item)
    clusters = {c["scope"]: c for c in view["clusters"]}
    for c in old["clusters"]:
        if c["scope"] not in clusters:  # a block whose nodes were all removed
            c2 = dict(c, id=f"rc{len(clusters)}", parent="")
            clusters[c["scope"]] = c2
            view["clusters"].append(c2)
    cid = {c["scope"]: c["id"] for c in view["clusters"]}
    for item in view["nodes"]:
        if item["status"] == "removed":
            item["cluster"] = cid.get(item["loc"]["scope"], "")
    for n in removed:
        for i in n["inputs"]:
            if i in ids:
                view["edges"].append([ids[i], ids[n["name"]]])
    removed_names = {n["name"] for n in removed}
    for n in old["nodes"]:  # edges from a removed node to its users that survived
        for i in n["inputs"]:
            if i in removed_names and n["name"] in new_names:
                view["edges"].append([ids[i], ids[n["name"]]])
    view["summary"] = {s: sum(1 for n in view["nodes"] if n.get("status") == s)
                       for s in ("added", "changed", "removed")}
    return view


def _rule_json(r: Any, ids: dict[str, str]) -> dict[str, Any]:
    touched = list(dict.fromkeys(_defined(r.before) + _defined(r.after) +
                                 ([r.node] if r.node else [])))
    return {"rule": r.rule, "file": r.file, "line": r.line, "node": r.node,
            "before": list(r.before), "after": list(r.after),
            "touched": [ids[n] for n in touched if n in ids]}


def step_view(index: int, s: PassStep) -> dict[str, Any]:
    changed = s.before != s.after
    graph = diff_graph(s.before, s.after) if changed else None
    ids = {n["name"]: n["id"] for n in (graph or {}).get("nodes", [])}
    diff = list(difflib.unified_diff(s.before.splitlines(), s.after.splitlines(), "before",
                                     "after", n=1, lineterm=""))[:MAX_DIFF_LINES] if changed else []
    return {"index": index, "name": s.name, "file": s.file, "line": s.line,
            "level_before": s.level_before, "level_after": s.level_after,
            "seconds": s.seconds, "changed": changed, "graph": graph, "text_diff": diff,
            "rules": [_rule_json(r, ids) for r in s.rules]}


def passes_view(trace: CompileTrace) -> dict[str, Any]:
    """``steps`` in pipeline order; the viewer steps through passes and, inside, rules."""
    steps = [step_view(i, s) for i, s in enumerate(trace.steps)]
    return {"target": trace.target, "steps": steps,
            "rule_count": sum(len(s["rules"]) for s in steps)}
