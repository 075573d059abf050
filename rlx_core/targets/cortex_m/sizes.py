"""Zero-size tensors on the int8 firmware: refused at compile time, node by node.

A firmware has static buffers and reads whole calls from a byte stream: a tensor with no
elements has nothing to compute, and a model whose inputs are all empty has calls of zero
bytes, so the firmware cannot tell how many calls its input file holds (it used to fail at
run time under QEMU, exit 1, found by the differential fuzzer). Each such value becomes a
``RLX-U014`` problem naming its node, raised with the other problems of the strict check.
"""

from __future__ import annotations

from collections.abc import Iterable

from rlx_core.ir.graph import Graph, Node, Value
from rlx_core.targets.cortex_m.legalize import Problem

CODE = "RLX-U014"
FIX = ("give every tensor at least one element (a dimension of 0 leaves nothing to compute): "
       "drop the empty branch or input from the deployed model")


def _empty(shape: tuple[int, ...]) -> bool:
    return any(d == 0 for d in shape)


def zero_size_problems(g: Graph, nodes: Iterable[Node]) -> list[Problem]:
    """One problem per empty graph input and per node of ``nodes`` whose result is empty."""
    problems: list[Problem] = []
    for v in g.inputs:
        if _empty(v.type.shape):
            node = Node(Value(v.name, v.type), "input", ())
            problems.append(Problem(CODE, node, f"graph input of shape {v.type.shape} has no "
                                    "elements", FIX))
    for n in nodes:
        if _empty(n.type.shape):
            problems.append(Problem(CODE, n, f"result of shape {n.type.shape} has no elements",
                                    FIX))
    return problems
