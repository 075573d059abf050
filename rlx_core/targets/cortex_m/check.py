"""The strict check of a HIR graph for the firmware, run before dispatch (``check_hir``).

Every live node must be something the int8 firmware runs or a boundary step the host does;
all others are collected and raised together, each with a code and a concrete fix, grouped by
node: a float linear (quantize the model), a softmax before argmax (drop it: argmax of the
logits is the same class), any other float op (keep the model integer), an op without an int8
kernel. Shapes are static in rlx, so there is no dynamic-shape case to refuse.
"""

from __future__ import annotations

from typing import Any

from rlx_core.ir.graph import Graph, Node
from rlx_core.targets.cortex_m.legalize import (
    ACT_DTYPES,
    FLOATS,
    INT_OPS,
    Problem,
    conv_problem,
    float_fix,
    float_why,
    raise_problems,
)
from rlx_core.targets.cortex_m.sizes import zero_size_problems

RUNS = ("int_linear", "int_conv2d", "requantize", "argmax", "reshape", "constant", "broadcast_in_dim")


def live_nodes(g: Graph) -> list[Node]:
    """The nodes some output depends on, in graph order (PTQ leaves dead float branches)."""
    prod = g.producers()
    live: set[str] = set()
    todo = list(g.outputs)
    while todo:
        v = todo.pop()
        if v in live or v not in prod:
            continue
        live.add(v)
        todo.extend(prod[v].inputs)
    return [n for n in g.nodes if n.name in live]


def check_hir(g: Graph, caps: Any = None) -> None:
    """Raise one typed error listing every node the firmware cannot run (ZeroSizeTensorError
    RLX-U014 when the first is an empty tensor, FloatOpError RLX-U001 when it is a float op,
    else NoInt8KernelError RLX-U002)."""
    nodes = live_nodes(g)
    types = g.values()
    graph_inputs = {v.name for v in g.inputs}
    users: dict[str, list[Node]] = {}
    for n in nodes:
        for i in n.inputs:
            users.setdefault(i, []).append(n)
    problems: list[Problem] = zero_size_problems(g, nodes)
    for n in nodes:
        if caps is not None:  # a tensor the kernels' int indices cannot count
            for r in caps.limit_reasons(n, [types[i].type for i in n.inputs]):
                problems.append(Problem(r.code, n, r.message, r.hint))
        touched = [types[i].type.dtype.name for i in n.inputs] + [n.type.dtype.name]
        if n.op == "quantize":
            if n.inputs[0] not in graph_inputs:
                problems.append(Problem("RLX-U001", n, "quantize inside the model computes in "
                                        "f32", "quantize only the graph inputs (the firmware "
                                        "reads int8 inputs)"))
        elif n.op == "dequantize":
            readers = users.get(n.name, [])
            if any(u.op != "argmax" for u in readers):
                bad = next(u for u in readers if u.op != "argmax")
                problems.append(Problem("RLX-U001", bad, f"float {bad.op} after dequantize",
                                        float_fix(bad)))
        elif n.op == "int_conv2d" and caps is not None and not caps.claims_op(n.op):
            problems.append(Problem("RLX-U002", n, f"no int8 convolution unit on {caps.target}",
                                    "flatten the model to fully connected layers, or run it "
                                    "on cortex-m or cpu"))
        elif n.op == "int_conv2d" and conv_problem(g, n)[0]:
            problems.append(Problem("RLX-U002", n, *conv_problem(g, n)))
        elif n.op == "max_pool2d" and n.type.dtype.name in ACT_DTYPES and (
                caps is None or caps.claims_op(n.op)):
            continue  # pool_step.py (a target without the claim gets "no int8 kernel")
        elif n.op in RUNS or (n.op in INT_OPS and not any(d in FLOATS for d in touched)):
            continue
        elif any(d in FLOATS for d in touched):
            problems.append(Problem("RLX-U001", n, float_why(n), float_fix(n)))
        else:
            problems.append(Problem("RLX-U002", n, f"no int8 kernel for {n.op}",
                                    "express it with int_linear / requantize / relu / argmax, "
                                    "or run it on the host"))
    raise_problems(problems, g.name)

