"""The one IR data structure for HIR, MIR and LIR: typed values, SSA nodes, kernels, arena plan.

A graph is a flat list of SSA equations (``%y : f32[2,3] = add(%a, %b)``) over named values.
The level says which ops are allowed (see ``rlx_core.ir.ops``); LIR additionally groups the
nodes into kernels and carries the arena plan the runtime executes.
"""

from __future__ import annotations

import enum
import math
import operator
import re
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from rlx_core.ir.dtypes import DType

Shape = tuple[int, ...]
# C0 controls, DEL and lone surrogates: never kept in a Loc (see Loc.__post_init__)
_UNSAFE_TEXT = re.compile("[\x00-\x1f\x7f\ud800-\udfff]")
AttrValue = Any  # int | float | bool | str | None | DType | tuple[AttrValue, ...]


class Level(enum.Enum):
    """The stage a graph is at: HIR (traced ops), MIR (jax.lax-shaped primitives after
    legalize) or LIR (MIR nodes grouped into kernels, with an arena plan)."""

    HIR = "hir"
    MIR = "mir"
    LIR = "lir"


def checked_shape(shape: Any, what: str = "shape") -> Shape:
    """``shape`` as a tuple of non-negative Python ints; InvalidShapeError (RLX-T004) for a
    negative, fractional or non-numeric dimension (numpy integers are accepted)."""
    from rlx_core.errors import InvalidShapeError

    try:
        dims = tuple(shape)
    except TypeError:
        raise InvalidShapeError(f"{what} {shape!r} is not a sequence of dimensions",
                                hint="give the shape as a tuple of integers, e.g. (2, 3)") from None
    out = []
    for i, d in enumerate(dims):
        try:
            n = operator.index(d)  # accepts int and numpy integers, refuses 2.5 and "3"
        except TypeError:
            n = None
        if n is None or isinstance(d, bool):
            raise InvalidShapeError(
                f"{what} {_show(dims)}: dimension {i} is {d!r} ({type(d).__name__}), not an "
                "integer", hint="dimensions are whole numbers: write int(d) explicitly if a "
                                "float is really meant as a size")
        if n < 0:
            raise InvalidShapeError(
                f"{what} {_show(dims)}: dimension {i} is negative ({n})",
                hint="dimensions are sizes >= 0; a symbolic/unknown size (-1) must be given "
                     "concretely (rlx compiles for static shapes)")
        out.append(int(n))
    return tuple(out)


def row_strides(shape: Shape) -> Shape:
    """Row-major element strides of ``shape``: the last axis steps by 1, each axis before it
    by the product of the sizes after it."""
    out, acc = [], 1
    for d in reversed(shape):
        out.append(acc)
        acc *= d
    return tuple(reversed(out))


def _show(dims: tuple[Any, ...]) -> str:
    return "(" + ", ".join(repr(d) for d in dims[:8]) + (", ..." if len(dims) > 8 else "") + ")"


@dataclass(frozen=True)
class TensorType:
    """Static shape and element type of a value."""

    dtype: DType
    shape: Shape

    def __post_init__(self) -> None:
        # the common case costs one pass over the dims; anything else is normalised or rejected
        if type(self.shape) is not tuple or any(type(d) is not int or d < 0 for d in self.shape):
            object.__setattr__(self, "shape", checked_shape(self.shape))

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return math.ceil(self.size * self.dtype.bits / 8)

    def __str__(self) -> str:
        return f"{self.dtype.name}[{','.join(str(d) for d in self.shape)}]"


@dataclass(frozen=True)
class Loc:
    """Provenance: the user source line, the model-block scope, and the HIR node it came from.

    ``origin`` is the name of the HIR node's result and ``origin_op`` its op; both survive every
    lowering so that a LIR kernel line can be traced back to the line of user code.
    """

    file: str = ""
    line: int = 0
    scope: str = ""
    origin: str = ""
    origin_op: str = ""

    def __post_init__(self) -> None:
        # provenance is display text: a NUL or a lone surrogate (an undecodable file name
        # arrives as one through os.fsdecode, a "\\ud800" escape parses to one) would break
        # UTF-8 encoding, Graphviz and the explorer's layout, so it is replaced here, once
        for key in ("file", "scope", "origin", "origin_op"):
            text = getattr(self, key)
            if _UNSAFE_TEXT.search(text):
                object.__setattr__(self, key, _UNSAFE_TEXT.sub("\ufffd", text))

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}" if self.file else "<unknown>"

    def with_origin(self, origin: str, origin_op: str) -> Loc:
        return replace(self, origin=origin, origin_op=origin_op)


UNKNOWN_LOC = Loc()


class ValueKind(enum.Enum):
    """What a named value is: a graph input, a parameter or a node's result."""

    INPUT = "input"  # an argument of the compiled function
    PARAM = "param"  # a weight: bound once to the executable, not passed per call
    NODE = "node"  # the result of a node


@dataclass(frozen=True)
class Value:
    """A named SSA value (graph input, parameter, or node result)."""

    name: str
    type: TensorType
    kind: ValueKind = ValueKind.NODE


def freeze_attrs(attrs: dict[str, AttrValue] | None) -> tuple[tuple[str, AttrValue], ...]:
    """Attributes are stored sorted by key so that printing, hashing and CSE are deterministic."""
    if not attrs:
        return ()
    return tuple(sorted((k, _freeze(v)) for k, v in attrs.items()))


def _freeze(v: AttrValue) -> AttrValue:
    if isinstance(v, list | tuple):
        return tuple(_freeze(x) for x in v)
    return v


@dataclass(frozen=True)
class Node:
    """One SSA equation: ``out = op(inputs...) {attrs}`` with its provenance."""

    out: Value
    op: str
    inputs: tuple[str, ...]
    attrs: tuple[tuple[str, AttrValue], ...] = ()
    loc: Loc = UNKNOWN_LOC

    @property
    def a(self) -> dict[str, AttrValue]:
        """Attributes as a dict (read-only use)."""
        return dict(self.attrs)

    def attr(self, key: str, default: AttrValue = None) -> AttrValue:
        for k, v in self.attrs:
            if k == key:
                return v
        return default

    @property
    def name(self) -> str:
        return self.out.name

    @property
    def type(self) -> TensorType:
        return self.out.type


@dataclass(frozen=True)
class Kernel:
    """A LIR kernel: MIR nodes fused into one loop nest, reading and writing arena buffers.

    ``kind`` names the loop-nest shape renderers specialise on: ``elementwise`` (one loop over
    the output), ``reduce`` (elementwise producers feeding one reduction, plus elementwise
    consumers of its result), ``matmul`` (a dot_general with an optional elementwise epilogue),
    or ``opaque`` (one data-movement / indexing op).
    """

    name: str
    kind: str
    nodes: tuple[Node, ...]
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]


@dataclass(frozen=True)
class BufferSlot:
    """Where an intermediate lives in the arena, and between which kernels it is alive.

    ``alias`` names the slot whose bytes this value shares (a reshape of it: the same bytes
    in the same order, so the reshape kernel has nothing to copy); that root's span covers
    every alias's. "" for a value with bytes of its own.

    ``over`` names the input its kernel writes it over in place (passes/plan_arena.py's
    in_place_shares: that input dies there, read only at the index being written); the two
    share an offset and their spans meet at that kernel. "" when it is not.
    """

    value: str
    offset: int
    size: int
    first: int  # index of the kernel that writes it
    last: int  # index of the last kernel that reads it
    alias: str = ""
    over: str = ""


@dataclass(frozen=True)
class ArenaPlan:
    """Liveness-based placement of every kernel-to-kernel buffer in one arena."""

    slots: tuple[BufferSlot, ...]
    peak_bytes: int
    naive_bytes: int  # what one buffer per value would cost (shows what reuse saved)
    alignment: int = 64

    def slot(self, value: str) -> BufferSlot | None:
        for s in self.slots:
            if s.value == value:
                return s
        return None

    def is_alias(self, value: str) -> bool:
        """Does ``value`` share another slot's bytes (so writing it copies nothing)?"""
        s = self.slot(value)
        return s is not None and bool(s.alias)

    def written_over(self) -> dict[str, str]:
        """value -> the input its kernel writes it over in place (``BufferSlot.over``)."""
        return {s.value: s.over for s in self.slots if s.over}


@dataclass
class Graph:
    """A function in the IR: inputs, parameters, nodes in topological order, outputs.

    Passes treat graphs as values: they build new ones rather than mutate (see ``with_nodes``).
    ``param_data`` holds weights by name (flat tuples or host arrays); it is not part of the
    text form, which shows parameters by name and type only.
    """

    name: str
    level: Level
    inputs: tuple[Value, ...]
    params: tuple[Value, ...]
    nodes: tuple[Node, ...]
    outputs: tuple[str, ...]
    kernels: tuple[Kernel, ...] = ()
    plan: ArenaPlan | None = None
    param_data: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)
    # where an imported graph came from (format, opset, import path); the compile trace's source
    origin: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    # -- lookup --------------------------------------------------------------------------------
    def values(self) -> dict[str, Value]:
        """Every value by name: inputs, params and node results."""
        table = {v.name: v for v in self.inputs}
        table.update({v.name: v for v in self.params})
        table.update({n.out.name: n.out for n in self.nodes})
        return table

    def producers(self) -> dict[str, Node]:
        return {n.out.name: n for n in self.nodes}

    def users(self) -> dict[str, list[Node]]:
        table: dict[str, list[Node]] = {}
        for n in self.nodes:
            for i in n.inputs:
                table.setdefault(i, []).append(n)
        return table

    def type_of(self, name: str) -> TensorType:
        return self.values()[name].type

    def output_types(self) -> tuple[TensorType, ...]:
        vals = self.values()
        return tuple(vals[o].type for o in self.outputs)

    def __iter__(self) -> Iterator[Node]:
        return iter(self.nodes)

    def __str__(self) -> str:
        """The text form (``print(graph)`` shows the IR, not the dataclass)."""
        from rlx_core.ir.printer import print_graph  # the printer imports this module

        return print_graph(self)

    # -- building new graphs -------------------------------------------------------------------
    def with_nodes(self, nodes: tuple[Node, ...] | list[Node], outputs: tuple[str, ...] | None = None,
                   level: Level | None = None) -> Graph:
        """A copy with other nodes (and optionally outputs / level); LIR structure is dropped."""
        return Graph(
            name=self.name,
            level=level or self.level,
            inputs=self.inputs,
            params=self.params,
            nodes=tuple(nodes),
            outputs=self.outputs if outputs is None else tuple(outputs),
            param_data=self.param_data,
        )

    def op_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for n in self.nodes:
            counts[n.op] = counts.get(n.op, 0) + 1
        return counts
