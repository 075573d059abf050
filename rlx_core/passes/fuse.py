"""Fuse: group MIR nodes into LIR kernels, each one loop nest over arena buffers (MIR -> LIR).

The kinds of kernel and the loop nest each stands for (``out`` is the kernel's loop shape)::

    elementwise   for i in ndindex(out):                      # one loop over the output
                      a = x[i]; b = w[bcast(i)]; c = 0.5       # inputs, broadcasts as index maps,
                      t = exp(a) * b + c                       # splat constants as scalars
                      y[i] = t                                 # only kernel outputs are stored

    reduce        for o in ndindex(reduced):                   # outer loop: the kept axes
                      acc = init
                      for r in ndindex(reduced axes):          # inner loop: the reduced axes
                          acc = combine(acc, f(x[o, r]))       # single-use elementwise producers
                      y[o] = g(acc, z[o])                      # elementwise consumers of the result

    matmul        for b, m, n in ndindex(batch, lhs free, rhs free):
                      acc = sum_k lhs[b, m, k] * rhs[b, k, n]  # dot_general
                      y[b, m, n] = epi(acc, bias[bcast(n)])    # elementwise epilogue (bias, relu)
                  [y = layer_norm(y) over n]                   # a row norm the target lists

    opaque        one op with its own access pattern: transpose, reshape, slice, pad, concat,
                  gather, scatter_add, iota, tuple constants, HIR composites a target kept

A target whose ``matmul_norms()`` names a row normalisation (the cpu: layer_norm, rms_norm) also
gets it appended to the matmul group whose result it normalises (``place_norm``), so the kernel
can normalise whole rows of C while they are in cache (c_common/matmul.py).

Grouping is greedy, deterministic and topological. Each node, in graph order, joins the group of
one of its direct producers when that group's rule accepts it (first input first), or starts a
new group. Splat constants and ``broadcast_in_dim`` are *virtual*: they never start a loop nest
of their own but are copied into every fused kernel that reads them (a copy after the first gets
a fresh name), since inside a loop they are an index map or a scalar, not a buffer. They are
materialised as a kernel (an elementwise one: a loop over the broadcast result) only where a
non-fusing op (a dot_general operand, an opaque op) or the graph's return reads them. A join is refused when it would make kernels depend on each other in
a cycle. A value read by another kernel or returned by the graph is a kernel output; everything
else stays inside its kernel and never becomes a buffer.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from rlx_core.errors import RlxError, VerifyError
from rlx_core.ir.builder import NameGen
from rlx_core.ir.graph import Graph, Kernel, Level, Node, Shape, Value
from rlx_core.ir.ops import MIR_OPS, is_elementwise
from rlx_core.passes.base import PassContext


@dataclass
class _Group:
    """A kernel being formed. Mutable on purpose: it only lives inside one ``Fuse.run``."""

    gid: int
    kind: str
    members: list[str]  # non-virtual nodes (and, when materialised, the virtual root)
    shape: Shape  # elementwise: the output; reduce: the reduction's input; matmul: the result
    reduced: Shape = ()  # reduce: the reduction's result shape
    consumers: set[str] = field(default_factory=set)  # reduce: values past the reduction
    closed: bool = False  # a materialised virtual node: nothing joins it
    deps: set[int] = field(default_factory=set)  # groups whose outputs this group reads


# ---- the rules: when does node ``n``, reading ``value`` of ``grp``, join ``grp`` -------------


def fuse_elementwise(grp: _Group, value: str, n: Node) -> bool:
    """Elementwise chains over one output shape stay in one loop."""
    return grp.kind == "elementwise" and not grp.closed and n.type.shape == grp.shape


def fuse_reduce(grp: _Group, value: str, n: Node) -> bool:
    """Elementwise consumers of a reduced value of the same shape run in the outer loop."""
    return grp.kind == "reduce" and value in grp.consumers and n.type.shape == grp.reduced


def fuse_matmul(grp: _Group, value: str, n: Node) -> bool:
    """An elementwise epilogue on a dot_general result runs where the accumulator is stored."""
    return grp.kind == "matmul" and not grp.closed and n.type.shape == grp.shape


def fuse_opaque(grp: _Group, value: str, n: Node) -> bool:
    """Data-movement and indexing ops keep a kernel to themselves."""
    return False


RULES: dict[str, Callable[[_Group, str, Node], bool]] = {
    "elementwise": fuse_elementwise,
    "reduce": fuse_reduce,
    "matmul": fuse_matmul,
    "opaque": fuse_opaque,
}


def is_virtual(n: Node) -> bool:
    """Splat constants and broadcasts: index maps inside a loop, not buffers of their own."""
    if n.op == "broadcast_in_dim":
        return True
    return n.op == "constant" and not isinstance(n.attr("value"), tuple)


def _category(op: str) -> str:
    return MIR_OPS[op].category if op in MIR_OPS else "composite"


def _fusing(n: Node) -> bool:
    """Ops whose loop nest can read virtual nodes through index maps."""
    return is_elementwise(n.op) or _category(n.op) == "reduce" or is_virtual(n)


class _Grouper:
    """Phase 1: assign every non-virtual node to a group, in graph order."""

    def __init__(self, g: Graph, norms: frozenset[str] = frozenset()):
        self.g = g
        self.norms = norms  # row normalisations the target runs in a matmul's epilogue
        self.order = {n.name: i for i, n in enumerate(g.nodes)}
        self.prod = g.producers()
        self.users = g.users()
        self.outputs = set(g.outputs)
        self.virtual = {n.name for n in g.nodes if is_virtual(n)}
        self.groups: list[_Group] = []
        self.group_of: dict[str, int] = {}

    def new_group(self, kind: str, first: Node, shape: Shape, deps: set[int], **kw) -> _Group:
        grp = _Group(len(self.groups), kind, [first.name], shape, deps=deps, **kw)
        self.groups.append(grp)
        self.group_of[first.name] = grp.gid
        return grp

    def deps_of(self, name: str, fusing: bool) -> set[int]:
        """Groups that reading ``name`` makes a kernel depend on."""
        if name not in self.prod:
            return set()  # graph input or parameter
        if name not in self.virtual:
            return {self.group_of[name]}
        if fusing:  # the virtual node is copied in: its own operands become the dependency
            return set().union(*(self.deps_of(i, True) for i in self.prod[name].inputs))
        return {self.materialise(name)}

    def materialise(self, name: str) -> int:
        if name not in self.group_of:
            n = self.prod[name]
            deps = set().union(*(self.deps_of(i, True) for i in n.inputs))
            self.new_group("elementwise", n, n.type.shape, deps, closed=True)
        return self.group_of[name]

    def reaches(self, src: int, dst: int) -> bool:
        """Does group ``src`` depend, directly or not, on group ``dst``?"""
        seen, todo = set(), [src]
        while todo:
            cur = todo.pop()
            if cur == dst:
                return True
            if cur not in seen:
                seen.add(cur)
                todo.extend(self.groups[cur].deps)
        return False

    def run(self) -> list[_Group]:
        for n in self.g.nodes:
            if n.name in self.virtual:
                if n.name in self.outputs or not self.users.get(n.name):
                    self.materialise(n.name)
            elif is_elementwise(n.op):
                self.place_elementwise(n)
            elif _category(n.op) == "reduce":
                self.place_reduction(n)
            elif n.op in self.norms and self.place_norm(n):
                pass
            else:
                kind = "matmul" if n.op == "dot_general" else "opaque"
                deps = set().union(*(self.deps_of(i, False) for i in n.inputs))
                self.new_group(kind, n, n.type.shape, deps)
        return self.groups

    def place_elementwise(self, n: Node) -> None:
        deps = set().union(*(self.deps_of(i, True) for i in n.inputs))
        for value in dict.fromkeys(n.inputs):
            if value not in self.prod or value in self.virtual:
                continue
            grp = self.groups[self.group_of[value]]
            if not RULES[grp.kind](grp, value, n):
                continue
            others = deps - {grp.gid}
            if any(self.reaches(h, grp.gid) for h in others):
                continue  # joining would make grp both feed and wait for another kernel
            grp.members.append(n.name)
            grp.deps |= others
            if grp.kind == "reduce":
                grp.consumers.add(n.name)
            self.group_of[n.name] = grp.gid
            return
        self.new_group("elementwise", n, n.type.shape, deps)

    def place_norm(self, n: Node) -> bool:
        """Put the row normalisation ``n`` (layer_norm, rms_norm) at the end of the matmul
        group whose last value it normalises, when nothing else reads that group's values
        and its other operands (weight, bias) are buffers: the kernel then normalises each
        block of whole rows of C where the GEMM leaves it (in cache), instead of a kernel of
        its own reading C back from memory. Nothing joins the group after it."""
        x = n.inputs[0]
        if x not in self.prod or x in self.virtual:
            return False
        grp = self.groups[self.group_of[x]]
        if grp.kind != "matmul" or grp.closed or n.type.shape != grp.shape or \
                self.prod[grp.members[0]].type.dtype != n.type.dtype or \
                not self.single_use(grp, n):
            return False  # C (the dot's dtype) holds the normalised value's input
        if any(i in self.virtual for i in n.inputs[1:]):
            return False  # the row loop reads its weight and bias from buffers
        others = set().union(*(self.deps_of(i, False) for i in n.inputs[1:])) - {grp.gid}
        if any(self.reaches(h, grp.gid) for h in others):
            return False
        grp.members.append(n.name)
        grp.deps |= others
        grp.closed = True
        self.group_of[n.name] = grp.gid
        return True

    def single_use(self, grp: _Group, reduction: Node) -> bool:
        inside = set(grp.members) | {reduction.name}
        return all(m not in self.outputs and all(u.name in inside for u in self.users.get(m, []))
                   for m in grp.members)

    def place_reduction(self, n: Node) -> None:
        x = n.inputs[0]
        if x in self.prod and x not in self.virtual:
            grp = self.groups[self.group_of[x]]
            if grp.kind == "elementwise" and not grp.closed and self.single_use(grp, n):
                # the producers become the reduction's inner loop body
                grp.kind, grp.reduced, grp.consumers = "reduce", n.type.shape, {n.name}
                grp.members.append(n.name)
                self.group_of[n.name] = grp.gid
                return
        self.new_group("reduce", n, self.g.type_of(x).shape, self.deps_of(x, True),
                       reduced=n.type.shape, consumers={n.name})


def _kernel_order(groups: list[_Group], order: dict[str, int]) -> list[_Group]:
    """Groups in a dependency-respecting order; ties go to the one whose first node is earliest."""
    children: dict[int, list[int]] = {grp.gid: [] for grp in groups}
    indeg = {grp.gid: len(grp.deps) for grp in groups}
    for grp in groups:
        for d in grp.deps:
            children[d].append(grp.gid)
    key = {grp.gid: min(order[m] for m in grp.members) for grp in groups}
    ready = [(key[gid], gid) for gid, deg in indeg.items() if deg == 0]
    heapq.heapify(ready)
    out: list[_Group] = []
    while ready:
        _, gid = heapq.heappop(ready)
        out.append(groups[gid])
        for c in children[gid]:
            indeg[c] -= 1
            if indeg[c] == 0:
                heapq.heappush(ready, (key[c], c))
    if len(out) != len(groups):
        raise RlxError("fuse: kernel dependencies form a cycle (an internal fusion bug)",
                       hint="report it with the MIR text; run without fusion meanwhile")
    return out


def _virtual_closure(names: list[str], prod: dict[str, Node], virtual: set[str]) -> list[str]:
    """The virtual nodes ``names`` read, transitively through other virtual nodes."""
    out: dict[str, None] = {}
    todo = [i for m in names if _fusing(prod[m]) for i in prod[m].inputs]
    while todo:
        i = todo.pop()
        if i in virtual and i not in out:
            out[i] = None
            todo.extend(prod[i].inputs)
    return list(out)


@dataclass(frozen=True)
class Fuse:
    """MIR -> LIR: greedy fusion into elementwise / reduce / matmul / opaque kernels."""

    name: str = "fuse"

    def run(self, g: Graph, ctx: PassContext) -> Graph:
        if g.level is not Level.MIR:
            raise VerifyError(f"fuse expects a MIR graph, got {g.level.value} @{g.name}",
                              hint="lower HIR to MIR first (Legalize); fuse runs once")
        grouper = _Grouper(g, frozenset(getattr(ctx.target, "matmul_norms", lambda: ())()))
        groups = _kernel_order(grouper.run(), grouper.order)
        prod, virtual, order = grouper.prod, grouper.virtual, grouper.order
        names = NameGen(g.values())

        # a virtual node keeps its name in its materialised kernel, else in the first reader
        holders: dict[str, int] = {}
        for idx, grp in enumerate(groups):
            for m in grp.members:
                if m in virtual:
                    holders[m] = idx
        kernel_nodes: list[list[Node]] = []
        originals: list[list[Node]] = []
        for idx, grp in enumerate(groups):
            rename: dict[str, str] = {}
            copies = [v for v in _virtual_closure(grp.members, prod, virtual) if v not in grp.members]
            for v in copies:
                if holders.setdefault(v, idx) != idx:
                    rename[v] = names.claim(v)
            placed = [prod[m] for m in sorted(grp.members + copies, key=order.__getitem__)]
            originals.append(placed)
            kernel_nodes.append([
                replace(n, out=Value(rename[n.name], n.out.type) if n.name in rename else n.out,
                        inputs=tuple(rename.get(i, i) for i in n.inputs))
                for n in placed])

        kernels = _make_kernels(g, groups, kernel_nodes)
        if ctx.trace is not None:
            for k, before in zip(kernels, originals, strict=True):
                ctx.record(RULES[k.kind], before, list(k.nodes),
                           node=k.outputs[0] if k.outputs else "", name=f"fuse-{k.kind}")
        out = g.with_nodes([n for k in kernels for n in k.nodes], level=Level.LIR)
        out.kernels = tuple(kernels)
        return out


def _make_kernels(g: Graph, groups: list[_Group], kernel_nodes: list[list[Node]]) -> list[Kernel]:
    """Kernel inputs (first-use order) and outputs (values other kernels or the return read)."""
    where = {n.name: idx for idx, nodes in enumerate(kernel_nodes) for n in nodes}
    read_outside: set[str] = set(g.outputs)
    for idx, nodes in enumerate(kernel_nodes):
        for n in nodes:
            read_outside.update(i for i in n.inputs if where.get(i, idx) != idx)
    kernels = []
    for idx, (grp, nodes) in enumerate(zip(groups, kernel_nodes, strict=True)):
        inner = {n.name for n in nodes}
        ins = dict.fromkeys(i for n in nodes for i in n.inputs if i not in inner)
        outs = tuple(n.name for n in nodes if n.name in read_outside)
        kernels.append(Kernel(f"k{idx}", grp.kind, tuple(nodes), tuple(ins), outs))
    return kernels
