"""Builder: the one way new nodes are made; runs each op's shape/dtype rule as the node is added."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from rlx_core.errors import RlxError
from rlx_core.ir.graph import UNKNOWN_LOC, Loc, Node, TensorType, Value, freeze_attrs
from rlx_core.ir.ops import opdef

_NAME_OK = re.compile(r"[^A-Za-z0-9_.]")


def clean_name(name: str) -> str:
    """A value/graph name safe for the text form and for generated source (no markup, no quotes)."""
    out = _NAME_OK.sub("_", name) or "_"
    return out


class NameGen:
    """Fresh numeric value names that never collide with names already in a graph."""

    def __init__(self, taken: Iterable[str] = ()):
        self._taken = set(taken)
        self._next = 0
        for name in self._taken:
            if name.isdigit():
                self._next = max(self._next, int(name) + 1)

    def fresh(self) -> str:
        while str(self._next) in self._taken:
            self._next += 1
        name = str(self._next)
        self._taken.add(name)
        self._next += 1
        return name

    def claim(self, name: str) -> str:
        """Reserve ``name`` (made unique with a suffix if needed)."""
        base, k = clean_name(name), 1
        name = base
        while name in self._taken:
            name = f"{base}_{k}"
            k += 1
        self._taken.add(name)
        return name


def infer_type(op: str, in_types: list[TensorType], attrs: dict[str, Any]) -> tuple[dict[str, Any], TensorType]:
    """Complete ``attrs`` with defaults and compute the result type, checking arity."""
    d = opdef(op)
    lo, hi = d.arity
    if not lo <= len(in_types) <= hi:
        from rlx_core.errors import ShapeError

        want = str(lo) if lo == hi else f"{lo} to {hi}"
        raise ShapeError(f"{op}: takes {want} operand(s), got {len(in_types)}")
    full = d.complete_attrs(attrs)
    return full, d.infer(in_types, full)


class Builder:
    """Accumulates nodes. ``loc`` is stamped on every node made while it is current."""

    def __init__(self, names: NameGen | None = None, loc: Loc = UNKNOWN_LOC):
        self.names = names or NameGen()
        self.nodes: list[Node] = []
        self.loc = loc

    def emit(self, op: str, inputs: list[Value], attrs: dict[str, Any] | None = None,
             loc: Loc | None = None, name: str | None = None) -> Value:
        """Add ``op(inputs) {attrs}`` and return its result value."""
        try:
            full, out_type = infer_type(op, [v.type for v in inputs], attrs or {})
        except RlxError as err:
            where = (loc or self.loc)
            if where.file and "(at " not in err.message:
                err.message += f" (at {where.where})"
                err.args = (err._render(),)
            raise
        out = Value(self.names.claim(name) if name else self.names.fresh(), out_type)
        where = loc or self.loc
        if not where.origin:  # a node made from scratch is its own origin
            where = where.with_origin(out.name, op)
        self.nodes.append(Node(out, op, tuple(v.name for v in inputs), freeze_attrs(full), where))
        return out

    def add_node(self, node: Node) -> None:
        self.nodes.append(node)
