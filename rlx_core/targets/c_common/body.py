"""The loop-body builder shared by every kernel kind: resolves values at coordinates.

A kernel body asks for a value at an axis map (its coordinates as affines of the loop
variables). The value is a temporary computed earlier at the same coordinates, a load from a
buffer (a kernel input), or an index-map node (broadcast_in_dim, transpose, slice) or splat
constant folded into the coordinates of its operand: index maps never become buffers inside
a kernel. Each access is recorded so the loop nest can be merged (loops.LoopPlan) before the
body is emitted for real.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from rlx_core.ir.graph import Node, Shape, TensorType
from rlx_core.targets.c_common import ctype_table as ct
from rlx_core.targets.c_common import expr
from rlx_core.targets.c_common.expr import RenderError
from rlx_core.targets.c_common.loops import Affine, AxisMap, LoopPlan, Writer, offset, zero
from rlx_core.targets.c_common.names import c_comment

INDEX_MAP_OPS = ("broadcast_in_dim", "transpose", "slice")
# ops rendered with ``?:`` whose operands must not be loads inside the conditional (see hoist)
CONDITIONAL_OPS = frozenset({"select", "max", "min"})


@dataclass(frozen=True)
class Buffer:
    """A pointer parameter of the kernel function."""

    ptr: str
    type: TensorType


# a line's node comment: ``// %name = op`` (names made comment-safe as gpu_common.expr.safe)
NODE_COMMENT = re.compile(r"  // %[A-Za-z0-9_.]+(?: = [A-Za-z0-9_]+)?$", re.M)


def node_comment(name: str, op: str = "") -> str:
    safe = re.sub(r"[^A-Za-z0-9_.]", "_", name)
    return f"// %{safe}" + (f" = {re.sub(r'[^A-Za-z0-9_]', '_', op)}" if op else "")


@dataclass
class Body:
    """Emission state of one loop body (recreated for the dry run and the real one)."""

    nodes: dict[str, Node]
    buffers: dict[str, Buffer]
    plan: LoopPlan | None  # None during the dry run, which only records accesses
    nvars: int
    out: Writer = field(default_factory=Writer)
    accesses: list[Affine] = field(default_factory=list)
    temps: dict[str, tuple[str, AxisMap]] = field(default_factory=dict)
    counter: int = 0
    erf: str = ""  # the C function an erf calls ("": the prelude's; KernelEnv.erf)
    erf_called: bool = False

    def fmt(self, a: Affine) -> str:
        self.accesses.append(a)
        return self.plan.fmt(a) if self.plan is not None else "0"

    def fresh(self, stem: str = "t") -> str:
        self.counter += 1
        return f"{stem}{self.counter}"

    def load(self, buf: Buffer, amap: AxisMap) -> str:
        off = offset(amap, buf.type.shape, self.nvars)
        return ct.load(buf.type.dtype, f"{buf.ptr}[{self.fmt(off)}]")

    def value(self, name: str, amap: AxisMap) -> str:
        """C expression (value form) of ``name`` at coordinates ``amap``."""
        if name in self.temps:
            tname, tmap = self.temps[name]
            if tmap == amap:
                return tname
        if name in self.buffers:
            return self.load(self.buffers[name], amap)
        node = self.nodes.get(name)
        if node is None or name in self.temps:
            raise RenderError(f"value %{c_comment(name)} is needed at other coordinates than "
                              "it is computed at", hint="an internal fusion/renderer mismatch: "
                              "report it with the LIR text")
        return self.mapped(node, amap)

    def mapped(self, node: Node, amap: AxisMap) -> str:
        """An index-map node or a splat constant at ``amap`` (no temporary needed)."""
        a = node.a
        if node.op == "constant" and not isinstance(a["value"], tuple):
            return ct.literal(a["value"], node.type.dtype)
        src = node.inputs[0] if node.inputs else ""
        if node.op == "broadcast_in_dim":
            in_shape = self.type_of(src).shape
            inner = tuple(zero(self.nvars) if in_shape[i] == 1 else amap[d]
                          for i, d in enumerate(a["dims"]))
            return self.value(src, inner)
        if node.op == "transpose":
            inner_list: list[Affine] = [zero(self.nvars)] * len(amap)
            for i, p in enumerate(a["perm"]):
                inner_list[p] = amap[i]
            return self.value(src, tuple(inner_list))
        if node.op == "slice":
            return self.value(src, tuple(m.scale(st).shift(s) for m, s, st in
                                         zip(amap, a["start"], a["stride"], strict=True)))
        raise RenderError(f"{node.op} cannot be read through an index map",
                          hint="it should be its own kernel (opaque) or a temporary")

    def type_of(self, name: str) -> TensorType:
        if name in self.buffers:
            return self.buffers[name].type
        return self.nodes[name].type

    def compute(self, node: Node, amap: AxisMap) -> str:
        """Emit ``const VT t = <node>`` at ``amap`` and remember it."""
        if node.op in INDEX_MAP_OPS or node.op == "constant":
            rhs = self.mapped(node, amap)
        else:
            args = [self.value(i, amap) for i in node.inputs]
            if node.op in CONDITIONAL_OPS:
                args = [self.hoist(a, i) for a, i in zip(args, node.inputs, strict=True)]
            rhs = expr.render(node.op, node.a, args, [self.type_of(i).dtype for i in node.inputs],
                              node.type.dtype, erf=self.erf)
            self.erf_called |= bool(self.erf) and f"{self.erf}(" in rhs
        t = self.fresh()
        # the node comment the explorer links the line by (as every GPU dialect writes it);
        # share() ignores it when comparing kernels
        self.out.line(f"const {ct.value(node.type.dtype)} {t} = {rhs};  "
                      f"{node_comment(node.name, node.op)}")
        self.temps[node.name] = (t, amap)
        return t

    def hoist(self, arg: str, value: str) -> str:
        """A load as a temporary of its own, read before the ``?:`` that uses it.

        GCC 12.2 at -O3 with AVX2 / AVX-512 if-converts a load inside ``c ? in[i] : 0`` into a
        masked load and mis-vectorises it inside a reduction (a TopK kernel summed wrong
        indices; reproduced standalone, no aliasing). A load outside the ``?:`` becomes a
        plain vector load and a blend, which it compiles correctly. Loads of in-bounds
        elements have no side effects, so reading both arms is always allowed.
        """
        if "[" not in arg:
            return arg
        t = self.fresh()
        self.out.line(f"const {ct.value(self.type_of(value).dtype)} {t} = {arg};")
        return t

    def store(self, buf: Buffer, name: str, amap: AxisMap) -> None:
        off = offset(amap, buf.type.shape, self.nvars)
        val = self.value(name, amap)
        self.out.line(f"{buf.ptr}[{self.fmt(off)}] = {ct.store(buf.type.dtype, val)};  "
                      f"{node_comment(name)}")


    def store_select_in_place(self, buf: Buffer, name: str, amap: AxisMap, mask: str,
                              kept: Buffer) -> None:
        """Store ``name`` = select(mask, new, kept) where ``kept`` (a donated input) and the
        output may be one buffer (runtime/donation.py): then only where the mask is on, as
        the element is already there where it is off. The pointer test is loop-invariant,
        so the compiler splits the loop in two: the copy, and the sparse store."""
        off = offset(amap, buf.type.shape, self.nvars)
        val = self.value(name, amap)
        on = self.value(mask, amap)
        self.out.line(f"if ({on} || (const void*){buf.ptr} != (const void*){kept.ptr}) "
                      f"{buf.ptr}[{self.fmt(off)}] = {ct.store(buf.type.dtype, val)};  "
                      f"{node_comment(name)}")


def same_shape(shape: Shape, other: Shape) -> bool:
    return tuple(shape) == tuple(other)
