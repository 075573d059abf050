"""Shared helpers for pass tests: build graphs with the Builder, evaluate them with numpy."""

from __future__ import annotations

from typing import Any

import numpy as np

from rlx_core.ir import dtypes as dt
from rlx_core.ir.builder import Builder, NameGen
from rlx_core.ir.graph import Graph, Level, Loc, TensorType, Value, ValueKind


class G:
    """A tiny graph-building kit: ``g = G(); x = g.input('x', 'f32', (2, 3)); g.op(...)``."""

    def __init__(self, loc: Loc | None = None) -> None:
        self.names = NameGen()
        self.b = Builder(self.names, loc or Loc("model.py", 1))
        self.inputs: list[Value] = []

    def input(self, name: str, dtype: str, shape: tuple[int, ...]) -> Value:
        v = Value(self.names.claim(name), TensorType(dt.get(dtype), shape), ValueKind.INPUT)
        self.inputs.append(v)
        return v

    def op(self, op: str, *inputs: Value, loc: Loc | None = None, **attrs: Any) -> Value:
        return self.b.emit(op, list(inputs), attrs, loc=loc)

    def const(self, value: Any, dtype: str, shape: tuple[int, ...] = ()) -> Value:
        return self.op("constant", value=value, dtype=dt.get(dtype), shape=shape)

    def graph(self, *outputs: Value, level: Level = Level.MIR, name: str = "f") -> Graph:
        return Graph(
            name, level, tuple(self.inputs), (), tuple(self.b.nodes), tuple(o.name for o in outputs)
        )


def run_numpy(g: Graph, args: dict[str, np.ndarray]) -> list[np.ndarray]:
    """Evaluate ``g`` with the numpy reference target's op semantics."""
    import pytest

    ref = pytest.importorskip("rlx_core.targets.numpy_ref.semantics")
    env: dict[str, np.ndarray] = dict(args)
    for n in g.nodes:
        env[n.out.name] = ref.eval_op(n.op, n.a, [env[i] for i in n.inputs], n.out.type)
    return [env[o] for o in g.outputs]


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    """Equal including NaN == NaN and the sign of zero."""
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.dtype.kind != "f":
        return bool(np.array_equal(a, b))
    real = ~np.isnan(b)
    return bool(
        np.array_equal(a, b, equal_nan=True)
        and np.array_equal(np.signbit(a[real]), np.signbit(b[real]))
    )
