"""The strict check of an int8 LIR for a microcontroller: every kernel becomes one step the
firmware runs (or a host-side boundary step), or a problem naming its node and a fix.

Steps, in LIR order:

- ``const``: a kernel of constants only; its values go to flash;
- ``in``: ``quantize`` of a graph input: done on the host, the firmware reads the int8 tensor;
- ``out``: ``dequantize`` producing a graph output: the firmware writes the integer tensor and
  the host dequantizes it (the numpy reference's rule, so the result is identical);
- ``fc`` (``int_linear`` with weights known at compile time), ``conv`` (``int_conv2d``, groups
  1 or depthwise, weights known at compile time), ``pool`` (``max_pool2d`` on u8 / i8),
  ``requant``, ``ewise`` (a loop of
  integer max / min / neg and broadcasts: relu on quantized values is max with the zero point), ``argmax``, ``dequant`` (only when an argmax reads it:
  exact f32 arithmetic, one rounding per step), ``reshape``.

Anything else is collected, never stopped at: all problems are raised together, grouped by the
HIR node they came from, each with its own code (float op, no int8 kernel).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rlx_core.ir.graph import Graph, Kernel, Node, ValueKind
from rlx_core.targets.cortex_m.errors import (
    FloatOpError,
    FusedKernelError,
    NoInt8KernelError,
    ZeroSizeTensorError,
)

FLOATS = ("f16", "bf16", "f32", "f64")
ACT_DTYPES = ("u8", "i8")
INT_DTYPES = ("u8", "i8", "i16", "i32", "i64")
QUANTIZE_HINT = ("quantize the model first: rlx_core.quant.ptq.quantize_static(graph, data=...) "
                 "turns every linear into int_linear + requantize")


@dataclass
class Step:
    """One kernel as the firmware (or the host, at the boundary) runs it: its step kind (the
    module docstring), the kernel and its node."""

    kind: str
    kernel: Kernel
    node: Node


@dataclass
class Problem:
    """Why a kernel cannot run on the microcontroller: the error code, the node, what is wrong
    and the fix."""

    code: str
    node: Node
    what: str
    fix: str

    def line(self) -> str:
        loc = self.node.loc
        where = f" ({loc.where})" if loc.file else ""
        origin = loc.origin or self.node.name
        op = loc.origin_op or self.node.op
        return f"{self.code} %{origin} {op}{where}: {self.what}; fix: {self.fix}"


@dataclass
class Legalized:
    """The strict check's result: the steps in LIR order and the problems that stop the build."""

    steps: list[Step] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)


def _is_const(k: Kernel) -> bool:
    return all(n.op == "constant" for n in k.nodes)


def _known(g: Graph, name: str, consts: set[str]) -> bool:
    """Is ``name`` known at compile time (a parameter or a constant kernel's output)?"""
    return name in consts or g.values()[name].kind is ValueKind.PARAM


def float_fix(node: Node) -> str:
    origin = node.loc.origin_op or node.op
    if origin in ("softmax", "log_softmax"):
        return (f"{origin} before argmax is order-preserving: drop it for deployment (argmax of "
                "the logits gives the same class)")
    if origin in ("linear", "matmul", "dot_general", "conv2d"):
        return QUANTIZE_HINT
    if origin == "max_pool2d":
        return ("quantize the model first: rlx_core.quant.ptq.quantize_static(graph, data=...) "
                "pools the int8 codes (max commutes with quantization), or pool on the host")
    return ("keep the model integer from its first quantize to its last dequantize; do this "
            "float step on the host, or express it on the int8 values")


def float_why(node: Node) -> str:
    """What the firmware lacks for a float node: float arithmetic, or (a max pool, which it has
    on int8 values) the integer operand."""
    if (node.loc.origin_op or node.op) == "max_pool2d":
        return (f"max pooling of {node.type.dtype} values: the firmware pools only i8 / u8 "
                "values")
    return "computes in floating point"


INT_OPS = ("max", "min", "neg")  # integer elementwise ops of the generated loop


def _elementwise(g: Graph, k: Kernel) -> tuple[str, str]:
    """("ewise", "") for a loop the emitter writes: integer max / min / neg over same-shape
    values, splat constants and broadcasts (relu on quantized values is max with the zero
    point), else (code, why)."""
    types = g.values()
    splats = splat_values(k)
    body = [n for n in k.nodes if n.name not in splats]
    inner = {n.name for n in k.nodes}
    shape = types[k.outputs[0]].type.shape if k.outputs else ()

    def fits(n: Node) -> bool:
        if n.type.shape != shape:
            return False
        if n.op == "broadcast_in_dim":
            return n.inputs[0] not in inner or n.inputs[0] in splats
        return n.op in INT_OPS and n.type.dtype.name in INT_DTYPES and all(
            i in inner or types[i].type.shape == shape for i in n.inputs)

    if body and all(fits(n) for n in body):
        return "ewise", ""
    floats = [n for n in k.nodes if types[n.name].type.dtype.name in FLOATS]
    if floats:
        return "RLX-U001", float_why(floats[0])
    return "RLX-U002", f"no int8 kernel for {', '.join(sorted({n.op for n in body}))}"


def runs_alone(g: Graph, n: Node) -> bool:
    """Does the firmware run ``n`` as a kernel of its own (what its capability table claims)?
    The ops a fused kernel's refusal is checked against, one by one."""
    types = g.values()
    dtype = n.type.dtype.name
    operands = [types[i].type.dtype.name for i in n.inputs]
    if n.op in ("constant", "broadcast_in_dim", "reshape"):
        return True
    if n.op in INT_OPS:
        return dtype in INT_DTYPES and all(d in INT_DTYPES for d in operands)
    if n.op == "argmax":
        return operands[0] in ("f32",) + INT_DTYPES and dtype in ("i32", "i64")
    if n.op == "max_pool2d":
        return dtype in ACT_DTYPES
    return False


def kernel_problem(g: Graph, k: Kernel, code: str, why: str, fix: str) -> Problem:
    """The problem of a kernel the firmware refuses. A fused kernel (more than one node) names
    the first op the firmware refuses alone (``code``, ``why``: a refusal of that op), or, when
    it runs every op alone, the fusion itself (RLX-U015: no op is refused)."""
    body = [n for n in k.nodes if n.op != "constant"] or list(k.nodes)
    if len(k.nodes) > 1:
        types = g.values()
        bad = [n for n in body if not runs_alone(g, n)]
        if bad:
            n = bad[0]
            if any(d in FLOATS for d in [types[i].type.dtype.name for i in n.inputs]
                   + [n.type.dtype.name]):
                return Problem("RLX-U001", n, float_why(n), float_fix(n))
            return Problem("RLX-U002", n, f"no int8 kernel for {n.op} ({n.type.dtype})", fix)
        ops = " -> ".join(n.op for n in k.nodes)
        return Problem("RLX-U015", body[0], f"no int8 kernel for the fused {k.kind} kernel "
                       f"{ops} (the firmware runs each op alone)",
                       "compute the fused ops in separate steps (e.g. the argmax of a graph "
                       "input or of an int_linear), or run the graph on the host")
    return Problem(code, body[0], why, fix)


def splat_values(k: Kernel) -> dict[str, Node]:
    """Values of ``k`` that hold one number everywhere: scalar constants and their broadcasts
    (value name -> the constant node)."""
    out: dict[str, Node] = {}
    for n in k.nodes:
        if n.op == "constant" and not isinstance(n.attr("value"), tuple):
            out[n.name] = n
        elif n.op == "broadcast_in_dim" and n.inputs[0] in out:
            out[n.name] = out[n.inputs[0]]
    return out


def conv_problem(g: Graph, n: Node) -> tuple[str, str]:
    """("", "") for an int_conv2d the NHWC kernels run (u8/i8 input, i8 weight, groups 1 or
    depthwise with one filter per channel, no dilation), else (why, fix)."""
    types = g.values()
    x, w = (types[i].type for i in n.inputs[:2])
    if x.dtype.name not in ACT_DTYPES or w.dtype.name != "i8":
        return (f"no int8 convolution kernel for x {x.dtype}, w {w.dtype}",
                "quantize weights to i8 and activations to u8 or i8")
    if tuple(n.attr("dilation")) != (1, 1):
        return (f"no kernel for dilation {tuple(n.attr('dilation'))}",
                "use dilation 1 (a larger kernel covers the same window)")
    groups, (o, cg) = int(n.attr("groups")), w.shape[:2]
    if groups != 1 and not (groups == x.shape[1] == o and cg == 1):
        return (f"no kernel for groups {groups} ({o} filters of {cg} channels)",
                "use groups 1 or a depthwise conv with one filter per channel")
    return "", ""


WEIGHTED = {"int_linear": "fc", "int_conv2d": "conv"}  # op -> its step kind


def weighted_problem(g: Graph, n: Node, consts: set[str]) -> tuple[str, str]:
    """("", "") for an int_linear / int_conv2d a kernel runs with its weight in flash, else
    (why, fix): the dtypes (and the conv's shape rules), then a weight known at build time."""
    if n.op == "int_conv2d":
        why, fix = conv_problem(g, n)
    else:
        types = g.values()
        x, w = (types[i].type.dtype.name for i in n.inputs[:2])
        why, fix = ((f"no int8 fully connected kernel for x {x}, w {w}",
                     "quantize weights to i8 and activations to u8 or i8")
                    if x not in ACT_DTYPES or w != "i8" else ("", ""))
    if not why and not all(_known(g, i, consts) for i in n.inputs[1:]):
        return ("the weight is computed at run time",
                "pass weights as parameters or constants: they live in flash")
    return why, fix


def legalize(g: Graph) -> Legalized:
    """Classify every kernel of ``g`` (a LIR graph); problems are collected, not raised."""
    out = Legalized()
    types = g.values()
    graph_inputs = {v.name for v in g.inputs}
    consts: set[str] = set()
    readers: dict[str, list[Kernel]] = {}
    for k in g.kernels:
        for i in k.inputs:
            readers.setdefault(i, []).append(k)

    def problem(code: str, node: Node, what: str, fix: str) -> None:
        out.problems.append(Problem(code, node, what, fix))

    from rlx_core.targets.cortex_m.sizes import zero_size_problems  # imports Problem from here

    out.problems.extend(zero_size_problems(g, [n for k in g.kernels for n in k.nodes
                                               if n.op != "constant"]))

    for k in g.kernels:
        if _is_const(k):
            consts.update(k.outputs)
            out.steps.append(Step("const", k, k.nodes[-1]))
            continue
        body = [n for n in k.nodes if n.op != "constant"]
        n = body[0]
        dtype = types[n.name].type.dtype.name
        if k.kind == "opaque" and len(body) == 1:
            if n.op == "quantize":
                if n.inputs[0] in graph_inputs and all(_known(g, i, consts) for i in n.inputs[1:]):
                    out.steps.append(Step("in", k, n))
                else:
                    problem("RLX-U001", n, "quantize inside the model computes in f32",
                            "quantize only the graph inputs (the firmware reads int8 inputs)")
                continue
            if n.op == "dequantize":
                users = readers.get(n.name, [])
                if not all(_known(g, i, consts) for i in n.inputs[1:]):
                    problem("RLX-U002", n, "dequantize with run-time scale",
                            "use static quantization (quantize_static), not dynamic")
                elif n.name in g.outputs and not users:
                    out.steps.append(Step("out", k, n))
                elif users and all(len(u.nodes) == 1 and u.nodes[0].op == "argmax" for u in users):
                    out.steps.append(Step("dequant", k, n))
                else:
                    problem("RLX-U001", n, "dequantize feeds float computation on the device",
                            float_fix(readers[n.name][0].nodes[-1]) if users else
                            "dequantize only the graph outputs")
                continue
            if n.op in WEIGHTED:
                why, fix = weighted_problem(g, n, consts)
                if why:
                    problem("RLX-U002", n, why, fix)
                else:
                    out.steps.append(Step(WEIGHTED[n.op], k, n))
                continue
            if n.op == "requantize":
                if dtype in ("u8", "i8", "i16"):
                    out.steps.append(Step("requant", k, n))
                else:
                    problem("RLX-U002", n, f"no requantize kernel to {dtype}",
                            "requantize to u8, i8 or i16")
                continue
            if n.op == "reshape":
                out.steps.append(Step("reshape", k, n))
                continue
            if n.op == "max_pool2d" and dtype in ACT_DTYPES:
                out.steps.append(Step("pool", k, n))
                continue
        if k.kind == "elementwise":
            code, why = _elementwise(g, k)
            if code == "ewise":
                out.steps.append(Step("ewise", k, n))
            else:
                out.problems.append(kernel_problem(
                    g, k, code, why, float_fix(n) if code == "RLX-U001" else
                    "express it with int_linear / requantize / relu, or run it on the host"))
            continue
        if k.kind == "reduce" and len(k.nodes) == 1 and n.op == "argmax":
            src = types[n.inputs[0]].type.dtype.name
            if src in ("f32",) + INT_DTYPES and dtype in ("i32", "i64"):
                out.steps.append(Step("argmax", k, n))
                continue
        if any(types[m.name].type.dtype.name in FLOATS for m in k.nodes):
            out.problems.append(kernel_problem(g, k, "RLX-U001", float_why(n), float_fix(n)))
        else:
            out.problems.append(kernel_problem(
                g, k, "RLX-U002", f"no int8 kernel for {k.kind} {n.op}",
                "express it with int_linear / requantize / relu / argmax, or run it on the "
                "host"))
    return out


def raise_problems(problems: list[Problem], name: str) -> None:
    """One typed error listing every problem (grouped by the HIR node they came from)."""
    if not problems:
        return
    seen: dict[tuple[str, str], Problem] = {}
    for p in problems:
        seen.setdefault((p.code, p.node.loc.origin or p.node.name), p)
    lines = [p.line() for p in seen.values()]
    classes = {"RLX-U001": FloatOpError, "RLX-U014": ZeroSizeTensorError,
               "RLX-U015": FusedKernelError}
    cls: Any = classes.get(problems[0].code, NoInt8KernelError)
    raise cls(f"{len(lines)} node(s) of @{name} cannot run on a Cortex-M int8 firmware:\n    "
              + "\n    ".join(lines),
              hint="each line names the node and its fix; the firmware runs int_linear, "
                   "int_conv2d, requantize, relu, max pooling, argmax and reshape on int8 "
                   "values", lines=lines)
