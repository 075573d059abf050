"""Cross-level link index: for every HIR origin, its node ids on each level, its user source
line, and the kernels (per target) that contain its lowered nodes.

Selecting any node in the viewer looks up its origin here and highlights all of it at once.
Inputs and parameters keep their names across levels, so they are their own origins.
"""

from __future__ import annotations

from typing import Any


def origin_of(node: dict[str, Any]) -> str:
    return node["loc"].get("origin") or node["name"]


def link_index(levels: dict[str, dict[str, Any]],
               kernels: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """``levels``: level -> graph view; ``kernels``: target -> kernels view."""
    table: dict[str, dict[str, Any]] = {}
    node_origin: dict[str, str] = {}
    kernel_origins: dict[str, list[str]] = {}  # a LIR kernel box stands for several origins
    for level, view in levels.items():
        for n in view["nodes"]:
            key = origin_of(n)
            entry = table.setdefault(key, {"hir": [], "mir": [], "lir": [], "kernels": [],
                                           "file": "", "line": 0})
            entry[level].append(n["id"])
            node_origin[n["id"]] = key
            if not entry["file"] and n["loc"].get("file"):
                entry["file"], entry["line"] = n["loc"]["file"], n["loc"]["line"]
            if level == "lir" and n.get("kernel"):
                kernel_origins.setdefault(n["kernel"], [])
                if key not in kernel_origins[n["kernel"]]:
                    kernel_origins[n["kernel"]].append(key)
    lir_nodes = {n["id"]: n for n in levels.get("lir", {}).get("nodes", [])}
    for target, view in kernels.items():
        for k in view["kernels"]:
            for nid in k["nodes"]:
                n = lir_nodes.get(nid)
                if n is None:
                    continue
                ref = {"target": target, "kernel": k["name"]}
                entry = table[origin_of(n)]
                if ref not in entry["kernels"]:
                    entry["kernels"].append(ref)
    return {"origins": table, "node_origin": node_origin, "kernel_origins": kernel_origins}
