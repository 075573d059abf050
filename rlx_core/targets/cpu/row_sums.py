"""Sums over the rows of a row run, taken block by block inside the run (row_split.py).

A kernel after a run of row-wise kernels that sums over the run's rows (a column sum: the
MLP step's loss, its bias gradients; a GEMM contracting the rows of two operands: its
output layer's weight gradient dlogits^T h) ran after the run's wait, on column chunks that
read every row, so half of what each thread read had been written on the other core. Here
each block of the run also sums its own rows, while they are in its core's cache, into a
partial of the kernel's output kept per block (a file-scope array of the program: calls of
one program never overlap, like the team's counters). The kernel itself becomes the
combine: the block partials added in block order, then its epilogue (the SGD update, the
loss's scale) on one thread, a serial kernel after the run.

In the MLP 784-128-10/128 step the weight gradient k12, the bias gradients k10 and k13 and
the loss k7 become combines (1,280 + 138 + 1 elements).

Bits: a column sum accumulates in double as the kernel did (ctype_table.accumulator), one
double partial per block, added in block order: equal to the row-order sum unless a sum of
over 64 float values needs more than double's 53 bits (values over ~2^29 apart). A GEMM's
blocks are float partial GEMMs added in float: the sum's order changes (a few ulp).
``RLX_ROW_SUMS=0`` keeps the kernels as they were (an A/B switch).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from rlx_core.ir import dtypes as dt
from rlx_core.ir.graph import Graph, Kernel, TensorType
from rlx_core.ir.ops import MIR_OPS, is_elementwise
from rlx_core.targets.c_common import ctype_table as ct
from rlx_core.targets.c_common.body import INDEX_MAP_OPS, Body, Buffer
from rlx_core.targets.c_common.kernels import (
    KernelEnv,
    _ancestors,
    close_loops,
    is_virtual,
    open_loops,
    two_phase,
)
from rlx_core.targets.c_common.loops import LoopPlan, Writer, identity
from rlx_core.targets.cpu.env import env_flag
from rlx_core.targets.cpu.row_split import RowGroup

# the partials of one kernel, all blocks, at most this many bytes: the combine reads them all
# on one thread (a 10 x 128 weight gradient over 2 blocks: 10 KB)
MAX_BYTES = 32 * 1024
BLOCK_ARG = "rlx_c"  # the block index in the run's claim loop (row_split.group_call)
IMPL = "row-sum-combine"
IMPL_SGEMM = "row-sum-combine-sgemm"  # the blocks' partial GEMMs on the own sgemm


def enabled() -> bool:
    """Row sums in the run are on unless ``RLX_ROW_SUMS=0``."""
    return env_flag("RLX_ROW_SUMS", True)


@dataclass(frozen=True)
class RowSum:
    """A kernel summing over a run's rows: the run (its first kernel), the blocks, the
    values it reads by rows (the reduced input; a GEMM's two operands), the partial's shape
    and element type, and the elements between two blocks' partials (whole 64-byte lines)."""

    run: int
    blocks: int
    rows: int
    operands: tuple[str, ...]
    shape: tuple[int, ...]
    dtype: dt.DType
    stride: int

    @property
    def gemm(self) -> bool:
        return len(self.operands) == 2


def plan(g: Graph, types: dict, groups: dict[int, RowGroup]) -> dict[int, RowSum]:
    """{kernel index: RowSum} of the kernels after a run that sum over its rows and may take
    them block by block: every operand read by rows is the run's (written by one of its
    kernels, or read by one, or an argument of the program: complete when the run starts),
    at least one written by it, none written after it."""
    if not enabled() or not groups:
        return {}
    made = {o: i for i, k in enumerate(g.kernels) for o in k.outputs}
    found: dict[int, RowSum] = {}
    for first, grp in groups.items():
        last = grp.kernels[-1]
        wrote = {o for i in grp.kernels for o in g.kernels[i].outputs}
        seen = wrote | {v for i in grp.kernels for v in g.kernels[i].inputs}
        for j in range(last + 1, len(g.kernels)):
            got = _form(g.kernels[j], types, grp.rows)
            if got is None or j in found:
                continue
            operands, shape, dtype = got
            if not any(v in wrote for v in operands):
                continue
            if any(v in made and (made[v] > last or v not in seen) for v in operands):
                continue
            line = 64 // (8 if dtype == dt.f64 else 4)
            stride = -(-math.prod(shape) // line) * line
            if grp.blocks * stride * dtype.bits // 8 > MAX_BYTES:
                continue
            found[j] = RowSum(first, grp.blocks, grp.rows, operands, shape, dtype, stride)
    return found


def _form(k: Kernel, types: dict, rows: int) -> tuple[tuple[str, ...], tuple[int, ...],
                                                      dt.DType] | None:
    """(operands read by rows, partial shape, partial dtype) of a kernel that sums over the
    leading axis of its operands and computes the rest of its nodes at the sum's index, or
    None: a reduce_sum over axis 0 of a float input (double partials), or one f32
    dot_general contracting axis 0 of two [rows, *] operands (float partials)."""
    nodes = {n.name: n for n in k.nodes}
    if k.kind == "reduce":
        reds = [n for n in k.nodes if n.op in MIR_OPS and MIR_OPS[n.op].category == "reduce"]
        if len(reds) != 1 or reds[0].op != "reduce_sum" or tuple(reds[0].attr("axes")) != (0,):
            return None
        x = reds[0].inputs[0]
        t = types.get(x)
        if (x not in k.inputs or t is None or t.dtype not in (dt.f32, dt.f64) or t.rank < 1
                or t.shape[0] != rows):
            return None
        if any(n is not reds[0] and x in n.inputs for n in k.nodes):
            return None  # x read again after the sum: not by rows
        if any(not is_virtual(nodes[v]) for v in _ancestors(k, reds[0], nodes)):
            return None  # computed from other values first: not a buffer of the run
        return (x,), t.shape[1:], dt.f64
    if k.kind != "matmul":
        return None
    dots = [n for n in k.nodes if n.op == "dot_general"]
    if len(dots) != 1:
        return None
    dot = dots[0]
    (lc, rc), (lb, rb) = dot.attr("contract"), dot.attr("batch")
    a, b = dot.inputs
    ta, tb = types.get(a), types.get(b)
    if (lb or rb or tuple(lc) != (0,) or tuple(rc) != (0,) or a == b or ta is None
            or tb is None or ta.rank != 2 or tb.rank != 2 or ta.shape[0] != rows
            or tb.shape[0] != rows or ta.dtype != dt.f32 or tb.dtype != dt.f32
            or dot.type.dtype != dt.f32 or a not in k.inputs or b not in k.inputs):
        return None
    shape = dot.type.shape
    for n in k.nodes:
        if n is dot:
            continue
        if a in n.inputs or b in n.inputs:
            return None
        if n.op in INDEX_MAP_OPS and n.op != "broadcast_in_dim":
            return None
        if n.op in MIR_OPS and MIR_OPS[n.op].category == "reduce":
            return None
        if not is_virtual(n) and n.type.shape != shape:
            return None
    if any(types[o].shape != shape for o in k.outputs):
        return None
    return (a, b), shape, dt.f32


def updated_input(k: Kernel) -> str | None:
    """The input reduce kernel ``k``'s combine may store its output over when that input is
    donated (runtime/donation.py asks through ``CpuTarget.reduce_in_place``): one read only
    by the nodes after the sum, all elementwise at the output's shape (so at the output
    element's own index), as an SGD update ``b - c * sum`` reads the bias; else None. The
    combine (``emit``) reads it and stores the element once, after the block partials are
    added; any other form of the kernel is refused by the renderer (a fresh output)."""
    reds = [n for n in k.nodes if n.op in MIR_OPS and MIR_OPS[n.op].category == "reduce"]
    if k.kind != "reduce" or len(k.outputs) != 1 or len(reds) != 1:
        return None
    nodes = {n.name: n for n in k.nodes}
    out = nodes.get(k.outputs[0])
    before = _ancestors(k, reds[0], nodes) | {reds[0].name}
    found = []
    for v in k.inputs:
        uses = [n for n in k.nodes if v in n.inputs]
        if uses and out is not None and all(
                n.name not in before and is_elementwise(n.op)
                and tuple(n.type.shape) == tuple(out.type.shape) for n in uses):
            found.append(v)
    return found[0] if len(found) == 1 else None


def partials(prefix: str, idx: int) -> str:
    """The C name of kernel ``idx``'s per-block partials."""
    return f"{prefix}_rowsum{idx}"


def block_fn(prefix: str, idx: int) -> str:
    """The C name of the function that sums one block's rows into its partial."""
    return f"{prefix}_rowsum{idx}_block"


def block_call(prefix: str, idx: int, buffers: list[str]) -> str:
    """The run's call of the block function: the kernel's buffer arguments (``buffers``, as
    its own call passes them), the scratch pointer, the block and its rows."""
    return f"{block_fn(prefix, idx)}({', '.join(buffers)}, arena, {BLOCK_ARG}, rlx_r0, rlx_r1);"


def emit(env: KernelEnv, w: Writer, rs: RowSum, prefix: str, params: list[str],
         sgemm: str | None, blas_prefix: str | None) -> str:
    """The kernel as the combine of its block partials; its block function and the partials'
    array go to ``env.preamble``. ``params``: the kernel's buffer parameters (the block
    function takes them and the scratch pointer first, as the kernel's call passes them);
    ``sgemm``: the own sgemm's entry for a GEMM's blocks that are no tile loop
    (``_tile_loop``), else ``blas_prefix`` (cblas)."""
    idx = env.index
    part, elems = partials(prefix, idx), math.prod(rs.shape)
    c = ct.storage(rs.dtype)
    env.preamble.append(f"static {c} {part}[{rs.blocks}][{rs.stride}] "
                        f"__attribute__((aligned(64)));\n")
    head = (f"static void {block_fn(prefix, idx)}({', '.join(params)}, "
            f"unsigned char* restrict scratch, const int {BLOCK_ARG}, "
            f"const int64_t rlx_r0, const int64_t rlx_r1) {{\n")
    ptr = {v: buf.ptr for v, buf in env.buffers.items()}
    names = ", ".join(f"(void){p}" for p in ptr.values())
    tile = rs.gemm and rs.shape[0] <= TILE_M and rs.shape[1] % TILE_N == 0
    if rs.gemm:
        a, b = rs.operands
        m, n = rs.shape
        if tile:
            call = _tile_loop(ptr[a], ptr[b], f"{part}[{BLOCK_ARG}]", m, n)
        elif sgemm:
            # op(A)[i][p] = a[r0 + p][i] (rm 1, rk m); op(B)[p][j] = b[r0 + p][j]
            call = (f"    {sgemm}({m}, {n}, rlx_r1 - rlx_r0, {ptr[a]} + rlx_r0 * {m}, 1, {m}, "
                    f"{ptr[b]} + rlx_r0 * {n}, {n}, 1, {part}[{BLOCK_ARG}], {n}, 0, {n});\n")
        else:
            call = (f"    {blas_prefix}cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, {m}, "
                    f"{n}, (int)(rlx_r1 - rlx_r0), 1.0f, {ptr[a]} + rlx_r0 * {m}, {m}, "
                    f"{ptr[b]} + rlx_r0 * {n}, {n}, 0.0f, {part}[{BLOCK_ARG}], {n});\n")
        env.preamble.append(head + f"    {names}; (void)scratch;\n" + call + "}\n")
    else:
        x = rs.operands[0]
        load = ct.load(env.buffers[x].type.dtype, f"{ptr[x]}[i * {elems} + j]")
        env.preamble.append(
            head + f"    {names}; (void)scratch;\n"
            f"    double* restrict p = {part}[{BLOCK_ARG}];\n"
            f"    for (int64_t j = 0; j < {elems}; ++j) p[j] = 0.0;\n"
            f"    for (int64_t i = rlx_r0; i < rlx_r1; ++i)\n"
            f"        for (int64_t j = 0; j < {elems}; ++j) p[j] += (double){load};\n"
            "}\n")
    _combine(env, w, rs, part)
    # each output element is stored once, after its inputs at that index are read: a donated
    # input offered by updated_input (or update_store.updated_input) may be the output
    env.stores_in_place = True
    return IMPL_SGEMM if rs.gemm and sgemm and not tile else IMPL


# a block GEMM of at most TILE_M rows and whole TILE_N-column panels is one loop nest whose
# TILE_M x TILE_N accumulators stay in registers (2 zmm a row with AVX-512): no packing. The
# MLP step's 10 x 128 dW2 over a block of 64 rows: 1.0 us against 2.0-2.2 on the own sgemm
# (TSC marks in the step's C, both builds in one process), the same bits (one FMA chain per
# element in row order, as the sgemm's one K slice)
TILE_M, TILE_N = 12, 32


def _tile_loop(a: str, b: str, out: str, m: int, n: int) -> str:
    """C statements: out[i][j] = sum over the block's rows r of a[r][i] * b[r][j], by panels
    of TILE_N columns, each sum in row order (one FMA chain per element)."""
    return (f"    for (int64_t q = 0; q < {n}; q += {TILE_N}) {{\n"
            f"        float acc[{m}][{TILE_N}];\n"
            f"        for (int i = 0; i < {m}; ++i)\n"
            f"            for (int j = 0; j < {TILE_N}; ++j) acc[i][j] = 0.0f;\n"
            f"        for (int64_t r = rlx_r0; r < rlx_r1; ++r) {{\n"
            f"            const float* restrict br = {b} + r * {n} + q;\n"
            f"            for (int i = 0; i < {m}; ++i) {{\n"
            f"                const float ai = {a}[r * {m} + i];\n"
            f"                for (int j = 0; j < {TILE_N}; ++j) acc[i][j] += ai * br[j];\n"
            f"            }}\n"
            f"        }}\n"
            f"        for (int i = 0; i < {m}; ++i)\n"
            f"            for (int j = 0; j < {TILE_N}; ++j) {out}[i * {n} + q + j] = acc[i][j];\n"
            f"    }}\n")


def _combine(env: KernelEnv, w: Writer, rs: RowSum, part: str) -> None:
    """for each element of the sum: the block partials added in block order, then the
    kernel's other nodes at its index, and its outputs stored."""
    k, shape = env.kernel, rs.shape
    n = len(shape)
    amap = identity(n, tuple(range(n)))
    sums = [x for x in k.nodes if x.op in ("reduce_sum", "dot_general")]
    total = sums[0]
    view = TensorType(rs.dtype, shape)
    env.inputs.update({f"@part{b}": Buffer(f"{part}[{b}]", view) for b in range(rs.blocks)})
    out_t = total.type.dtype

    def emit_body(b: Body, plan: LoopPlan) -> None:
        depth = open_loops(b.out, plan, 0, None, collapse_all=False)
        acc = b.fresh("acc")
        vals = [b.value(f"@part{i}", amap) for i in range(rs.blocks)]
        if rs.gemm:
            b.out.line(f"const float {acc} = {' + '.join(vals)};")
            t = acc
        else:  # the column sum's double accumulator, rounded as the reduce kernel does
            b.out.line(f"double {acc} = 0.0;")
            for v in vals:
                b.out.line(f"{acc} += {v};")
            t = b.fresh()
            fin = ct.round_to(out_t, f"(float){acc}") if out_t != dt.f64 else acc
            b.out.line(f"const {ct.value(out_t)} {t} = {fin};")
        b.temps[total.name] = (t, amap)
        before = _ancestors(k, total, env.nodes)
        for node in k.nodes:
            if node is total or node.name in before or is_virtual(node):
                continue
            b.compute(node, amap)
        for o in k.outputs:
            b.store(env.outputs[o], o, amap)
        close_loops(b.out, depth)

    body = two_phase(env, shape, (0,) * n, emit_body)
    w.lines.extend("    " * (w.depth - 1) + line for line in body.out.lines)
