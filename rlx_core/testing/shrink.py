"""Delta debugging of a failing case down to a minimal graph, keeping only changes after which it
still fails the same way:

1. keep one failing output, drop what it does not depend on;
2. *cut* nodes: a node becomes a graph input holding its reference value (the data flow below
   it is unchanged, so the failure usually survives); or *bypass* a node whose operand has its
   type;
3. simplify input values (halves of the elements set to 0, then 1; ddmin-style);
4. for a graph of elementwise ops only, keep the one element that differs (rank-0 shapes).

A case's parameters (bound weights, ``Graph.param_data``) go along with every step; each one
is also tried as a graph input holding the same data, after the cuts: a failure that survives
that does not need the target's constant-weight path (the cpu's prepacked kernels).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace

import numpy as np

from rlx_core.ir.graph import Graph, TensorType, Value, ValueKind
from rlx_core.ir.ops import opdef
from rlx_core.ir.ops.mir import ELEMENTWISE_CATEGORIES
from rlx_core.testing.generator import Case
from rlx_core.testing.reference import evaluate

Predicate = Callable[[Case], bool]


def _graph(g: Graph, inputs: tuple[Value, ...], nodes: tuple, outputs: tuple[str, ...],
           params: tuple[Value, ...] | None = None) -> Graph:
    """``g`` with other inputs, nodes and outputs; its parameters (or ``params``) keep their
    data."""
    params = g.params if params is None else params
    return Graph(g.name, g.level, inputs, params, nodes, outputs,
                 param_data={v.name: g.param_data[v.name] for v in params})


def prune(g: Graph, arrays: list[np.ndarray], outputs: tuple[str, ...] | None = None) -> Case:
    """Drop nodes the outputs do not need, and inputs and parameters nothing reads."""
    outs = g.outputs if outputs is None else outputs
    need = set(outs)
    nodes = []
    for n in reversed(g.nodes):
        if n.name in need:
            nodes.append(n)
            need.update(n.inputs)
    keep = [(v, a) for v, a in zip(g.inputs, arrays, strict=True) if v.name in need]
    graph = _graph(g, tuple(v for v, _ in keep), tuple(reversed(nodes)), tuple(outs),
                   tuple(v for v in g.params if v.name in need))
    return Case(graph, [a for _, a in keep])


def _cut(case: Case, name: str, value: np.ndarray) -> Case:
    g = case.graph
    node = g.producers()[name]
    v = Value(name, node.type, ValueKind.INPUT)
    graph = _graph(g, g.inputs + (v,), tuple(n for n in g.nodes if n.name != name), g.outputs)
    return prune(graph, case.inputs + [np.array(value, copy=True)])


def _unbind(case: Case, name: str) -> Case:
    """Parameter ``name`` as a graph input holding its data."""
    g = case.graph
    p = next(v for v in g.params if v.name == name)
    graph = _graph(g, g.inputs + (replace(p, kind=ValueKind.INPUT),), g.nodes, g.outputs,
                   tuple(v for v in g.params if v.name != name))
    return Case(graph, case.inputs + [np.array(g.param_data[name], copy=True)])


def _bypass(case: Case, name: str, operand: str) -> Case:
    g = case.graph
    ren = (lambda x: operand if x == name else x)
    nodes = tuple(replace(n, inputs=tuple(ren(i) for i in n.inputs))
                  for n in g.nodes if n.name != name)
    outputs = tuple(dict.fromkeys(ren(o) for o in g.outputs))
    if any(o in {v.name for v in g.inputs} for o in outputs):
        return case  # a graph output may not be a bare input
    return prune(_graph(g, g.inputs, nodes, outputs), case.inputs)


def _scalarise(case: Case, index: tuple[int, ...]) -> Case | None:
    """The same elementwise graph on the single element ``index`` (rank-0 everywhere)."""
    g = case.graph
    shape = g.inputs[0].type.shape if g.inputs else None
    if shape is None or shape == () or g.params or any(v.type.shape != shape for v in g.inputs):
        return None
    if any(opdef(n.op).category not in ELEMENTWISE_CATEGORIES or n.type.shape != shape
           for n in g.nodes) or len(index) != len(shape):
        return None
    scal = (lambda v: replace(v, type=TensorType(v.type.dtype, ())))
    nodes = tuple(replace(n, out=scal(n.out)) for n in g.nodes)
    graph = Graph(g.name, g.level, tuple(scal(v) for v in g.inputs), g.params, nodes, g.outputs)
    return Case(graph, [np.array(a[index]) for a in case.inputs])


def shrink(case: Case, fails: Predicate, *, output: int = 0, index: tuple[int, ...] = (),
           budget_s: float = 120.0) -> tuple[Case, int]:
    """A smaller case on which ``fails`` still holds, and the number of checks it took."""
    deadline = time.monotonic() + budget_s
    checks = 0

    def attempt(c: Case | None) -> bool:
        nonlocal checks
        if c is None or time.monotonic() > deadline or not c.graph.nodes:
            return False
        checks += 1
        try:
            return fails(c)
        except Exception:  # noqa: BLE001 - a candidate that breaks differently is not kept
            return False

    best = case
    outs = best.graph.outputs
    for k in dict.fromkeys([output, *range(len(outs))]):  # the failing output first
        one = prune(best.graph, best.inputs, (outs[k],))
        if len(outs) > 1 and attempt(one):
            best = one
            break
    changed = True
    while changed and time.monotonic() < deadline:
        changed = False
        try:
            env = evaluate(best.graph, best.inputs).values
        except Exception:  # noqa: BLE001 - the reference refuses: stop cutting here
            break
        for n in reversed(best.graph.nodes):
            if n.name in best.graph.outputs:
                continue
            cand = _cut(best, n.name, env[n.name])
            if attempt(cand):
                best, changed = cand, True
                break
        if changed:
            continue
        types = best.graph.values()
        for n in reversed(best.graph.nodes):
            for i in n.inputs:
                if types[i].type == n.type:
                    cand = _bypass(best, n.name, i)
                    if cand is not best and attempt(cand):
                        best, changed = cand, True
                        break
            if changed:
                break
    for p in [v.name for v in best.graph.params]:
        cand = _unbind(best, p)
        if attempt(cand):
            best = cand
    if index:
        small = _scalarise(best, index)
        if attempt(small):
            best = small
    for k, a in enumerate(best.inputs):  # simpler input values
        if a.size < 2:
            continue
        for fill in (0, 1):
            chunk = a.size // 2
            while chunk >= 1 and time.monotonic() < deadline:
                cur = best.inputs[k]
                flat = cur.reshape(-1)
                for start in range(0, flat.size, chunk):
                    trial = flat.copy()
                    trial[start:start + chunk] = fill
                    if np.array_equal(trial, flat, equal_nan=flat.dtype.kind == "f"):
                        continue
                    cand = Case(best.graph, best.inputs[:k] + [trial.reshape(cur.shape)]
                                + best.inputs[k + 1:])
                    if attempt(cand):
                        best = cand
                        flat = trial
                chunk //= 2
    return Case(best.graph, best.inputs, case.seed), checks
