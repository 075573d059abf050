"""A fast reader from IR text straight to a graph view, for the pass stepper.

The full parser (rlx_core.ir.parser) rebuilds and checks a Graph, which costs seconds on a
MiniLM-sized snapshot; the stepper only needs names, ops, types, edges, kernels and locations,
so it reads the lines of the text form (its grammar is in rlx_core/ir/printer.py) directly.
A test checks that both readers give the same view.
"""

from __future__ import annotations

import json
import re
from typing import Any

from rlx_explorer.views.graphs import assemble

_HEAD = re.compile(r"^(hir|mir|lir) @(\S+) \{$")
_DECL = re.compile(r"^\s*(input|param) %(\S+) : (\S+)$")
_NODE = re.compile(r"^\s*%(\S+) : (\S+) = ([A-Za-z0-9_]+)\(([^)]*)\) \{")
_KERNEL = re.compile(r"^\s*kernel @(\S+) (\S+) \(([^)]*)\) -> \(([^)]*)\) \{$")
_RETURN = re.compile(r"^\s*return(.*)$")
_STR = r'"(?:[^"\\]|\\.)*"'
_LOC = re.compile(rf"^(?:({_STR}):(\d+))?\s*(?:scope=({_STR}))?\s*(?:from=%(\S+):([A-Za-z0-9_]+))?$")


def _names(text: str) -> list[str]:
    return [a.strip()[1:] for a in text.split(",") if a.strip()]


def _attrs_end(line: str, start: int) -> int:
    """Index of the ``}`` closing the attribute block opened just before ``start``."""
    depth, i, in_str = 1, start, False
    while i < len(line):
        c = line[i]
        if in_str:
            if c == "\\":
                i += 1
            elif c == '"':
                in_str = False
        elif c == '"':
            in_str = True
        elif c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return len(line)


def _node(line: str, m: re.Match[str]) -> dict[str, Any] | None:
    name, typ, op, args = m.groups()
    close = _attrs_end(line, m.end())
    attrs = line[m.end():close]
    rest = line[close + 1:].strip()
    file, lineno, scope, origin, origin_op = "", 0, "", name, op
    if rest.startswith("loc(") and rest.endswith(")"):
        lm = _LOC.match(rest[4:-1].strip())
        if lm is None:
            return None
        if lm.group(1):
            file, lineno = json.loads(lm.group(1)), int(lm.group(2))
        if lm.group(3):
            scope = json.loads(lm.group(3))
        if lm.group(4):
            origin, origin_op = lm.group(4), lm.group(5)
    text = line.strip()
    return {"id": "", "name": name, "op": op, "type": typ, "kind": "node",
            "inputs": _names(args), "attrs": attrs,
            "loc": {"file": file, "line": lineno, "scope": scope, "origin": origin,
                    "origin_op": origin_op}, "text": text}


def text_graph_view(text: str) -> dict[str, Any] | None:
    """The graph view of IR text, or None when a line is not in the expected form."""
    lines = text.splitlines()
    head = _HEAD.match(lines[0]) if lines else None
    if head is None:
        return None
    level, name = head.groups()
    inputs: list[tuple[str, str]] = []
    params: list[tuple[str, str]] = []
    ops: list[dict[str, Any]] = []
    kernels: list[tuple[str, str, list[str], list[str], list[str]]] = []
    outputs: list[str] = []
    current: list[str] | None = None
    in_arena = False
    for line in lines[1:]:
        if in_arena:
            in_arena = line.strip() != "}"
            continue
        if line.strip().startswith("arena "):
            in_arena = True
            continue
        d = _DECL.match(line)
        if d:
            (inputs if d.group(1) == "input" else params).append((d.group(2), d.group(3)))
            continue
        k = _KERNEL.match(line)
        if k:
            current = []
            kernels.append((k.group(1), k.group(2), _names(k.group(3)), _names(k.group(4)),
                            current))
            continue
        m = _NODE.match(line)
        if m:
            node = _node(line, m)
            if node is None:
                return None
            ops.append(node)
            if current is not None:
                current.append(node["name"])
            continue
        r = _RETURN.match(line)
        if r:
            outputs = _names(r.group(1))
            continue
        if line.strip() == "}":
            current = None
            continue
        return None
    return assemble(level, name, inputs, params, ops, kernels, outputs)
