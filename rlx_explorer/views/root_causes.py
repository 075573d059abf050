"""Legalization failures grouped by ROOT CAUSE: the value that brings the illegal dtype into
the graph (a function input, a closed-over weight, a cast or constant), the failing nodes it
poisons, and one fix at its source line — "cast `table` to f32 at line 12: fixes 1 node"
instead of one "cast to f32 before this op" card per poisoned node.

A dtype failure (RLX-L002/L003/L004) is followed upstream, through operands of the offending
dtype, to the values where that dtype starts; any other failure (an op the target lacks, a
device limit) is its own cause. The cast in the fix is spelled for the weight's kind of host
array (numpy, memoryview, array.array, HostArray).
"""

from __future__ import annotations

import re
from typing import Any

from rlx_explorer.views.sources import SourceIndex

DTYPE_CODES = ("RLX-L002", "RLX-L003", "RLX-L004")
# what to cast an illegal dtype to (the nearest dtype every GPU-class target has)
NARROWER = {"f64": "f32", "i64": "i32", "u64": "u32", "c128": "c64", "f16": "f32", "bf16": "f32"}
_DTYPE = re.compile(r"\b(bool|[fiuc]\d+|bf16)\b")


def _dtype(type_text: str) -> str:
    return type_text.split("[", 1)[0].strip()


def bad_dtypes(item: dict[str, Any]) -> set[str]:
    """The dtypes the target rejected for this node (from the native route's reasons)."""
    out: set[str] = set()
    for rej in item.get("rejected", ()):
        for r in rej.get("reasons", ()):
            if r.get("code") in DTYPE_CODES:
                out.update(_DTYPE.findall(r.get("message", "").split(":")[0]))
    return out


def code_for(item: dict[str, Any], dtype: str) -> str:
    """The code the target gave for ``dtype`` on this node (f64: L002, i64: L004, ...)."""
    for rej in item.get("rejected", ()):
        for r in rej.get("reasons", ()):
            if r.get("code") in DTYPE_CODES and dtype in _DTYPE.findall(
                    r.get("message", "").split(":")[0]):
                return str(r["code"])
    return str(item["code"])


class _Graph:
    def __init__(self, hir: dict[str, Any]):
        self.nodes = {n["name"]: n for n in hir.get("nodes", ())}

    def roots(self, name: str, bad: set[str], seen: set[str]) -> list[str]:
        """The values upstream of node ``name`` where a ``bad`` dtype enters the graph: an
        input, a weight, a cast or constant, or an op none of whose operands has that dtype.
        Ops that only carry the dtype on (a gather of an f64 table, a legal f64 add) are
        walked through, whether the target runs them or not."""
        node = self.nodes.get(name)
        if node is None:
            return []
        found: list[str] = []
        for v in node.get("inputs", ()):
            src = self.nodes.get(v)
            if src is None or _dtype(src["type"]) not in bad:
                continue
            if v in seen:  # reached by another path: its roots are listed already
                continue
            seen.add(v)
            if src["kind"] in ("input", "param") or src["op"] in ("cast", "constant",
                                                                   "convert"):
                found.append(v)
            elif not self._carries(v, bad):
                found.append(v)  # this op makes the dtype itself
            else:
                found.extend(self.roots(v, bad, seen))
        return found

    def _carries(self, name: str, bad: set[str]) -> bool:
        """Whether some operand of node ``name`` already has one of the ``bad`` dtypes."""
        return any(v in self.nodes and _dtype(self.nodes[v]["type"]) in bad
                   for v in self.nodes[name].get("inputs", ()))


def _fix(kind: str, name: str, dtype: str, line: int, op: str, host: str = "") -> str:
    to = NARROWER.get(dtype, "a dtype the target supports")
    at = f" at line {line}" if line else ""
    if kind == "param":
        var = name.rsplit(".", 1)[-1]
        how = cast_code(var, host, dtype, to)
        return f"cast `{var}` to {to}{at}" + (f" (e.g. `{how}`)" if how else "")
    if kind == "input":
        return (f"pass input `{name}` as {to}: cast it where it is made"
                f"{' (example_inputs() at line ' + str(line) + ')' if line else ''}")
    return f"make this {op} produce {to} instead of {dtype}{at}"


def _np(dtype: str) -> str:
    return {"f32": "float32", "i32": "int32", "u32": "uint32", "c64": "complex64"}.get(dtype, dtype)


# struct format characters of the dtypes a memoryview / array.array can hold
_FORMAT = {"f16": "e", "f32": "f", "f64": "d", "i8": "b", "i16": "h", "i32": "i", "i64": "q",
           "u8": "B", "u16": "H", "u32": "I", "u64": "Q"}


def cast_code(var: str, host: str, dtype: str, to: str) -> str:
    """One line that casts weight ``var`` from ``dtype`` to ``to``, spelled for its kind of
    host array (numpy's ``.astype`` means nothing to a memoryview in Pyodide); "" if none."""
    src, dst = _FORMAT.get(dtype), _FORMAT.get(to)
    if host == "memoryview" and src and dst:
        return (f"{var} = memoryview(array('{dst}', {var}.cast('B').cast('{src}')))"
                f".cast('B').cast('{dst}', {var}.shape)")
    if host == "array" and dst:
        return f"{var} = array('{dst}', {var})"
    if host == "host":
        return f"{var} = HostArray('{to}', {var}.shape, {var}.values)"
    if host in ("numpy", ""):
        return f"{var} = {var}.astype(np.{_np(to)})"
    return ""  # nested lists: rebuilt from values of the new dtype, no one-line cast


def group_by_root(items: list[dict[str, Any]], hir: dict[str, Any] | None,
                  sources: SourceIndex) -> list[dict[str, Any]]:
    """Groups of ``items`` (failure_view's per-node records) under the value that causes them,
    most-poisoning cause first. A node poisoned by two causes is listed under both."""
    graph = _Graph(hir or {})
    files = [i["file"] for i in items if i.get("file")]
    groups: dict[tuple[str, str], dict[str, Any]] = {}
    for item in items:
        bad = bad_dtypes(item) if item["code"] in DTYPE_CODES else set()
        roots = graph.roots(item["origin"], bad, set()) if bad else []
        if not roots:  # the node itself: an op the target lacks, or it makes the dtype itself
            key = ("node", item["node"])
            groups.setdefault(key, _own_group(item))["nodes"].append(item["node"])
            continue
        for root in roots:
            src = graph.nodes[root]
            dtype = _dtype(src["type"])
            key = ("value", root)
            if key not in groups:
                groups[key] = _value_group(src, dtype, item, files, sources)
            groups[key]["nodes"].append(item["node"])
            groups[key]["hir_ids"].append(item["hir_id"])
    out = sorted(groups.values(), key=lambda g: -len(g["nodes"]))
    for g in out:
        g["count"] = len(g["nodes"])
        g["fix_line"] = f"{g['fix']}: fixes {g['count']} node{'s' * (g['count'] != 1)}"
    return out


_KIND = {"param": "the closed-over weight", "input": "the input", "node": "the op"}


def _value_group(src: dict[str, Any], dtype: str, item: dict[str, Any], files: list[str],
                 sources: SourceIndex) -> dict[str, Any]:
    kind, name = src["kind"], src["name"]
    file, line = "", 0
    if kind == "param":  # where the weight is assigned in the user's file
        var = re.escape(name.rsplit(".", 1)[-1])
        for f in dict.fromkeys(files):
            line = sources.find(f, rf"^\s*{var}\s*(:[^=]*)?=(?!=)")
            if line:
                file = f
                break
    elif kind == "input":
        for f in dict.fromkeys(files):
            line = sources.find(f, r"^\s*def\s+example_inputs\b")
            if line:
                file = f
                break
    else:
        file, line = src["loc"]["file"], src["loc"]["line"]
    return {"cause": name, "kind": kind, "dtype": dtype, "code": code_for(item, dtype),
            "title": f"{dtype} comes from {_KIND.get(kind, 'the op')} `{name}`",
            "fix": _fix(kind, name, dtype, line, src.get("op", ""), src.get("host", "")),
            "file": file, "file_label": sources.label(file), "line": line,
            "source_line": sources.line(file, line),
            "hir_id": src["id"], "nodes": [], "hir_ids": []}


def _own_group(item: dict[str, Any]) -> dict[str, Any]:
    return {"cause": item["node"], "kind": "node", "dtype": "", "code": item["code"],
            "title": f"{item['op']} itself: {item['message'] or item['code']}",
            "fix": item["hint"] or "see docs/errors.md", "file": item["file"],
            "file_label": item.get("file_label", item["file"]),
            "line": item["line"], "source_line": item["source_line"],
            "hir_id": item["hir_id"], "nodes": [], "hir_ids": [item["hir_id"]]}
