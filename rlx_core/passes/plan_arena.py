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
"""

from __future__ import annotations

from dataclasses import dataclass

from rlx_core.errors import VerifyError
from rlx_core.ir.graph import ArenaPlan, BufferSlot, Graph, Level
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

    def run(self, g: Graph, ctx: PassContext) -> Graph:
        if g.level is not Level.LIR:
            raise VerifyError(f"plan_arena expects a LIR graph, got {g.level.value} @{g.name}",
                              hint="run Fuse first: the plan places kernel outputs")
        types = g.values()
        spans = liveness(g)
        sizes = {v: align_up(types[v].type.nbytes, self.alignment) for v in spans}
        alias = aliases(g, spans) if self.alias_reshapes else {}
        group = dict(spans)  # a root lives until the last reader of any of its aliases
        for v, r in alias.items():
            group[r] = (group[r][0], max(group[r][1], spans[v][1]))
            del group[v]
        offsets = place({v: sizes[v] for v in group}, group, self.alignment)
        slots = tuple(BufferSlot(v, offsets[alias.get(v, v)], sizes[v],
                                 *(spans[v] if v in alias else group[v]), alias.get(v, ""))
                      for v in spans)
        peak = max((s.offset + s.size for s in slots), default=0)
        plan = ArenaPlan(slots, peak, sum(sizes.values()), self.alignment)
        out = g.with_nodes(g.nodes)
        out.kernels = g.kernels
        out.plan = plan
        return out
