"""Graph view models: the nodes, edges and block clusters of one IR level, as plain JSON.

Names stay raw here (they are data); the viewer escapes them when it builds DOT or DOM, and the
HTML export escapes the JSON it embeds. Ids are generated (``h0``, ``m12``, ``k3``) so nothing
the user named ever becomes an element id or a DOT identifier.
"""

from __future__ import annotations

from typing import Any

from rlx_core.ir.graph import Graph, Level, Loc, Node
from rlx_core.ir.printer import fmt_attr, fmt_node

PREFIX = {"hir": "h", "mir": "m", "lir": "l"}


def loc_json(loc: Loc) -> dict[str, Any]:
    return {"file": loc.file, "line": loc.line, "scope": loc.scope, "origin": loc.origin,
            "origin_op": loc.origin_op}


def _attrs_text(n: Node) -> str:
    return ", ".join(f"{k}={fmt_attr(v)}" for k, v in n.attrs)


def node_json(n: Node, nid: str) -> dict[str, Any]:
    return {"id": nid, "name": n.name, "op": n.op, "type": str(n.type), "kind": "node",
            "inputs": list(n.inputs), "attrs": _attrs_text(n), "loc": loc_json(n.loc),
            "text": fmt_node(n)}


def _clusters(scopes: list[str]) -> list[dict[str, Any]]:
    """Every scope and each of its dotted prefixes, parents before children."""
    seen: dict[str, dict[str, Any]] = {}
    for scope in scopes:
        if not scope:
            continue
        parts = scope.split(".")
        for depth in range(1, len(parts) + 1):
            name = ".".join(parts[:depth])
            if name not in seen:
                parent = ".".join(parts[: depth - 1])
                seen[name] = {"id": f"c{len(seen)}", "scope": name, "label": parts[depth - 1],
                              "parent": seen[parent]["id"] if parent in seen else ""}
    return list(seen.values())


def graph_view(g: Graph) -> dict[str, Any]:
    """Nodes (inputs, params, ops), value edges and scope clusters of ``g``.

    For LIR the ops are additionally grouped by kernel (``kernels``: id, name, kind, node ids),
    and each op node names its kernel; the viewer draws LIR as one box per kernel.
    """
    ops = [node_json(n, "") for n in g.nodes]
    kernels = [(k.name, k.kind, list(k.inputs), list(k.outputs), [n.name for n in k.nodes])
               for k in g.kernels]
    view = assemble(g.level.value, g.name, [(v.name, str(v.type)) for v in g.inputs],
                    [(v.name, str(v.type)) for v in g.params], ops, kernels, list(g.outputs))
    for item in view["nodes"]:  # how each weight was given: its fix hint is spelled for it
        if item["kind"] == "param" and item["name"] in g.param_data:
            item["host"] = host_kind(g.param_data[item["name"]])
    return view


def host_kind(data: Any) -> str:
    """What kind of host array a weight is: ``numpy``, ``memoryview``, ``array``
    (``array.array``), ``host`` (an rlx HostArray), ``list`` or ``""`` (anything else)."""
    from array import array

    module = type(data).__module__.split(".", 1)[0]
    if module == "numpy":
        return module
    if isinstance(data, memoryview):
        return "memoryview"
    if isinstance(data, array):
        return "array"
    if type(data).__name__ == "HostArray":
        return "host"
    return "list" if isinstance(data, list | tuple) else ""


def assemble(level: str, name: str, inputs: list[tuple[str, str]],
             params: list[tuple[str, str]], ops: list[dict[str, Any]],
             kernels_in: list[tuple[str, str, list[str], list[str], list[str]]],
             outputs_in: list[str]) -> dict[str, Any]:
    """The graph view from its parts (shared by ``graph_view`` and the fast text reader)."""
    pre = PREFIX[level]
    nodes: list[dict[str, Any]] = []
    by_name: dict[str, str] = {}
    for kind, values in (("input", inputs), ("param", params)):
        for vname, vtype in values:
            nid = f"{pre}{len(nodes)}"
            by_name[vname] = nid
            nodes.append({"id": nid, "name": vname, "op": kind, "type": vtype, "kind": kind,
                          "inputs": [], "attrs": "", "loc": loc_json(Loc()),
                          "text": f"{kind} %{vname} : {vtype}"})
    kernel_of: dict[str, str] = {}
    kernels: list[dict[str, Any]] = []
    for i, (kname, kkind, kins, kouts, knodes) in enumerate(kernels_in):
        kernels.append({"id": f"k{i}", "name": kname, "kind": kkind, "inputs": kins,
                        "outputs": kouts, "nodes": []})
        for n in knodes:
            kernel_of[n] = f"k{i}"
    for item in ops:
        nid = f"{pre}{len(nodes)}"
        by_name[item["name"]] = nid
        item["id"] = nid
        if item["name"] in kernel_of:
            item["kernel"] = kernel_of[item["name"]]
            kernels[int(kernel_of[item["name"]][1:])]["nodes"].append(nid)
        nodes.append(item)
    edges = [[by_name[i], by_name[n["name"]]] for n in ops for i in n["inputs"] if i in by_name]
    outputs = [by_name[o] for o in outputs_in if o in by_name]
    clusters = _clusters(list(dict.fromkeys(n["loc"]["scope"] for n in ops)))
    cluster_of = {c["scope"]: c["id"] for c in clusters}
    for item in nodes:
        item["cluster"] = cluster_of.get(item["loc"]["scope"], "")
    by_id = {item["id"]: item for item in nodes}
    for k in kernels:  # a kernel sits in the block of its first node (fusion stays in blocks)
        k["cluster"] = by_id[k["nodes"][0]]["cluster"] if k["nodes"] else ""
    return {"level": level, "name": name, "nodes": nodes, "edges": edges, "outputs": outputs,
            "clusters": clusters, "kernels": kernels,
            "counts": {"nodes": len(ops), "inputs": len(inputs), "params": len(params),
                       "kernels": len(kernels)}}


def parse_level(text: str) -> Graph | None:
    """A graph from its text form, or None when the text does not parse (a partial snapshot)."""
    from rlx_core.errors import RlxError
    from rlx_core.ir.parser import parse

    try:
        return parse(text)
    except RlxError:
        return None


def level_of(text: str) -> Level | None:
    head = text.split(" ", 1)[0] if text else ""
    return {lv.value: lv for lv in Level}.get(head)
