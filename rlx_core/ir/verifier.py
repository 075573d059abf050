"""Verifiers, one per level. Each error names the broken rule and prints the IR around the node."""

from __future__ import annotations

from rlx_core.errors import RlxError, VerifyError
from rlx_core.ir.builder import infer_type
from rlx_core.ir.graph import BufferSlot, Graph, Level, Node
from rlx_core.ir.ops import COLLECTIVE_OPS, HIR_OPS, MIR_OPS, OPS
from rlx_core.ir.printer import context


def _fail(g: Graph, node: Node | None, message: str) -> VerifyError:
    # a graph-level error (no culprit node) still shows the graph's first lines, so every
    # verifier message carries IR to look at
    where = context(g, node.out.name if node is not None else "")
    return VerifyError(f"{g.level.value} @{g.name}: {message}\n{where}",
                       hint="a pass left the IR invalid; run with trace=True to see which")


def _check_nodes(g: Graph, allowed: set[str]) -> None:
    defined: set[str] = set()
    for v in (*g.inputs, *g.params):
        if v.name in defined:
            raise _fail(g, None, f"value %{v.name} is declared twice")
        defined.add(v.name)
    types = g.values()
    for n in g.nodes:
        if n.op not in OPS:
            raise _fail(g, n, f"unknown op {n.op!r}")
        if n.op not in allowed:
            raise _fail(g, n, f"op {n.op!r} is not allowed at level {g.level.value}")
        for i in n.inputs:
            if i not in defined:
                raise _fail(g, n, f"%{n.out.name} uses %{i} before it is defined")
        if n.out.name in defined:
            raise _fail(g, n, f"value %{n.out.name} is defined twice")
        try:
            attrs, want = infer_type(n.op, [types[i].type for i in n.inputs], n.a)
        except RlxError as err:
            failed = _fail(g, n, f"ill-typed {n.op}: {err.message}")
            if isinstance(err, VerifyError):  # a narrower verifier error (V003) keeps its class
                failed = type(err)(failed.message, hint=err.hint)
            raise failed from None
        if dict(n.attrs) != attrs:
            raise _fail(g, n, f"{n.op} attributes are incomplete (expected keys {sorted(attrs)})")
        if want != n.out.type:
            raise _fail(g, n, f"{n.op} result is declared {n.out.type} but its rule gives {want}")
        defined.add(n.out.name)
    for o in g.outputs:
        if o not in defined:
            raise _fail(g, None, f"output %{o} is not defined")


def _check_lir(g: Graph) -> None:
    flat = tuple(n for k in g.kernels for n in k.nodes)
    if flat != g.nodes:
        raise _fail(g, None, "LIR nodes must be exactly the kernels' nodes, in kernel order")
    available = {v.name for v in (*g.inputs, *g.params)}
    names = set()
    for idx, k in enumerate(g.kernels):
        if k.name in names:
            raise _fail(g, None, f"kernel @{k.name} is defined twice")
        names.add(k.name)
        inner = {n.out.name for n in k.nodes}
        for n in k.nodes:
            for i in n.inputs:
                if i not in inner and i not in k.inputs:
                    raise _fail(g, n, f"kernel @{k.name} reads %{i} but does not list it as input")
        for i in k.inputs:
            if i not in available:
                raise _fail(g, None, f"kernel @{k.name} (#{idx}) reads %{i}, which no earlier "
                                     "kernel writes")
        for o in k.outputs:
            if o not in inner:
                raise _fail(g, None, f"kernel @{k.name} lists output %{o} it does not compute")
        available |= set(k.outputs)
    for o in g.outputs:
        if o not in available:
            raise _fail(g, None, f"output %{o} is internal to a kernel; list it as a kernel output")
    if g.plan is None:
        return
    types = g.values()
    slots = g.plan.slots
    for s in slots:
        if s.value not in types:
            raise _fail(g, None, f"arena slot for unknown value %{s.value}")
        if s.size < types[s.value].type.nbytes:
            raise _fail(g, None, f"arena slot %{s.value} is {s.size} bytes, value needs "
                                 f"{types[s.value].type.nbytes}")
        if s.offset + s.size > g.plan.peak_bytes:
            raise _fail(g, None, f"arena slot %{s.value} ends past peak {g.plan.peak_bytes}")
    by_value = {s.value: s for s in slots}
    for s in slots:
        if not s.alias:
            continue
        r = by_value.get(s.alias)
        if r is None or r.alias:
            raise _fail(g, None, f"arena slot %{s.value} aliases %{s.alias}, which is not a "
                                 "slot with bytes of its own")
        if (r.offset, r.size) != (s.offset, s.size) or not r.first <= s.first <= s.last <= r.last:
            raise _fail(g, None, f"arena slot %{s.value} aliases %{s.alias} but does not share "
                                 "its bytes within its live range")
    for s in slots:
        if not s.over:
            continue
        r = by_value.get(s.over)
        if r is None or r.alias or (r.offset, r.size) != (s.offset, s.size) or \
                not r.first < s.first <= r.last:
            raise _fail(g, None, f"arena slot %{s.value} is written over %{s.over}, which is "
                                 "not a slot of its bytes alive where it is written")

    def root(s: BufferSlot) -> str:  # the value whose bytes s uses
        while s.over:
            s = by_value[s.over]
        return s.alias or s.value

    for i, a in enumerate(slots):
        for b in slots[i + 1:]:
            if root(a) == root(b):
                continue  # one buffer under two names, or written over in place
            live = a.first <= b.last and b.first <= a.last
            overlap = a.offset < b.offset + b.size and b.offset < a.offset + a.size
            if live and overlap:
                raise _fail(g, None, f"arena slots %{a.value} and %{b.value} are alive together "
                                     "but overlap in memory")


def verify(g: Graph, native_composites: frozenset[str] | set[str] = frozenset()) -> Graph:
    """Check ``g`` against the rules of its level; return it unchanged or raise VerifyError.

    ``native_composites`` are HIR ops (and collectives) a target claimed natively: they may
    stay in MIR/LIR.
    """
    if g.level is Level.HIR:
        allowed = set(OPS)
    else:
        allowed = set(MIR_OPS) | (set(native_composites) & (set(HIR_OPS) | set(COLLECTIVE_OPS)))
    _check_nodes(g, allowed)
    if g.level is Level.LIR:
        _check_lir(g)
    elif g.kernels or g.plan is not None:
        raise _fail(g, None, "only LIR graphs carry kernels and an arena plan")
    return g
