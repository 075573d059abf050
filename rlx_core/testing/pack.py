"""Pack many independent cases into one graph with many outputs: one compile (one C build on the
cpu target) checks them all. Values are renamed ``c<i>_<name>`` so the cases cannot collide;
parameters keep their data under the new name."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from rlx_core.ir.graph import Graph, Level, Node, Value
from rlx_core.testing.generator import Case


def _renamed(v: Value, prefix: str) -> Value:
    return replace(v, name=prefix + v.name)


def pack(cases: list[Case]) -> tuple[Graph, list[np.ndarray], list[slice]]:
    """(graph, inputs, where) - ``where[i]`` is the slice of outputs that belongs to case i."""
    inputs: list[Value] = []
    params: list[Value] = []
    data: dict[str, np.ndarray] = {}
    nodes: list[Node] = []
    outputs: list[str] = []
    arrays: list[np.ndarray] = []
    where: list[slice] = []
    for i, c in enumerate(cases):
        p = f"c{i}_"
        inputs += [_renamed(v, p) for v in c.graph.inputs]
        arrays += c.inputs
        params += [_renamed(v, p) for v in c.graph.params]
        data.update({p + k: a for k, a in c.graph.param_data.items()})
        nodes += [replace(n, out=_renamed(n.out, p), inputs=tuple(p + x for x in n.inputs))
                  for n in c.graph.nodes]
        where.append(slice(len(outputs), len(outputs) + len(c.graph.outputs)))
        outputs += [p + o for o in c.graph.outputs]
    return Graph("fuzz_pack", Level.HIR, tuple(inputs), tuple(params), tuple(nodes),
                 tuple(outputs), param_data=data), arrays, where
