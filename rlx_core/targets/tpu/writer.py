"""The SSA line writer the StableHLO lowering rules emit into: fresh names, typed results."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rlx_core.ir import dtypes as dt
from rlx_core.ir.dtypes import DType
from rlx_core.ir.graph import TensorType
from rlx_core.targets.tpu.hlo_types import compare_type, splat, tensor


@dataclass(frozen=True)
class V:
    """A StableHLO SSA value: its ``%name`` and its rlx type."""

    name: str
    type: TensorType

    @property
    def ty(self) -> str:
        return tensor(self.type)


@dataclass
class Writer:
    """Lines of one function body; every helper returns the value it defined."""

    lines: list[str] = field(default_factory=list)
    indent: str = "    "
    _n: int = 0

    def fresh(self) -> str:
        self._n += 1
        return f"%t{self._n}"

    def line(self, text: str) -> None:
        self.lines.append(self.indent + text)

    def op(self, expr: str, t: TensorType, name: str | None = None) -> V:
        """``%r = expr`` (``expr`` already carries its type signature)."""
        v = V(name or self.fresh(), t)
        self.line(f"{v.name} = {expr}")
        return v

    # ---- the shapes of op syntax used everywhere --------------------------------------------
    def unary(self, op: str, x: V, t: TensorType | None = None) -> V:
        return self.op(f"{op} {x.name} : {x.ty}", t or x.type)

    def binary(self, op: str, a: V, b: V) -> V:
        return self.op(f"stablehlo.{op} {a.name}, {b.name} : {a.ty}", a.type)

    def convert(self, x: V, d: DType) -> V:
        if x.type.dtype == d:
            return x
        t = TensorType(d, x.type.shape)
        return self.op(f"stablehlo.convert {x.name} : ({x.ty}) -> {tensor(t)}", t)

    def compare(self, direction: str, a: V, b: V) -> V:
        t = TensorType(dt.bool_, a.type.shape)
        return self.op(f"stablehlo.compare {direction}, {a.name}, {b.name}, "
                       f"{compare_type(a.type.dtype)} : ({a.ty}, {b.ty}) -> {tensor(t)}", t)

    def select(self, p: V, a: V, b: V) -> V:
        return self.op(f"stablehlo.select {p.name}, {a.name}, {b.name} : {p.ty}, {a.ty}",
                       a.type)

    def const(self, value: Any, t: TensorType) -> V:
        return self.op(f"stablehlo.constant {splat(value, t)}", t)

    def like(self, value: Any, x: V) -> V:
        """A splat of ``value`` with ``x``'s type."""
        return self.const(value, x.type)

    def reshape(self, x: V, shape: tuple[int, ...]) -> V:
        t = TensorType(x.type.dtype, tuple(shape))
        if t == x.type:
            return x
        return self.op(f"stablehlo.reshape {x.name} : ({x.ty}) -> {tensor(t)}", t)
