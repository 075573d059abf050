"""Graph views as Graphviz DOT, and their server-side SVG layout where ``dot`` is installed.

The viewer has its own DOT writer (same rules, in static/parts/dot.js) for interactive states
(blocks expanded or collapsed, weights shown) and lays them out with the bundled Graphviz WASM.
Here we pre-render each level's *initial* state with the ``graphviz`` package, so a host with
``dot`` shows graphs without starting WASM at all. Every user-derived string goes through
``quote``: DOT identifiers are generated ids only.
"""

from __future__ import annotations

import shutil
from typing import Any

COLLAPSE_ABOVE = 60  # graphs with more op nodes than this open with every block collapsed

FILL = {"input": "#dbeafe", "param": "#f1f5f9", "node": "#ffffff", "kernel": "#fef3c7",
        "block": "#e0e7ff"}


def quote(text: str) -> str:
    """A DOT double-quoted string; backslashes are doubled so no ``\\N``-style escape fires."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def initial_state(view: dict[str, Any]) -> dict[str, Any]:
    """Which blocks start collapsed and whether weights are drawn (mirrors the viewer): a big
    graph opens with its top-level blocks collapsed, so a whole MiniLM stays readable."""
    ops = sum(1 for n in view["nodes"] if n["kind"] == "node")
    collapsed = [c["id"] for c in view["clusters"] if not c["parent"]] \
        if ops > COLLAPSE_ABOVE else []
    return {"collapsed": collapsed, "params": False}


def _label(n: dict[str, Any]) -> str:
    if n["kind"] in ("input", "param"):
        return f"{n['kind']} %{n['name']}\n{n['type']}"
    return f"%{n['name']} = {n['op']}\n{n['type']}"


def _units(view: dict[str, Any], params: bool) -> tuple[list[dict[str, str]], dict[str, str]]:
    """The boxes to draw before collapsing (ops, or for LIR kernels) and node id -> box id."""
    lir = view["level"] == "lir" and bool(view["kernels"])
    units: list[dict[str, str]] = []
    unit_of: dict[str, str] = {}
    for n in view["nodes"]:
        if n["kind"] == "param" and not params:
            unit_of[n["id"]] = ""
        elif lir and n.get("kernel"):
            unit_of[n["id"]] = n["kernel"]
        else:
            unit_of[n["id"]] = n["id"]
            fill = STATUS_FILL.get(n.get("status", ""), FILL.get(n["kind"], "#ffffff"))
            units.append({"id": n["id"], "cluster": n.get("cluster", ""), "label": _label(n),
                          "fill": fill, "dashed": "1" if n.get("status") == "removed" else ""})
    if lir:
        for k in view["kernels"]:
            units.append({"id": k["id"], "cluster": k.get("cluster", ""), "fill": FILL["kernel"],
                          "label": f"@{k['name']} {k['kind']}\n{len(k['nodes'])} ops",
                          "dashed": ""})
    return units, unit_of


STATUS_FILL = {"added": "#dcfce7", "changed": "#fef9c3", "removed": "#fee2e2"}


def to_dot(view: dict[str, Any], collapsed: list[str] | tuple[str, ...] = (),
           params: bool = False) -> str:
    """DOT for a graph view. LIR is drawn as one box per kernel; a collapsed block is one box."""
    clusters = {c["id"]: c for c in view["clusters"]}
    closed = set(collapsed)

    def top_closed(cid: str) -> str:
        """The outermost collapsed block containing cluster ``cid`` ('' if none)."""
        found = ""
        while cid:
            if cid in closed:
                found = cid
            cid = clusters[cid]["parent"] if cid in clusters else ""
        return found

    units, unit_of = _units(view, params)
    box_of = {u["id"]: top_closed(u["cluster"]) or u["id"] for u in units}
    lines = ["digraph G {", '  graph [rankdir=TB, nodesep=0.25, ranksep=0.35, '
             'fontname="Helvetica", fontsize=10];',
             '  node [shape=box, style="rounded,filled", fontname="Helvetica", fontsize=9, '
             'height=0.3, margin="0.08,0.03"];', '  edge [arrowsize=0.5, color="#64748b"];']
    members: dict[str, list[str]] = {}
    counts: dict[str, int] = {}
    for u in units:
        box = box_of[u["id"]]
        if box != u["id"]:
            counts[box] = counts.get(box, 0) + 1
            continue
        style = ', style="rounded,filled,dashed"' if u["dashed"] else ""
        members.setdefault(u["cluster"], []).append(
            f"  {u['id']} [id={quote(u['id'])}, label={quote(u['label'])}, "
            f"fillcolor={quote(u['fill'])}{style}];")
    children: dict[str, list[str]] = {}
    for c in view["clusters"]:
        children.setdefault(c["parent"], []).append(c["id"])

    def emit_cluster(cid: str, depth: int) -> None:
        c = clusters[cid]
        pad = "  " * depth
        if cid in closed:
            text = c["scope"] + "\n" + f"{counts.get(cid, 0)} boxes (collapsed)"
            lines.append(f"{pad}{cid} [id={quote(cid)}, shape=box3d, label={quote(text)}, "
                         f"fillcolor={quote(FILL['block'])}];")
            return
        lines.append(f"{pad}subgraph cluster_{cid} {{")
        lines.append(f"{pad}  id={quote(cid)}; label={quote(c['label'])}; style=rounded; "
                     f'color="#6366f1";')
        lines.extend(pad + m for m in members.get(cid, []))
        for child in children.get(cid, []):
            emit_cluster(child, depth + 1)
        lines.append(f"{pad}}}")

    lines.extend(members.get("", []))
    for cid in children.get("", []):
        emit_cluster(cid, 1)
    seen: set[tuple[str, str]] = set()
    pairs: list[tuple[str, str]] = []
    for a, b in view["edges"]:
        ua, ub = unit_of.get(a, ""), unit_of.get(b, "")
        ra, rb = box_of.get(ua, ""), box_of.get(ub, "")
        if not ra or not rb or ra == rb or (ra, rb) in seen:
            continue
        seen.add((ra, rb))
        pairs.append((ra, rb))
    for ra, rb in pairs:
        if (rb, ra) not in seen:
            lines.append(f"  {ra} -> {rb};")
        elif pairs.index((ra, rb)) < pairs.index((rb, ra)):  # one edge for the two directions
            lines.append(f"  {ra} -> {rb} [{BOTH_WAYS}];")
    lines.append("}")
    return "\n".join(lines) + "\n"


# Collapsed blocks whose kernels interleave pass values both ways (attention <-> ffn through
# the residual adds): one dashed two-headed edge, so it does not read as a cycle.
BOTH_WAYS = ('dir=both, style=dashed, color="#b45309", tooltip="values flow both ways: the '
             'blocks\' kernels interleave (not a cycle)"')


def dot_available() -> bool:
    """Whether server-side layout can run: the ``graphviz`` package and the ``dot`` program."""
    try:
        import graphviz  # noqa: F401
    except ImportError:
        return False
    return shutil.which("dot") is not None


def render_svg(dot_text: str) -> str | None:
    """SVG from the ``dot`` program, or None when it is not installed (the browser lays out)."""
    if not dot_available():
        return None
    import graphviz

    try:
        return graphviz.Source(dot_text).pipe(format="svg").decode("utf-8")
    except (graphviz.ExecutableNotFound, graphviz.CalledProcessError, OSError):
        return None
