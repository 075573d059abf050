"""Small row-wise kernels shared out over the cpu team by rows, as one phase.

A kernel too small to split on its own (under the renderer's PARALLEL_MIN_WORK) runs on one
thread while the others wait. A run of such kernels that are row-wise (each output row r
reads only row r of what the run itself wrote: a softmax over the last axis, a reduction
over trailing axes, an elementwise kernel, a constant table, a reshape keeping the leading
axis, a GEMM of one batch whose output row r is row r of its left operand times a weight)
can instead be run block of rows by block of rows: each thread claims a block and runs
every kernel of the run on it, one after another, and only the end of the run waits for the
other threads' blocks. The MLP step's loss head (log_softmax, the one-hot, the cross
entropy's row sums, the softmax gradient: 128 x 10 each) ran on one thread between two
GEMMs split over the team; as one run the head took 5.7-5.9 instead of 6.3-6.6 us (both
builds in one process, on a host slowed to ~45% of its speed). The output layer's GEMM before
it (h @ W2 + b2) and the input gradient's after it (dlogits @ W2, masked by the relu) joined
the run: a barrier and a wait fewer, the step's p50 0.982-0.994 of the time before in 8 of 8
rounds (both builds in one process, turns of 20 calls, SCHED_FIFO, the slowed host).

The kernels take their block as two parameters (c_common.kernels.ROW_ARGS, KernelEnv.rows);
``plan`` groups them, ``group_call`` writes the claim loop. Bits are those of the one-thread
kernels: every row is computed by the same code whoever runs it (the reductions kept here
are over each row, in the same order).

The arena reuses bytes between values, so two kernels of a run could touch the same bytes
for different rows (the head's row sums over the first rows of its one-hot). So the plan
keeps what a run touches apart until its end (``CpuTarget.arena_phases``), the kernel order
first moves a small kernel that is not row-wise out of a run (``schedule``), and at render
a kernel joins a run only if each arena byte it touches and another kernel of the run
writes (or that it writes and another touches) is the same row of a value with the same
offset and bytes per row (``_apart``): then one block's bytes are only ever touched by the
thread that claimed it.
"""

from __future__ import annotations

from dataclasses import dataclass

from rlx_core.ir.graph import Graph, Kernel
from rlx_core.ir.ops import MIR_OPS
from rlx_core.targets.c_common.body import INDEX_MAP_OPS
from rlx_core.targets.c_common.kernels import COLUMN_MIN, ROW_ARGS
from rlx_core.targets.c_common.matmul import row_norm
from rlx_core.targets.c_common.row_ops import LANES
from rlx_core.targets.cpu.env import env_flag

# rows per block: at least this many (and a multiple of LANES, the row kernels' lanes), so
# a block's work is worth a claim; 128 rows are two blocks, one per thread of two
BLOCK_ROWS = 64
MAX_BLOCKS = 16  # blocks of one run at most (the claim loop's chunks)
# a run shares out only when its kernels write at least this many elements in all: below, a
# second thread's claim and the phase the run ends cost more than they save. Measured (both
# builds in one process, in turns of 20 calls, SCHED_FIFO, Emerald Rapids on the slowed host):
# a log_softmax + exp + row sum head of 128 x W after a team GEMM, the run then a phase of its
# own before a serial column sum: W = 2 (640 elements) 0.2 us slower in 3 of 4 rounds, W = 4
# (1152) 0.9 us faster in 4 of 4, W = 10 (2688) 0.7 us, W = 32 (8320) 2.2-2.6 us; in the MLP
# step a run of 1408 elements that cut a serial chunk in three lost 1-4 us
MIN_WORK = 2048


def enabled() -> bool:
    """Row splitting is on unless ``RLX_ROW_SPLIT=0`` (an A/B switch)."""
    return env_flag("RLX_ROW_SPLIT", True)


@dataclass(frozen=True)
class RowGroup:
    """A run of row-wise kernels shared out by blocks of rows: the kernels (indices), the
    rows of their leading axis, rows per block and the number of blocks."""

    kernels: tuple[int, ...]
    rows: int
    block: int
    blocks: int


def small_kernels(g: Graph, types: dict, min_work: int) -> list[bool]:
    """Per kernel: would it run on one thread (its largest operand under ``min_work``
    elements, the renderer's PARALLEL_MIN_WORK)? The runs ``plan`` shares out are of these."""
    return [max(types[v].size for v in (*k.inputs, *k.outputs)) < min_work for k in g.kernels]


def row_inputs(k: Kernel, types: dict) -> tuple[int, frozenset[str]] | None:
    """(rows, the inputs read only at the output row) of a kernel that is row-wise over the
    leading axis of its outputs, or None. Inputs outside the set may be read at any row."""
    outs = [types[o] for o in k.outputs]
    if not outs or any(t.rank < 1 for t in outs) or len({t.shape[0] for t in outs}) != 1:
        return None
    rows = outs[0].shape[0]
    if rows < 2:
        return None
    if k.kind == "opaque":
        if len(k.nodes) != 1:
            return None
        node = k.nodes[0]
        if node.op == "constant" and isinstance(node.attr("value"), tuple):
            return rows, frozenset()
        x = types[node.inputs[0]] if node.inputs else None
        if node.op == "reshape" and x is not None and x.rank >= 1 and x.shape[0] == rows:
            return rows, frozenset(node.inputs[:1])
        if node.op in ("softmax", "log_softmax") and outs[0].rank >= 2:
            axis = node.attr("axis")
            if axis % outs[0].rank == outs[0].rank - 1 and node.type.dtype.name in ("f32",
                                                                                  "f64"):
                return rows, frozenset(node.inputs[:1])
        return None
    if k.kind == "elementwise":
        if any(t.shape != outs[0].shape for t in outs):
            return None
        return _by_index(k, types, rows, {outs[0].shape})
    if k.kind == "matmul":
        return _matmul_rows(k, types, rows)
    if k.kind == "reduce":
        reds = [n for n in k.nodes if n.op in MIR_OPS and MIR_OPS[n.op].category == "reduce"]
        if len(reds) != 1 or reds[0].op == "argmax":
            return None
        red = reds[0]
        x = types[red.inputs[0]]
        axes = tuple(red.attr("axes"))
        if 0 in axes or x.shape[0] != rows:
            return None
        if x.rank - 1 not in axes and x.shape[-1] >= COLUMN_MIN:
            return None  # the column form (kernels._emit_column_reduce) has no row bounds
        # its producers run at the reduced input's index, its consumers at the output's
        return _by_index(k, types, rows, {x.shape, outs[0].shape}, red)
    return None


def _matmul_rows(k: Kernel, types: dict, rows: int) -> tuple[int, frozenset[str]] | None:
    """(rows, aligned inputs) of a matmul kernel whose output row r is row r of its left
    operand times the right one (a GEMM of one batch, A [rows, K] contracted on its last
    axis, no row norm) and whose epilogue is elementwise at the output's index, or None.
    The right operand (a weight) is read at any row. The MLP step's output layer h @ W2 + b2
    and its input gradient (dlogits @ W2) masked by the relu then run in the head's run."""
    dots = [n for n in k.nodes if n.op == "dot_general"]
    if len(dots) != 1 or row_norm(k) is not None:
        return None
    dot = dots[0]
    (lc, _), (lb, _) = dot.attr("contract"), dot.attr("batch")
    a, b = (types.get(v) for v in dot.inputs)
    if (lb or a is None or b is None or a.rank != 2 or tuple(lc) != (1,) or b.rank != 2
            or dot.type.rank != 2 or a.shape[0] != rows or dot.inputs[0] == dot.inputs[1]
            or dot.type.dtype.name not in ("f32", "f64")  # (bf16: its own GEMM, no rows)
            or any(v not in k.inputs for v in dot.inputs)):
        return None
    return _by_index(k, types, rows, {dot.type.shape}, dot)


def _by_index(k: Kernel, types: dict, rows: int, shapes: set, red=None
              ) -> tuple[int, frozenset[str]] | None:
    """(rows, aligned inputs) of an elementwise or reduce kernel whose nodes are computed at
    an index of one of ``shapes`` (leading axis: the row), or None. An input is aligned when
    every node reading it reads it at the node's own index (same shape) or broadcasts it
    along its leading axis; a transpose or slice of a value computed in the kernel would read
    its inputs at other rows: not row-wise. ``red``: the kernel's reduction (its input read
    at the row) or its dot_general (the left operand at the row, the right one at any)."""
    inner = {n.name for n in k.nodes}
    aligned: set[str] = set()
    other: set[str] = set()
    for node in k.nodes:
        if node is red:
            ins = [v for v in node.inputs if v in k.inputs]
            if node.op == "dot_general":
                other.update(ins[1:])
                ins = ins[:1]
            aligned.update(ins)
            continue
        if node.op in INDEX_MAP_OPS and node.op != "broadcast_in_dim" and any(
                v in inner for v in node.inputs):
            return None
        for v in node.inputs:
            if v not in k.inputs:
                continue
            t = types[v]
            if node.op == "broadcast_in_dim":
                ok = (t.rank >= 1 and tuple(node.attr("dims"))[:1] == (0,) and t.shape[0] == rows
                      and node.type.shape[:1] == (rows,))
            else:
                ok = (node.op not in INDEX_MAP_OPS and node.type.shape in shapes
                      and t.shape == node.type.shape)
            (aligned if ok else other).add(v)
    return rows, frozenset(aligned - other)


def schedule(g: Graph, types: dict, small: list[bool]) -> list[int]:
    """The kernels' order with the small kernels that are not row-wise (a loss summed over
    the rows) and sit inside a run of row-wise kernels of the same rows moved after the
    row-wise kernels that follow them and read none of their outputs, so the run is not cut
    (the MLP step's loss k7 between the cross entropy's row sums k6 and the softmax
    gradient's k8, k9; its loss and bias gradient k7, k10 before the input gradient k11).
    Moved past are row-wise kernels writing arena values only (no graph output); the order
    comes before the arena plan and the donations, which follow it."""
    n = len(g.kernels)
    rows = [None] * n
    if enabled():
        for i, k in enumerate(g.kernels):
            got = row_inputs(k, types) if small[i] else None
            rows[i] = got[0] if got else None
    returned = set(g.outputs)
    order = list(range(n))
    pos = 1
    while pos < len(order) - 1:
        x, before = order[pos], order[pos - 1]
        if rows[x] is not None or not small[x] or rows[before] is None:
            pos += 1
            continue
        held: list[tuple[int, int]] = []  # (position, kernel): the small kernels that are
        moved: list[int] = []  # not row-wise, in order
        last = pos  # the position of the last kernel moved
        done: set[str] = set()
        for at in range(pos, len(order)):
            y = order[at]
            k = g.kernels[y]
            if rows[y] is None and small[y]:
                held.append((at, y))
                done.update(k.outputs)
                continue
            if (rows[y] != rows[before] or any(v in done for v in k.inputs)
                    or any(o in returned for o in k.outputs)):
                break
            moved.append(y)
            last = at
        if moved:
            kept = [y for at, y in held if at < last]
            order[pos:last + 1] = [*moved, *kept]
            pos += len(moved)
        pos += 1
    return order


def phases(g: Graph, types: dict, small: list[bool]) -> list[tuple[int, int]]:
    """The kernel spans (first, last) whose values the arena keeps apart to ``last``: each
    run, and the small kernels right after it (one serial chunk, the run's sums over rows:
    the MLP loss and bias gradient) through the kernel after them. That chunk then ends
    without a wait: one thread runs it while the others start on the next kernel
    (team_waits.phases), which must not take the bytes the chunk still reads (the MLP's input
    gradient k11 took the loss's row sums'). Deferred so, the MLP step's p10 went 1.2-3.4 us
    lower in 6 of 6 rounds (both builds in one process, turns of 20 calls, SCHED_FIFO, the
    slowed host)."""
    spans = []
    for grp in plan(g, types, None, small).values():
        last = grp.kernels[-1]
        spans.append((grp.kernels[0], last))
        end = last + 1
        while (end < len(g.kernels) and small[end] and g.kernels[end].kind != "matmul"
               and row_inputs(g.kernels[end], types) is None):
            end += 1  # a serial kernel (a small GEMM may still be split: not one)
        if end > last + 1 and end < len(g.kernels):
            spans.append((last + 1, end))
    return spans


def _block(rows: int) -> tuple[int, int]:
    """(rows per block, blocks) of ``rows``."""
    per = max(BLOCK_ROWS, -(-rows // MAX_BLOCKS))
    per = -(-per // LANES) * LANES
    return per, -(-rows // per)


def plan(g: Graph, types: dict, region, small: list[bool], min_work: int | None = None
         ) -> dict[int, RowGroup]:
    """The runs of row-wise kernels to share out: {first kernel: RowGroup}.

    ``region(value)``: (space, index, lo, hi) of the bytes a value occupies (the arena's
    byte range, or a whole caller buffer); None before the arena is planned (the plan then
    keeps each run's values apart: CpuTarget.arena_phases); ``small[i]``: kernel i would run
    on one thread (``small_kernels``: under the team threshold, a call of its own)."""
    groups: dict[int, RowGroup] = {}
    if not enabled():
        return groups
    run: list[int] = []
    touched: list[tuple[int, str, tuple, bool, bool]] = []  # kernel, value, region, write, row
    produced: set[str] = set()
    place = region or (lambda v: ("", 0, 0, 0))  # before the arena plan: no bytes yet

    def close() -> None:
        if run:
            rows = types[g.kernels[run[0]].outputs[0]].shape[0]
            work = sum(types[o].size for i in run for o in g.kernels[i].outputs)
            # GEMMs alone keep the team GEMM's own split (even row blocks, tile epilogues)
            gemms = all(g.kernels[i].kind == "matmul" for i in run)
            if work >= (MIN_WORK if min_work is None else min_work) and not gemms:
                per, blocks = _block(rows)
                if blocks >= 2:
                    groups[run[0]] = RowGroup(tuple(run), rows, per, blocks)
        run.clear()
        touched.clear()
        produced.clear()

    for i, k in enumerate(g.kernels):
        got = row_inputs(k, types) if small[i] else None
        if got is None:
            close()
            continue
        rows, aligned = got
        if run and rows != types[g.kernels[run[0]].outputs[0]].shape[0]:
            close()
        if any(v in produced and v not in aligned for v in k.inputs):
            close()  # it reads other rows of what the run wrote
        mine = [(i, v, place(v), False, v in aligned) for v in k.inputs]
        mine += [(i, v, place(v), True, True) for v in k.outputs]
        if region is not None and not all(_apart(a, b, rows, types)
                                          for a in mine for b in touched):
            close()
        run.append(i)
        touched.extend(mine)
        produced.update(k.outputs)
    close()
    return groups


def _apart(a: tuple, b: tuple, rows: int, types: dict) -> bool:
    """Can two accesses of a run (kernel, value, region, write, read by row) never touch
    the same bytes for different blocks of rows?"""
    (_, va, ra, wa, rowa), (_, vb, rb, wb, rowb) = a, b
    if not (wa or wb) or ra[:2] != rb[:2] or not (ra[2] < rb[3] and rb[2] < ra[3]):
        return True
    row_a, row_b = types[va].nbytes // rows, types[vb].nbytes // rows
    return (rowa and rowb and ra[2] == rb[2] and row_a == row_b
            and types[va].nbytes % rows == 0 and types[vb].nbytes % rows == 0)


def group_call(group: RowGroup, calls: list[str], work: str) -> str:
    """The C block running ``calls`` (the group's kernel calls, in order) over blocks of
    rows claimed from the counters ``work`` (team_runtime.rlx_team_take in the affine order: thread
    0 starts on the first blocks, so each thread keeps the rows it took in a kernel split
    the same way before), then reporting them (rlx_team_done_last: the wait for the other
    threads' blocks, or under rlx_team_defer its report only)."""
    r0, r1 = ROW_ARGS
    per, rows, blocks = group.block, group.rows, group.blocks
    body = "\n".join("        " + c.strip() for c in calls if c.strip())
    return (f"{{ int rlx_got = 0;\n"
            f"      for (int rlx_c; (rlx_c = rlx_team_take({work}, 1, {(blocks + 1) // 2}, "
            f"{blocks})) >= 0; ++rlx_got) {{\n"
            f"        const int64_t {r0} = (int64_t)rlx_c * {per}, "
            f"{r1} = {r0} + {per} < {rows} ? {r0} + {per} : {rows};\n"
            f"{body}\n"
            f"      }}\n"
            f"      rlx_team_done_last({work}, &rlx_got, {blocks}); }}")
