"""Kernels view model: the generated source of every kernel per target, highlighted, each
kernel linked to the LIR nodes fused into it and each line to the nodes it mentions.

Interpreting targets (numpy) generate no source; for them the kernel's LIR text is shown, which
is exactly what they execute. Line links are exact where the renderer says which node a line
is for: every GPU dialect (WGSL, OpenCL C, GLSL, HLSL, CUDA, HIP, MSL) ends each statement in
a ``// %name`` comment naming its LIR nodes (gpu_common), and so does the C of the cpu and
hexagon targets for every computed value and store (c_common/body.py), so a line links to
exactly the nodes its comment names, and a line without one (loop and index scaffolding, a
BLAS call) to none. Sources without any such comment (a C row op such as softmax, StableHLO)
fall back to looking for a node's value name in the forms renderers use for it (``%name``,
``v_name``, ``t_name``, ``name``). Every line of
a kernel is at least linked to the kernel itself.
"""

from __future__ import annotations

import re
from typing import Any

from rlx_core.ir.graph import Graph
from rlx_core.ir.printer import fmt_node
from rlx_explorer.views.highlight import highlight_ir, highlight_source


def _name_forms(name: str) -> list[str]:
    safe = re.sub(r"[^A-Za-z0-9_]", "_", name)
    return [f"%{name}", f"v{safe}", f"v_{safe}", f"t{safe}", f"t_{safe}", f"buf_{safe}", safe]


def _line_links(lines: list[str], nodes: list[tuple[str, str]]) -> list[list[str]]:
    """For each line, the ids of the nodes whose name appears in it as a whole token."""
    patterns = []
    for nid, name in nodes:
        forms = [re.escape(f) for f in _name_forms(name) if not f.isdigit()]
        if forms:
            patterns.append((nid, re.compile(r"(?<![A-Za-z0-9_])(?:" + "|".join(forms) +
                                             r")(?![A-Za-z0-9_])")))
    return [[nid for nid, p in patterns if p.search(line)] for line in lines]


# a node reference in a generated comment: the value name made safe by gpu_common.expr.safe
_NODE_REF = re.compile(r"%([A-Za-z0-9_.]+)")
COMMENT = "//"  # every GPU dialect's line comment (gpu_common.dialect.Dialect.comment)


def _safe(name: str) -> str:
    """A value name as the GPU renderers write it in comments (gpu_common.expr.safe)."""
    return re.sub(r"[^A-Za-z0-9_.]", "_", name)


def _comment_refs(line: str) -> list[str]:
    """The node names the line's trailing comment mentions (``// %h3 = mul``)."""
    at = line.find(COMMENT)
    return _NODE_REF.findall(line[at:]) if at >= 0 else []


def _comment_links(lines: list[str], by_name: dict[str, str]) -> list[list[str]] | None:
    """For each line, the ids of the nodes its node comment names; None when no line of the
    source has one (a renderer that does not write them)."""
    refs = [_comment_refs(line) for line in lines]
    if not any(r in by_name for rs in refs for r in rs):
        return None
    return [list(dict.fromkeys(by_name[r] for r in rs if r in by_name)) for rs in refs]


def source_line_links(lines: list[str], own: list[tuple[str, str]],
                      every: dict[str, str]) -> list[list[str]]:
    """For each generated source line, the ids of the nodes it is for: exact from the node
    comments where the renderer writes them (``every``: safe name -> id of all nodes; the
    kernel's ``own`` (id, name) pairs win when two names sanitise alike), else by name."""
    by_name = {**every, **{_safe(name): nid for nid, name in own}}
    return _comment_links(lines, by_name) or _line_links(lines, own)


def kernels_view(target: str, lir: Graph, lir_view: dict[str, Any],
                 sources: dict[str, str]) -> dict[str, Any]:
    """One entry per LIR kernel, in execution order."""
    ids = {n["name"]: n["id"] for n in lir_view["nodes"]}
    by_safe = {_safe(name): nid for name, nid in ids.items()}
    kid = {k["name"]: k["id"] for k in lir_view["kernels"]}
    generated = bool(sources)
    out = []
    for k in lir.kernels:
        nodes = [(ids[n.name], n.name) for n in k.nodes if n.name in ids]
        if generated:
            text = sources.get(k.name, "")
            tokens = highlight_source(text)
        else:
            text = "\n".join(fmt_node(n) for n in k.nodes)
            tokens = highlight_ir(text)
        lines = text.splitlines()
        if generated:
            links = source_line_links(lines, nodes, by_safe)
        else:
            links = [[nid] for nid, _ in nodes]
        out.append({"name": k.name, "id": kid.get(k.name, ""), "kind": k.kind,
                    "nodes": [nid for nid, _ in nodes], "language": "c-like" if generated
                    else "lir", "lines": [{"tokens": t, "nodes": ln}
                                          for t, ln in zip(tokens, links, strict=False)]})
    # sources not tied to one kernel (a shared prelude, a launcher) are shown as they are
    extra = [{"name": name, "id": "", "kind": "module", "nodes": [], "language": "c-like",
              "lines": [{"tokens": t, "nodes": []} for t in highlight_source(src)]}
             for name, src in sources.items() if name not in kid]
    return {"target": target, "generated": generated, "kernels": out + extra}
