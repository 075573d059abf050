"""Small HIR graphs for the dispatch tests, built with the Builder (one op each, or a few)."""

from __future__ import annotations

from typing import Any

import numpy as np

from rlx_core.ir import dtypes as dt
from rlx_core.ir.builder import Builder, NameGen
from rlx_core.ir.graph import Graph, Level, Loc, TensorType, Value, ValueKind


class GraphMaker:
    """Declare inputs, emit nodes with a user source line, then ``graph(outputs)``."""

    def __init__(self, file: str = "model.py"):
        self.names = NameGen()
        self.b = Builder(self.names)
        self.inputs: list[Value] = []
        self.file = file

    def input(self, name: str, dtype: Any, shape: tuple[int, ...]) -> Value:
        v = Value(self.names.claim(name), TensorType(dt.get(dtype), tuple(shape)),
                  ValueKind.INPUT)
        self.inputs.append(v)
        return v

    def op(self, op: str, ins: list[Value], line: int = 1, **attrs: Any) -> Value:
        return self.b.emit(op, ins, attrs, loc=Loc(self.file, line))

    def graph(self, *outs: Value, name: str = "g") -> Graph:
        return Graph(name, Level.HIR, tuple(self.inputs), (), tuple(self.b.nodes),
                     tuple(o.name for o in outs))


def random_inputs(g: Graph, rng: np.random.Generator) -> list[np.ndarray]:
    arrays = []
    for v in g.inputs:
        d = v.type.dtype
        if d.is_float:
            arrays.append(rng.standard_normal(v.type.shape).astype(dt.to_numpy_name(d)))
        elif d == dt.bool_:
            arrays.append(rng.random(v.type.shape) > 0.3)
        else:
            arrays.append(rng.integers(0, 4, v.type.shape).astype(dt.to_numpy_name(d)))
    return arrays


def single(op: str, specs: list[tuple[str, tuple[int, ...]]], **attrs: Any) -> Graph:
    """A graph of one HIR op over fresh inputs with (dtype, shape) ``specs``."""
    m = GraphMaker()
    ins = [m.input(f"a{i}", d, s) for i, (d, s) in enumerate(specs)]
    return m.graph(m.op(op, ins, line=7, **attrs))


def make_caps(target: str = "testdev", *, composites: tuple[str, ...] = (),
              mir: tuple[str, ...] | None = None, dtypes: tuple[str, ...] = ("f32", "i32", "bool"),
              extra: tuple = (), constraints: tuple = ()):
    """A capability table for tests: chosen MIR primitives and composites in ``dtypes``."""
    from rlx_core.dispatch.capabilities import Capabilities, OpClaim, native_dtypes
    from rlx_core.ir.ops import MIR_OPS

    claims = []
    if composites:
        claims.append(OpClaim(composites, dtypes, constraints))
    claims.extend(extra)
    claims.append(OpClaim(tuple(MIR_OPS) if mir is None else mir, dtypes))
    names = tuple(dict.fromkeys(dtypes + tuple(d for c in extra for d in c.dtypes)))
    return Capabilities(target, "executes", tuple(claims), native_dtypes(names))
