"""Every device side by side: one column per registered target, headed by its verification
level, with what it would take to make the model compile-ready there, and the same LIR kernel
in every target's language.

The column facts come from the static dispatch probe (no device needed) and, for targets with
a strict model check of their own (cortex-m, fpga: int8 only), from that check's typed problems.
"What would it take" is the root-cause grouping of the target's legalization failures
(root_causes.py): one fix per cause, with the number of nodes it fixes. The side-by-side kernels
come from device_sources.py: each target lowers the model itself and renders its source without
its device; a primary LIR kernel is matched in each target's LIR by the HIR nodes it computes.
"""

from __future__ import annotations

import re
from typing import Any

from rlx_core.ir.graph import Graph
from rlx_explorer.views.failures import failure_view
from rlx_explorer.views.kernels import source_line_links
from rlx_explorer.views.sources import SourceIndex

# the language each target's renderer writes (docs/targets.md has the long form)
LANGUAGES: dict[str, str] = {
    "numpy": "LIR (interpreted)", "cpu": "C", "webgpu": "WGSL", "webgpu-browser": "WGSL",
    "tpu": "StableHLO", "hexagon": "Hexagon C (HVX)", "opencl": "OpenCL C", "opengl": "GLSL 4.30",
    "vulkan": "GLSL 4.50", "directx": "HLSL", "cuda": "CUDA C", "rocm": "HIP", "metal": "MSL",
    "cortex-m": "Cortex-M C (int8)", "fpga": "Verilog",
}
_PROBLEM = re.compile(r"^(RLX-[A-Z]\d{3}) %(\S+) (\S+)(?: \((.*?)\))?: (.*?); fix: (.*)$")


def problem_groups(lines: list[str]) -> list[dict[str, Any]]:
    """A strict target check's problem lines (``RLX-U001 %n op (file:12): what; fix: how``,
    cortex_m/legalize.Problem.line) grouped by fix: one entry per distinct fix."""
    groups: dict[str, dict[str, Any]] = {}
    for line in lines:
        m = _PROBLEM.match(line.strip())
        if m is None:
            groups.setdefault(line, {"code": line.split(" ", 1)[0], "fix": line, "nodes": []})
            continue
        code, node, _op, _where, _what, fix = m.groups()
        groups.setdefault(fix, {"code": code, "fix": fix, "nodes": []})["nodes"].append(node)
    out = sorted(groups.values(), key=lambda g: -len(g["nodes"]))
    for g in out:
        n = len(g["nodes"])
        g["count"] = n
        g["fix_line"] = f"{g['fix']}: fixes {n} node{'s' * (n != 1)}" if n else g["fix"]
    return out


def _totals(counts: dict[str, dict[str, int]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for row in counts.values():
        for route, n in row.items():
            out[route] = out.get(route, 0) + n
    return out


def target_column(name: str, probe: dict[str, Any], hir_view: dict[str, Any],
                  sources: SourceIndex, available: tuple[bool, str],
                  check_problems: list[str]) -> dict[str, Any]:
    """One target's column header and its "what would it take" summary."""
    fails = probe.get("failures", [])
    groups = failure_view(name, probe.get("policy", ""), fails, hir_view, sources,
                          compiled=False)["groups"] if fails else []
    strict = problem_groups(check_problems)
    # a strict check speaks the target's own terms ("quantize the model first"); the
    # dispatcher's failures of the same float nodes would only repeat it less usefully
    groups = [] if strict else groups
    takes = [{"code": g["code"], "fix_line": g["fix_line"], "count": g["count"],
              "nodes": g["nodes"], "kind": g["kind"], "file_label": g.get("file_label", ""),
              "line": g.get("line", 0)} for g in groups]
    takes += [{"code": g["code"], "fix_line": g["fix_line"], "count": g["count"],
               "nodes": g["nodes"], "kind": "target-check", "file_label": "", "line": 0}
              for g in strict]
    ready = bool(probe.get("compile_ready", False)) and not strict
    return {"name": name, "verification": probe.get("verification", ""),
            "language": LANGUAGES.get(name, ""), "available": available[0],
            "why": available[1], "compile_ready": ready,
            "routes": _totals(_counts(probe.get("decisions", []))),
            "failing_nodes": sum(g["count"] for g in strict) if strict else len(fails),
            "takes": takes}


def _counts(decisions: list[dict[str, Any]]) -> dict[str, dict[str, int]]:
    from rlx_explorer.views.dispatch import counts

    return counts(decisions)


def _origins(nodes: Any) -> list[str]:
    return list(dict.fromkeys(n.loc.origin or n.name for n in nodes))


def split_kernels(text: str, names: list[str]) -> dict[str, str]:
    """A whole-module source (StableHLO ``// kernel k0: ...``, C ``/* kernel k0 (...`` heads)
    cut at each kernel's head comment; {} when the module does not mark its kernels."""
    heads = []
    for name in names:
        m = re.search(rf"^\s*(?://|/\*) kernel {re.escape(name)}\b.*$", text, flags=re.M)
        if m is not None:
            heads.append((m.start(), name))
    if not heads:
        return {}
    heads.sort()
    lines_end = len(text)
    out = {}
    for i, (at, name) in enumerate(heads):
        end = heads[i + 1][0] if i + 1 < len(heads) else lines_end
        out[name] = text[at:end].rstrip("\n")
    return out


def match_kernel(lir: Graph, origins: list[str]) -> Any:
    """The kernel of ``lir`` that computes most of ``origins`` (HIR node names), or None."""
    want = set(origins)
    best, score = None, (0, 0)
    for k in lir.kernels:
        have = set(_origins(k.nodes))
        s = (len(want & have), -len(have - want))  # most shared, then fewest extra nodes
        if s[0] and s > score:
            best, score = k, s
    return best


def kernel_column(target: str, lir: Graph | None, srcs: dict[str, str], origins: list[str],
                  how: str, error: str) -> dict[str, Any]:
    """The matched kernel of one target, its lines highlighted and linked to HIR origins."""
    base = {"target": target, "language": LANGUAGES.get(target, ""), "how": how}
    if lir is None:
        return {**base, "kernel": "", "error": error or "no source", "lines": []}
    k = match_kernel(lir, origins)
    if k is None:
        return {**base, "kernel": "", "error": "no kernel computes these nodes here", "lines": []}
    text = srcs.get(k.name)
    whole = ""
    if text is None and srcs:
        cut = split_kernels("\n".join(srcs.values()), [x.name for x in lir.kernels])
        text = cut.get(k.name)
        if text is None:  # a module without kernel marks (cortex-m C, Verilog): all of it
            whole = ", ".join(srcs)
            text = "\n".join(f"// ---- {n} ----\n{s}" for n, s in srcs.items())
    if text is None:
        text, base["language"] = "\n".join(f"{n.name} = {n.op}" for n in k.nodes), "LIR"
    lines = text.splitlines()
    own = [(n.loc.origin or n.name, n.name) for n in k.nodes]
    every = {re.sub(r"[^A-Za-z0-9_.]", "_", n.name): n.loc.origin or n.name
             for kk in lir.kernels for n in kk.nodes}
    links = source_line_links(lines, own, every)
    # plain text lines (the viewer dims comments): highlighted tokens for fifteen languages
    # would triple the bundle
    return {**base, "kernel": k.name, "kind": k.kind, "whole_module": whole, "error": "",
            "covers": sorted(set(origins) & set(_origins(k.nodes))), "same_as": "",
            "lines": [{"text": t, "nodes": ln} for t, ln in zip(lines, links, strict=False)]}


def _dedupe(cols: list[dict[str, Any]]) -> None:
    """A column whose text equals an earlier one's (webgpu-browser runs webgpu's WGSL) points
    at it instead of repeating the lines."""
    seen: dict[str, str] = {}
    for c in cols:
        if not c["lines"]:
            continue
        key = c["language"] + "\n" + "\n".join(ln["text"] for ln in c["lines"])
        if key in seen:
            c["same_as"], c["lines"] = seen[key], []
        else:
            seen[key] = c["target"]


def side_by_side(primary: Graph, emitted: dict[str, dict[str, Any]],
                 limit: int = 3) -> dict[str, Any]:
    """Up to ``limit`` primary LIR kernels (the biggest by node count first, one per kind
    before a second of any; constants alone are no kernel to compare), each shown in every
    target's language."""
    ks = sorted((k for k in primary.kernels if any(n.op != "constant" for n in k.nodes)),
                key=lambda k: -len(k.nodes))
    picked: list[Any] = []
    for k in ks:  # one of each kind first, then the rest by size
        if k.kind not in {p.kind for p in picked}:
            picked.append(k)
    picked += [k for k in ks if k not in picked]
    picked = sorted(picked[:limit], key=lambda k: primary.kernels.index(k))
    out = []
    for k in picked:
        origins = _origins(k.nodes)
        cols = [kernel_column(t, e.get("lir"), e.get("sources", {}), origins, e.get("how", ""),
                              e.get("error", "")) for t, e in emitted.items()]
        _dedupe(cols)
        out.append({"name": k.name, "kind": k.kind, "origins": origins,
                    "ops": [n.op for n in k.nodes], "targets": cols})
    return {"kernels": out, "targets": list(emitted)}


def devices_view(columns: list[dict[str, Any]], kernels: dict[str, Any]) -> dict[str, Any]:
    return {"targets": columns, "side_by_side": kernels,
            "ready": [c["name"] for c in columns if c["compile_ready"]]}
