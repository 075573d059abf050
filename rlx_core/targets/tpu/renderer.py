"""LIR -> one StableHLO module: graph inputs and parameters are the arguments of ``@main``.

XLA fuses and schedules on its own, so the module keeps the MIR nodes in program order and
marks where each LIR kernel begins (a comment with the kernel's name and node ids); every
node's first line is recorded so an XLA diagnostic can name the node it came from.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from rlx_core.errors import VerifyError
from rlx_core.ir.graph import Graph, Level, Node, TensorType
from rlx_core.targets.tpu.hlo_types import tensor
from rlx_core.targets.tpu.lowering import lower_node
from rlx_core.targets.tpu.writer import V, Writer

_ID = re.compile(r"[A-Za-z_$.][A-Za-z0-9_$.-]*")


@dataclass(frozen=True)
class HloModule:
    """A rendered module: its text, argument order, and which line came from which node."""

    text: str
    args: tuple[str, ...]  # graph inputs, then parameters (value names)
    arg_types: tuple[TensorType, ...]
    n_inputs: int
    outputs: tuple[str, ...]
    node_lines: tuple[tuple[int, str, str], ...]  # (1-based first line, node name, kernel)

    def node_at(self, line: int) -> tuple[str, str] | None:
        """(node, kernel) whose lines include ``line``, or None."""
        found = None
        for first, node, kernel in self.node_lines:
            if first <= line:
                found = (node, kernel)
        return found


def _ssa(name: str, taken: set[str]) -> str:
    base = name if _ID.fullmatch(name) or name.isdigit() else "v_" + re.sub(r"[^A-Za-z0-9_$.-]", "_", name)
    out, n = base, 0
    while out in taken or re.fullmatch(r"t\d+", out):
        n += 1
        out = f"{base}_{n}"
    taken.add(out)
    return "%" + out


def _schedule(lir: Graph) -> list[tuple[str, Node]]:
    """(kernel name, node) in execution order; a graph without kernels is one unnamed group."""
    if lir.kernels:
        return [(k.name, n) for k in lir.kernels for n in k.nodes]
    return [("", n) for n in lir.nodes]


def render_module(lir: Graph) -> HloModule:
    """The StableHLO text of ``lir`` (LIR with kernels, or MIR)."""
    if lir.level is Level.HIR:
        raise VerifyError(f"the tpu target renders MIR or LIR, got HIR @{lir.name}",
                          hint="legalize the graph for target tpu first (rlx.lower)")
    taken: set[str] = set()
    env: dict[str, V] = {}
    args = (*lir.inputs, *lir.params)
    for v in args:
        env[v.name] = V(_ssa(v.name, taken), v.type)
    w = Writer()
    node_lines: list[tuple[int, str, str]] = []
    header_lines = 2
    current = None
    for kernel, n in _schedule(lir):
        if kernel != current and kernel:
            ids = ", ".join(m.name for k in lir.kernels if k.name == kernel for m in k.nodes)
            w.line(f"// kernel {kernel}: {ids}")
            current = kernel
        node_lines.append((header_lines + len(w.lines) + 1, n.name, kernel))
        out = lower_node(w, n, [env[i] for i in n.inputs])
        # the node's own name on its result, so the module reads like the LIR
        if out.name.startswith("%t") and w.lines and w.lines[-1].lstrip().startswith(out.name
                                                                                     + " ="):
            mine = _ssa(n.name, taken)
            w.lines[-1] = w.lines[-1].replace(out.name + " =", mine + " =", 1)
            out = V(mine, out.type)
        env[n.name] = out
    outs = [env[o] for o in lir.outputs]
    w.line(f"return {', '.join(o.name for o in outs)} : {', '.join(o.ty for o in outs)}")
    mod = re.sub(r"[^A-Za-z0-9_]", "_", lir.name) or "main"
    sig = ", ".join(f"{env[v.name].name}: {tensor(v.type)}" for v in args)
    res = ", ".join(o.ty for o in outs)
    text = "\n".join([
        f"module @rlx_{mod} attributes {{mhlo.num_partitions = 1 : i32, "
        f"mhlo.num_replicas = 1 : i32}} {{",
        f"  func.func public @main({sig}) -> ({res}) {{",
        *w.lines, "  }", "}", ""])
    return HloModule(text, tuple(v.name for v in args), tuple(v.type for v in args),
                     len(lir.inputs), tuple(lir.outputs), tuple(node_lines))
