"""OpDef: what an op is (arity, typed attributes, shape/dtype rule) and the helpers rules share."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rlx_core.errors import AxisError, DTypeError, ShapeError
from rlx_core.ir.dtypes import DType
from rlx_core.ir.graph import Level, TensorType

REQUIRED = object()  # sentinel: the attribute has no default

InferFn = Callable[[list[TensorType], dict[str, Any]], TensorType]


@dataclass(frozen=True)
class AttrSpec:
    """One attribute: its kind (``int``, ``float``, ``bool``, ``str``, ``dtype``, ``ints``,
    ``ints2`` (tuple of int tuples), ``floats``, ``any``) and its default."""

    kind: str
    default: Any = REQUIRED


@dataclass(frozen=True)
class OpDef:
    """An op's contract. ``category`` groups ops the way fusion and renderers see them:
    unary, binary, compare, select, cast, reduce, movement, index, contract, source, composite."""

    name: str
    level: Level
    category: str
    arity: tuple[int, int]  # (min, max) operand count
    attrs: dict[str, AttrSpec]
    infer: InferFn
    doc: str

    def complete_attrs(self, given: dict[str, Any]) -> dict[str, Any]:
        """Fill defaults and reject unknown or missing attributes."""
        unknown = sorted(set(given) - set(self.attrs))
        if unknown:
            raise ShapeError(
                f"{self.name}: unknown attribute(s) {', '.join(unknown)}",
                hint=f"{self.name} takes: {', '.join(self.attrs) or 'no attributes'}",
            )
        out: dict[str, Any] = {}
        for key, spec in self.attrs.items():
            if key in given:
                out[key] = given[key]
            elif spec.default is REQUIRED:
                raise ShapeError(f"{self.name}: missing required attribute {key!r}")
            else:
                out[key] = spec.default
        return out


# ---- helpers shared by the shape rules ------------------------------------------------------


def fmt_shapes(types: list[TensorType]) -> str:
    return ", ".join(str(t) for t in types)


def normalize_axis(op: str, axis: int, rank: int) -> int:
    """Map a possibly negative axis into [0, rank), or raise AxisError."""
    if not isinstance(axis, int) or isinstance(axis, bool) or not -rank <= axis < max(rank, 1):
        raise AxisError(
            f"{op}: axis {axis} is out of range for a rank-{rank} operand",
            hint=f"use an axis in [{-rank}, {rank - 1}]" if rank else "a scalar has no axes",
        )
    return axis % rank if rank else 0


def broadcast_shapes(op: str, *shapes: tuple[int, ...]) -> tuple[int, ...]:
    """numpy broadcasting of shapes, or ShapeError naming the op and the shapes."""
    rank = max((len(s) for s in shapes), default=0)
    out = []
    for i in range(rank):
        dims = {s[len(s) - rank + i] for s in shapes if len(s) - rank + i >= 0}
        dims.discard(1)
        if len(dims) > 1:
            raise ShapeError(
                f"{op}: shapes {' and '.join(str(list(s)) for s in shapes)} do not broadcast "
                f"(axis {i - rank}: {sorted(dims)})",
                hint="reshape or transpose one operand so the trailing dimensions agree",
            )
        out.append(dims.pop() if dims else 1)
    return tuple(out)


def require_same_dtype(op: str, types: list[TensorType]) -> DType:
    dts = {t.dtype for t in types}
    if len(dts) != 1:
        raise DTypeError(
            f"{op}: operand dtypes differ ({fmt_shapes(types)})",
            hint="insert a cast so both operands have one dtype",
        )
    return types[0].dtype


def require(cond: bool, op: str, message: str, hint: str | None = None, exc: type = ShapeError) -> None:
    if not cond:
        raise exc(f"{op}: {message}", hint=hint)
