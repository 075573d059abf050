"""The textual form of all three levels. ``parse(print_graph(g))`` rebuilds ``g`` exactly.

Grammar (one construct per line, two-space indents)::

    hir @mlp {
      input %x : f32[2,784]
      param %fc1.weight : f32[512,784]
      %0 : f32[2,512] = linear(%x, %fc1.weight) {} loc("mlp.py":8 scope="fc1")
      return %0
    }

LIR adds kernels around the nodes and the arena plan::

      kernel @k0 matmul (%x, %w) -> (%0) {
        %0 : f32[2,512] = dot_general(%x, %w) {batch=((), ()), contract=((1,), (1,))}
      }
      arena peak=4096 naive=4096 align=64 {
        %0 @0 +4096 live 0..1
      }

Attribute values: ints, floats (``repr``; ``inf``/``nan``), ``true``/``false``/``none``,
JSON-quoted strings, bare dtype names, and parenthesised tuples (``(1,)`` for one element).
"""

from __future__ import annotations

import json
import math
from dataclasses import replace

from rlx_core.ir.dtypes import DType
from rlx_core.ir.graph import Graph, Kernel, Level, Loc, Node, Value

INDENT = "  "


def fmt_attr(v: object) -> str:
    """One attribute value in the text form."""
    if type(v) is tuple:
        return _fmt_tuple(v)
    if isinstance(v, bool):
        return "true" if v else "false"
    if v is None:
        return "none"
    if isinstance(v, DType):
        return v.name
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(v, complex):
        return f"complex({fmt_attr(v.real)}, {fmt_attr(v.imag)})"
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, tuple):
        return _fmt_tuple(v)
    raise TypeError(f"attribute value {v!r} of type {type(v).__name__} has no text form")


def _fmt_tuple(v: tuple) -> str:
    if len(v) == 1:
        return f"({fmt_attr(v[0])},)"
    # a constant's value is a tuple of thousands of ints or floats: formatted in one pass when
    # all elements are exactly int (not bool) or exactly float, whose repr is fmt_attr's text
    # (nan, inf and -inf included)
    kinds = set(map(type, v))
    if kinds == {int}:
        return "(" + ", ".join(map(int.__repr__, v)) + ")"
    if kinds == {float}:
        return "(" + ", ".join(map(float.__repr__, v)) + ")"
    return "(" + ", ".join(map(fmt_attr, v)) + ")"


def fmt_loc(loc: Loc, name: str = "", op: str = "") -> str:
    """``loc(...)``; ``from=`` is left out when the node is its own origin (the parser restores it)."""
    parts = []
    if loc.file or loc.line:
        parts.append(f"{json.dumps(loc.file)}:{loc.line}")
    if loc.scope:
        parts.append(f"scope={json.dumps(loc.scope)}")
    if loc.origin and (loc.origin, loc.origin_op) != (name, op):
        parts.append(f"from=%{loc.origin}:{loc.origin_op}")
    return f" loc({' '.join(parts)})" if parts else ""


def fmt_node(n: Node, locations: bool = True) -> str:
    """One node's line (``%3 : f32[4] = exp(%2) {} loc("cell.py":5)``); ``locations=False``
    leaves its source ``file:line`` out, keeping the scope and origin (print_graph)."""
    args = ", ".join(f"%{i}" for i in n.inputs)
    attrs = ", ".join(f"{k}={fmt_attr(v)}" for k, v in n.attrs)
    where = n.loc if locations else replace(n.loc, file="", line=0)
    loc = fmt_loc(where, n.out.name, n.op)
    return f"%{n.out.name} : {n.out.type} = {n.op}({args}) {{{attrs}}}{loc}"


def _fmt_value_decl(kind: str, v: Value) -> str:
    return f"{kind} %{v.name} : {v.type}"


def _fmt_kernel(k: Kernel, depth: int, locations: bool = True) -> list[str]:
    pad = INDENT * depth
    ins = ", ".join(f"%{i}" for i in k.inputs)
    outs = ", ".join(f"%{o}" for o in k.outputs)
    lines = [f"{pad}kernel @{k.name} {k.kind} ({ins}) -> ({outs}) {{"]
    lines += [f"{pad}{INDENT}{fmt_node(n, locations)}" for n in k.nodes]
    lines.append(f"{pad}}}")
    return lines


def print_graph(g: Graph, locations: bool = True) -> str:
    """The text form of ``g`` (any level), ending in a newline. ``locations=False`` leaves out
    every source ``file:line``: the text names what the graph computes, not the line it was
    traced at (a program's cache name, runtime/specialization_cache.program_prefix; the graph
    signature ranks compare, distributed/tensor_parallel.graph_signature). Scopes and origins
    stay: a tensor-parallel plan matches scopes, and neither moves when a line is added above."""
    lines = [f"{g.level.value} @{g.name} {{"]
    lines += [INDENT + _fmt_value_decl("input", v) for v in g.inputs]
    lines += [INDENT + _fmt_value_decl("param", v) for v in g.params]
    if g.level is Level.LIR and g.kernels:
        for k in g.kernels:
            lines += _fmt_kernel(k, 1, locations)
    else:
        lines += [INDENT + fmt_node(n, locations) for n in g.nodes]
    if g.plan is not None:
        p = g.plan
        lines.append(f"{INDENT}arena peak={p.peak_bytes} naive={p.naive_bytes} align={p.alignment} {{")
        for s in p.slots:
            alias = f" alias %{s.alias}" if s.alias else ""
            alias += f" over %{s.over}" if s.over else ""
            lines.append(f"{INDENT * 2}%{s.value} @{s.offset} +{s.size} live {s.first}..{s.last}"
                         f"{alias}")
        lines.append(f"{INDENT}}}")
    lines.append(f"{INDENT}return " + ", ".join(f"%{o}" for o in g.outputs))
    lines.append("}")
    return "\n".join(lines) + "\n"


def context(g: Graph, node_name: str, radius: int = 3) -> str:
    """The IR lines around the node producing ``node_name``, that line marked with ``>>``."""
    text = print_graph(g).splitlines()
    marker = f"%{node_name} :"
    for i, line in enumerate(text):
        if line.strip().startswith(marker):
            lo, hi = max(0, i - radius), min(len(text), i + radius + 1)
            return "\n".join((">> " if j == i else "   ") + text[j] for j in range(lo, hi))
    return "\n".join("   " + line for line in text[: 2 * radius + 1])
