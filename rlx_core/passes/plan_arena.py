"""PlanArena: place every kernel-to-kernel buffer in one arena by liveness (LIR -> LIR).

Each kernel output that the graph does not return gets a slot; graph outputs get their own
allocations (they outlive the call), and graph inputs and parameters belong to the caller. A
slot is alive from the kernel that writes it (``first``) to the last kernel that reads it
(``last``), both inclusive: a kernel never writes over a buffer it is still reading. Placement
is greedy: largest slot first, each at the lowest aligned offset that no slot alive at the same
time occupies. Sizes are rounded up to the alignment, so every slot starts aligned and
``naive_bytes`` (one buffer per value) compares like for like with ``peak_bytes``.

A reshape is the same bytes in the same order under another shape, so a reshape kernel's
output *aliases* its input when both are arena slots: it gets the input's offset, the root's
span grows to the alias's last reader, and the kernel has nothing to copy (a renderer may skip
it; one that copies anyway writes the bytes onto themselves). MiniLM's head split and merge
are 27 reshapes a call.

A kernel may also write its output *over* an input that dies there (``BufferSlot.over``), where
the target allows it (``in_place_shares``): the input is read only at the index of the output
element written from it (an elementwise kernel's operand at the output's shape, a fused
convolution's residual), so each element is read before it is overwritten. A 1x1 convolution
of small K with a residual is bound by the stream it writes; over the residual it writes lines
it has just read (ResNet-50's 64->256 at 28x28, issue 23). The target must render such a pair
without ``restrict`` and must not write the output before it has read the input's element
there (a partial sum stored early would be one), so only a target that says which kernels
keep that promise gets such shares (its ``arena_in_place``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from rlx_core.errors import VerifyError
from rlx_core.ir.graph import ArenaPlan, BufferSlot, Graph, Kernel, Level
from rlx_core.ir.ops import is_elementwise
from rlx_core.ir.ops.collective import DEFERRED_OPS
from rlx_core.passes.base import PassContext


def align_up(n: int, alignment: int) -> int:
    return -(-n // alignment) * alignment


def liveness(g: Graph) -> dict[str, tuple[int, int]]:
    """value -> (writing kernel, last reading kernel) for every kernel output not returned.

    A deferred collective (``DEFERRED_OPS``: started at its kernel, completed at the first
    kernel that reads its result, or at the end) reads its operands until it completes."""
    returned = set(g.outputs)
    spans: dict[str, tuple[int, int]] = {}
    for idx, k in enumerate(g.kernels):
        for i in k.inputs:
            if i in spans:
                spans[i] = (spans[i][0], max(spans[i][1], idx))
        for o in k.outputs:
            if o not in returned:
                spans[o] = (idx, idx)  # an output nobody reads lives only while it is written
    for idx, until in deferred_waits(g).items():
        for i in g.kernels[idx].inputs:
            if i in spans:
                spans[i] = (spans[i][0], max(spans[i][1], until))
    return spans


def reordered(g: Graph, order: list[int]) -> Graph:
    """``g`` with its kernels (and their nodes) in ``order``, a permutation the target chose
    (its ``kernel_order``) that keeps every kernel after the kernels writing its inputs."""
    if order == list(range(len(g.kernels))):
        return g
    kernels = [g.kernels[i] for i in order]
    done = {v.name for v in (*g.inputs, *g.params)}
    for k in kernels:
        if any(v not in done for v in k.inputs):
            raise VerifyError(f"plan_arena: the target's kernel order runs @{k.name} before "
                              "a kernel writing its input",
                              hint="the target's kernel_order must keep data dependences")
        done.update(k.outputs)
    out = g.with_nodes(tuple(n for k in kernels for n in k.nodes))
    out.kernels = kernels
    return out


def hold_through(g: Graph, spans: dict[str, tuple[int, int]],
                 phases: list[tuple[int, int]]) -> None:
    """Keep every value that kernels ``a..b`` of a phase read or write alive to ``b``, for
    each phase (a, b): the target runs those kernels side by side on several threads (the
    cpu's runs of row-wise kernels, cpu/row_split.py), so no value of the phase may take the
    bytes of another that a kernel of it touched."""
    for a, b in phases:
        for k in g.kernels[a:b + 1]:
            for v in (*k.inputs, *k.outputs):
                if v in spans:
                    spans[v] = (spans[v][0], max(spans[v][1], b))


def deferred_waits(g: Graph) -> dict[int, int]:
    """kernel index of each deferred collective -> the kernel before which it completes
    (the first kernel reading its result; ``len(g.kernels)``: at the end of the call)."""
    waits: dict[int, int] = {}
    for idx, k in enumerate(g.kernels):
        if len(k.nodes) == 1 and k.nodes[0].op in DEFERRED_OPS:
            result = k.nodes[0].name
            waits[idx] = next((j for j in range(idx + 1, len(g.kernels))
                               if result in g.kernels[j].inputs), len(g.kernels))
    return waits


def aliases(g: Graph, spans: dict[str, tuple[int, int]]) -> dict[str, str]:
    """value -> the slot whose bytes it shares: outputs of one-node reshape kernels whose
    input is an arena slot too (chains resolve to their first value)."""
    root: dict[str, str] = {}
    for k in g.kernels:
        if k.kind == "opaque" and len(k.nodes) == 1 and k.nodes[0].op == "reshape":
            n = k.nodes[0]
            src = n.inputs[0]
            if n.name in spans and src in spans:
                root[n.name] = root.get(src, src)
    return root


def reads_at_own_index(k: Kernel, src: str, shape: tuple[int, ...]) -> bool:
    """Does kernel ``k`` read ``src`` (of ``shape``, its output's) only at the index of the
    output element it computes from it? An elementwise kernel whose every node reading
    ``src`` is elementwise at that shape, or a one-node fused convolution whose only use of
    ``src`` is its residual operand."""
    uses = [n for n in k.nodes if src in n.inputs]
    if not uses:
        return False
    if k.kind == "elementwise":
        return all(is_elementwise(n.op) and tuple(n.type.shape) == tuple(shape) for n in uses)
    node = uses[0]
    return (len(k.nodes) == 1 and node.op == "conv2d_fused" and bool(node.attr("residual"))
            and node.inputs[-1] == src and list(node.inputs).count(src) == 1)


# (kernel, output, input) -> may the output be written over the input? (the target's say)
InPlaceRule = Callable[[Kernel, str, str], bool]


def in_place_shares(g: Graph, spans: dict[str, tuple[int, int]], views: dict[str, str],
                    allowed: InPlaceRule) -> dict[str, str]:
    """output -> the input slot it is written over: a kernel's only output, not returned, over
    an arena input of the same type that dies at that kernel, read only at the output
    element's own index (reads_at_own_index), where ``allowed`` says the target's kernel keeps
    that promise. Values a reshape views (``views``, either side) keep their own slots."""
    types = g.values()
    viewed = set(views) | set(views.values())
    shares: dict[str, str] = {}
    for idx, k in enumerate(g.kernels):
        if len(k.outputs) != 1 or k.outputs[0] not in spans or k.outputs[0] in viewed:
            continue
        out = k.outputs[0]
        for src in dict.fromkeys(k.inputs):
            if (src in spans and src not in viewed and src != out and spans[src][1] == idx
                    and types[src].type == types[out].type
                    and reads_at_own_index(k, src, tuple(types[out].type.shape))
                    and allowed(k, out, src)):
                shares[out] = src
                break
    return shares


def place(sizes: dict[str, int], spans: dict[str, tuple[int, int]],
          alignment: int) -> dict[str, int]:
    """Greedy first fit, largest first (ties: earlier writer, then name): value -> offset."""
    order = sorted(sizes, key=lambda v: (-sizes[v], spans[v][0], v))
    offsets: dict[str, int] = {}
    for v in order:
        first, last = spans[v]
        busy = sorted((offsets[u], offsets[u] + sizes[u]) for u in offsets
                      if spans[u][0] <= last and first <= spans[u][1] and sizes[u] > 0)
        offset = 0
        for lo, hi in busy:
            if offset + sizes[v] <= lo:
                break  # the gap before this busy range is big enough
            offset = max(offset, align_up(hi, alignment))
        offsets[v] = offset
    return offsets


@dataclass(frozen=True)
class PlanArena:
    """Liveness-based arena plan: buffers whose lifetimes do not overlap share memory."""

    name: str = "plan_arena"
    alignment: int = 64
    alias_reshapes: bool = True
    in_place: bool = True  # where the target allows it (its arena_in_place); False: never

    def run(self, g: Graph, ctx: PassContext) -> Graph:
        if g.level is not Level.LIR:
            raise VerifyError(f"plan_arena expects a LIR graph, got {g.level.value} @{g.name}",
                              hint="run Fuse first: the plan places kernel outputs")
        order = getattr(ctx.target, "kernel_order", None)
        if callable(order):
            g = reordered(g, order(g, ctx.options))
        types = g.values()
        spans = liveness(g)
        phases = getattr(ctx.target, "arena_phases", None)
        if callable(phases):
            hold_through(g, spans, phases(g, ctx.options))
        sizes = {v: align_up(types[v].type.nbytes, self.alignment) for v in spans}
        alias = aliases(g, spans) if self.alias_reshapes else {}
        rule = getattr(ctx.target, "arena_in_place", None) if self.in_place else None
        allowed = rule(g, ctx.options) if callable(rule) else None
        over = in_place_shares(g, spans, alias, allowed) if allowed is not None else {}
        root = dict(alias)  # value -> the value whose bytes it uses (chains resolved)
        for v, src in over.items():
            root[v] = root.get(src, src)
        group = dict(spans)  # a root lives until the last reader of any value on its bytes
        for v, r in root.items():
            group[r] = (group[r][0], max(group[r][1], spans[v][1]))
            del group[v]
        offsets = place({v: sizes[v] for v in group}, group, self.alignment)
        slots = tuple(BufferSlot(v, offsets[root.get(v, v)], sizes[v],
                                 *(spans[v] if v in root else group[v]), alias.get(v, ""),
                                 over.get(v, ""))
                      for v in spans)
        peak = max((s.offset + s.size for s in slots), default=0)
        plan = ArenaPlan(slots, peak, sum(sizes.values()), self.alignment)
        out = g.with_nodes(g.nodes)
        out.kernels = g.kernels
        out.plan = plan
        return out
