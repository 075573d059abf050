"""Loop nests of the elementwise, reduce and opaque kernel kinds (see rlx_core/passes/fuse.py).

Each ``emit_*`` function writes the body of one kernel function into a Writer and returns the
implementation label recorded in Program.info. Loop bodies are emitted twice: a dry run that
records every access, then the real one over the merged loop nest (loops.LoopPlan).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from rlx_core.ir import dtypes as dt
from rlx_core.ir.graph import Kernel, Node, Shape, row_strides
from rlx_core.ir.ops import MIR_OPS
from rlx_core.targets.c_common import ctype_table as ct
from rlx_core.targets.c_common.body import INDEX_MAP_OPS, Body, Buffer
from rlx_core.targets.c_common.expr import RenderError, _cast
from rlx_core.targets.c_common.loops import (
    Affine,
    AxisMap,
    LoopPlan,
    Writer,
    identity,
    var,
)
from rlx_core.targets.c_common.names import c_comment


@dataclass
class KernelEnv:
    """What a kernel emitter may use: its nodes, its pointer parameters and the hooks."""

    kernel: Kernel
    index: int
    nodes: dict[str, Node]
    inputs: dict[str, Buffer]  # kernel input value -> const pointer parameter
    outputs: dict[str, Buffer]  # kernel output value -> pointer parameter
    parallel: Callable[[int, int], str | None]  # (work, collapse) -> pragma line or None
    fail: str  # C statement prefix reporting a runtime error: f"{fail}(kernel, value, size)"
    scratch: str = "scratch"
    # a statement making every thread of the team wait for the others, written between two
    # steps of one kernel where the second reads what the first wrote (team-mode CPU kernels,
    # see rlx_core/targets/cpu/team.py); empty when a kernel runs on one thread
    sync: str = ""
    # parameters a hook adds to the kernel beyond its buffers (a prepacked weight): (C
    # declaration, the expression the entry point passes); they come before ``scratch``
    extra_args: list[tuple[str, str]] = field(default_factory=list)
    # the kernel's C function name, and file-scope C a hook writes before the kernel (a GEMM's
    # tile epilogue function, cpu/tile_epilogue.py)
    fn: str = ""
    preamble: list[str] = field(default_factory=list)
    # output value -> the donated input value it may be written over (runtime/donation.py)
    in_place: dict[str, str] = field(default_factory=dict)
    # set by a matmul hook whose GEMM stores its output over the donated input itself (the
    # cpu's update store, cpu/update_store.py); a donated matmul output without it is refused
    stores_in_place: bool = False
    # (C function, file-scope C defining it) that an f32/f16/bf16 erf calls instead of the
    # prelude's rlx_erf_f; a body that calls it puts the definition in ``preamble``
    # (two_phase). The cpu's GEMM hook sets it for their epilogues (cpu/epilogue_erf.py)
    erf: tuple[str, str] | None = None
    # bytes of stack a serial elementwise kernel may use for an inline transcendental's results
    # computed in one flat pass first (``_hoisted``); 0: never (targets with small stacks)
    hoist_bytes: int = 0
    # the block of rows (leading-axis indices, C expressions lo, hi) this call writes, read
    # from the kernel's parameters ROW_ARGS: the cpu team splits small row-wise kernels by
    # rows (cpu/row_split.py); None: the whole tensor
    rows: tuple[str, str] | None = None

    @property
    def buffers(self) -> dict[str, Buffer]:
        return {**self.inputs, **self.outputs}


ROW_ARGS = ("rlx_r0", "rlx_r1")  # a row-split kernel's row bounds (KernelEnv.rows)


def is_virtual(n: Node) -> bool:
    return n.op == "broadcast_in_dim" or (n.op == "constant" and
                                          not isinstance(n.attr("value"), tuple))


def splits(pragma: str) -> bool:
    """Does ``pragma`` share the next loop's iterations out (so ``collapse`` applies)?"""
    return pragma.startswith("#pragma omp parallel for") or pragma.startswith("#pragma omp for")


def open_loops(w: Writer, plan: LoopPlan, group: int, pragma: str | None,
               collapse_all: bool, bounds: dict[int, tuple[str, str]] | None = None) -> int:
    """Open the loops of ``group``; ``bounds`` narrows original variables to [lo, hi)."""
    loops = plan.of_group(group)
    if pragma and loops:
        # keep the innermost loop out of the collapse so it stays contiguous (vectorised)
        n = len(loops) if collapse_all else max(1, len(loops) - 1)
        w.line(pragma + (f" collapse({n})" if n > 1 and splits(pragma) else ""))
    for k, lp in loops:
        name = plan.name(k)
        lo, hi = "0", str(lp.extent)
        narrowed = [v for v in lp.olds if bounds and v in bounds]
        if narrowed:
            if len(lp.olds) != 1:
                raise RenderError(f"loop {name}: a narrowed variable was merged with others")
            lo, hi = bounds[narrowed[0]]
        w.open(f"for (int64_t {name} = {lo}; {name} < {hi}; ++{name})")
    return len(loops)


def close_loops(w: Writer, count: int) -> None:
    for _ in range(count):
        w.close()


def two_phase(env: KernelEnv, extents: tuple[int, ...], groups: tuple[int, ...],
              emit: Callable[[Body, LoopPlan], None], merge: bool = True) -> Body:
    """Dry-run ``emit`` to collect accesses, plan the loop nest, emit for real."""
    nodes, bufs, n = env.nodes, env.buffers, len(extents)
    erf = env.erf[0] if env.erf else ""
    dry = Body(nodes, bufs, None, n, erf=erf)
    emit(dry, LoopPlan.plan(extents, groups, [], merge=False))
    plan = LoopPlan.plan(extents, groups, dry.accesses, merge=merge)
    real = Body(nodes, bufs, plan, n, erf=erf)
    emit(real, plan)
    if env.erf and real.erf_called and env.erf[1] not in env.preamble:
        env.preamble.append(env.erf[1])
    return real


# ---- elementwise ------------------------------------------------------------------------------


def emit_elementwise(env: KernelEnv, w: Writer,
                     bounds: dict[int, tuple[str, str]] | None = None) -> str:
    """for i in ndindex(out): temporaries in node order; store the kernel outputs.

    With ``bounds`` ({dimension: (lo, hi)} as C expressions) only that block of the index
    space is written, by the calling thread alone (no pragma): a GEMM epilogue finishing
    the block of C its thread computed (matmul.BlockEpilogue).
    """
    k = env.kernel
    shape = env.outputs[k.outputs[0]].type.shape
    for o in k.outputs:
        if env.outputs[o].type.shape != shape:
            raise RenderError(f"kernel {k.name}: outputs of different shapes in one loop")
    n = len(shape)
    amap = identity(n, tuple(range(n)))
    work = math.prod(shape)

    if env.rows is not None and bounds is None:  # this call's rows only, on one thread
        bounds = {0: env.rows}
        env, k = _hoisted(env, w, shape, env.rows)
    pragma = env.parallel(work, 0) if bounds is None else None
    if pragma is None and bounds is None:
        env, k = _hoisted(env, w, shape)

    def emit(b: Body, plan: LoopPlan) -> None:
        depth = open_loops(b.out, plan, 0, pragma, collapse_all=False, bounds=bounds)
        for node in k.nodes:
            if node.type.shape != shape or (is_virtual(node) and node.name not in k.outputs):
                continue  # read through index maps by whoever needs it
            b.compute(node, amap)
        for o in k.outputs:
            node = env.nodes.get(o)
            src = env.in_place.get(o)
            if src and node is not None and node.op == "select" and node.inputs[2] == src:
                b.store_select_in_place(env.outputs[o], o, amap, node.inputs[0], env.inputs[src])
            else:
                b.store(env.outputs[o], o, amap)
        close_loops(b.out, depth)

    # a narrowed variable keeps a loop of its own (merging would change what lo, hi count)
    body = two_phase(env, shape, (0,) * n, emit, merge=not bounds)
    w.lines.extend("    " * (w.depth - 1) + line for line in body.out.lines)
    return "generated-elementwise"


# inline transcendentals of the prelude (rlx_exp_f, ...): the compiler vectorises their loop
HOIST_OPS = ("exp", "tanh", "erf", "logistic")
# a last axis this short leaves a loop nest's inner loop a vector or less of work, with a
# remainder: a 10-class head's softmax gradient exp(log p) * s - g over 128 x 10 took 1.77 us
# as the nest and 0.59 us with the exps in one flat pass over the 1280 contiguous values first
# (C harness, Emerald Rapids, one thread, same bits)
HOIST_INNER = 16


def _hoisted(env: KernelEnv, w: Writer, shape: Shape, rows: tuple[str, str] | None = None
             ) -> tuple[KernelEnv, Kernel]:
    """A serial elementwise kernel whose last axis is short: each inline transcendental of a
    kernel input of the output's shape (read at the same index) is computed first in one flat
    loop into a stack array (at most ``env.hoist_bytes`` in all), which the nest then reads
    as an input. With ``rows`` (lo, hi of the leading axis) only those rows' values are
    computed. Returns the kernel and env the nest is written from."""
    k = env.kernel
    n = math.prod(shape)
    if not env.hoist_bytes or len(shape) < 2 or shape[-1] >= HOIST_INNER or n <= shape[-1]:
        return env, k
    picked: list[Node] = []
    for node in k.nodes:
        x = node.inputs[0] if node.inputs else ""
        if (node.op in HOIST_OPS and not (node.op == "erf" and env.erf)
                and node.type.shape == shape and node.name not in k.outputs
                and x in env.inputs and env.inputs[x].type.shape == shape
                and node.type.dtype == dt.f32 and env.inputs[x].type.dtype == dt.f32
                and (len(picked) + 1) * n * 4 <= env.hoist_bytes):
            picked.append(node)
    if not picked:
        return env, k
    from rlx_core.targets.c_common.expr import render

    inputs = dict(env.inputs)
    for j, node in enumerate(picked):
        arr = f"rlx_pre{j}"
        x = env.inputs[node.inputs[0]].ptr
        w.line(f"float {arr}[{n}];")
        lo, hi = ("0", str(n)) if rows is None else (f"({rows[0]}) * {n // shape[0]}",
                                                      f"({rows[1]}) * {n // shape[0]}")
        w.line(f"for (int64_t i = {lo}; i < {hi}; ++i) {arr}[i] = "
               f"{render(node.op, dict(node.attrs), [f'{x}[i]'], [dt.f32], dt.f32)};")
        inputs[node.name] = Buffer(arr, node.type)
    gone = {node.name for node in picked}
    rest = tuple(x for x in k.nodes if x.name not in gone)
    sub = type(k)(k.name, k.kind, rest, (*k.inputs, *gone), k.outputs)
    return replace(env, kernel=sub, nodes={x.name: x for x in rest}, inputs=inputs), sub


# ---- reduce -----------------------------------------------------------------------------------

_INIT_FLOAT = {"reduce_sum": "0.0", "reduce_prod": "1.0", "reduce_max": "-INFINITY",
               "reduce_min": "INFINITY"}


def _ancestors(k: Kernel, root: Node, nodes: dict[str, Node]) -> set[str]:
    seen: set[str] = set()
    todo = list(root.inputs)
    while todo:
        v = todo.pop()
        if v in nodes and v not in seen:
            seen.add(v)
            todo.extend(nodes[v].inputs)
    return seen


def _init(op: str, d: dt.DType) -> str:
    if d.is_complex:  # sums and products only: complex values are not ordered
        return "0" if op == "reduce_sum" else "1"
    if d == dt.bool_:
        return "0" if op in ("reduce_sum", "reduce_max") else "1"
    if d.is_float:
        return _INIT_FLOAT[op]
    lo, hi = ct.INT_BOUNDS[d.name]
    if op == "reduce_max":
        return ct.int_literal(lo, d)
    if op == "reduce_min":
        return ct.int_literal(hi, d)
    return "0" if op == "reduce_sum" else "1"


def _combine(op: str, d: dt.DType, acc: str, x: str) -> str:
    if d == dt.bool_:
        return f"{acc} |= {x};" if op in ("reduce_sum", "reduce_max") else f"{acc} &= {x};"
    if op in ("reduce_sum", "reduce_prod"):
        sym = "+" if op == "reduce_sum" else "*"
        if d.is_complex:
            return f"{acc} {sym}= (double _Complex){x};"
        if d.is_float:
            return f"{acc} {sym}= (double){x};"
        wide = "(uint64_t)(int64_t)" if d.kind is dt.Kind.INT else "(uint64_t)"
        return f"{acc} {sym}= {wide}{x};"
    if d.is_float:
        fn = ("rlx_max" if op == "reduce_max" else "rlx_min") + ("_d" if d == dt.f64 else "_f")
        return f"{acc} = {fn}({acc}, {x});"
    cmp = ">" if op == "reduce_max" else "<"
    return f"if ({x} {cmp} {acc}) {acc} = {x};"


def _finish(op: str, d: dt.DType, acc: str) -> str:
    if d.is_complex:
        return f"(float _Complex){acc}"
    if op in ("reduce_sum", "reduce_prod") and d.is_float:
        return ct.round_to(d, f"(float){acc}") if d != dt.f64 else acc
    return f"({ct.value(d)}){acc}"


def _after_reduce(env: KernelEnv, b: Body, red: Node, before: set[str], rmap: AxisMap) -> None:
    """The kernel's nodes after its reduction ``red`` (all but ``before``, its ancestors), at
    the reduced index ``rmap``, then the kernel's outputs stored."""
    for node in env.kernel.nodes:
        if node.name in before or node is red or is_virtual(node):
            continue
        b.compute(node, rmap)
    for o in env.kernel.outputs:
        b.store(env.outputs[o], o, rmap)


def emit_reduce(env: KernelEnv, w: Writer) -> str:
    """for o in kept: acc = init; for r in reduced: producers; combine; consumers; store."""
    k = env.kernel
    reds = [n for n in k.nodes if n.op in MIR_OPS and MIR_OPS[n.op].category == "reduce"]
    if len(reds) != 1:
        raise RenderError(f"kernel {k.name}: a reduce kernel needs exactly one reduction")
    red = reds[0]
    xname = red.inputs[0]
    xshape: Shape = (env.buffers[xname].type if xname in env.buffers else
                     env.nodes[xname].type).shape
    axes = (red.attr("axis"),) if red.op == "argmax" else tuple(red.attr("axes"))
    kept = tuple(a for a in range(len(xshape)) if a not in axes)
    nk, n = len(kept), len(xshape)
    extents = tuple(xshape[a] for a in kept) + tuple(xshape[a] for a in axes)
    groups = (0,) * nk + (1,) * len(axes)
    var_of_axis = tuple(kept.index(a) if a in kept else nk + axes.index(a) for a in range(n))
    xmap = identity(n, var_of_axis)
    rmap = identity(n, tuple(range(nk)))
    before = _ancestors(k, red, env.nodes)
    d = env.buffers[xname].type.dtype if xname in env.buffers else env.nodes[xname].type.dtype
    work = math.prod(xshape)
    if red.op != "argmax" and n - 1 in kept and xshape[-1] >= COLUMN_MIN and env.rows is None:
        return _emit_column_reduce(env, w, red, xname, xshape, axes, before, d)

    # a row-split call (env.rows) sums its rows of the first kept axis, which is axis 0
    rows = {0: env.rows} if env.rows is not None and kept[:1] == (0,) else None
    if env.rows is not None and rows is None:
        raise RenderError(f"kernel {k.name}: rows of a reduction over its leading axis")

    def emit(b: Body, plan: LoopPlan) -> None:
        pragma = env.parallel(work, 0) if rows is None else None
        outer = open_loops(b.out, plan, 0, pragma, collapse_all=True, bounds=rows)
        acc = b.fresh("acc")
        if red.op == "argmax":
            b.out.line(f"{ct.value(d)} {acc} = 0;")
            b.out.line(f"int64_t {acc}_i = -1;")
        else:
            b.out.line(f"{ct.accumulator(d, red.op)} {acc} = {_init(red.op, d)};")
        inner_loops = plan.of_group(1)
        if red.op == "reduce_sum" and d.is_float and len(inner_loops) == 1 and b.plan:
            b.out.line(f"#pragma omp simd reduction(+:{acc})")
        inner = open_loops(b.out, plan, 1, None, collapse_all=True)
        for node in k.nodes:
            if node.name in before and not is_virtual(node):
                b.compute(node, xmap)
        x = b.value(xname, xmap)
        if red.op == "argmax":
            pos = plan.coord(nk) if b.plan is not None else "0"
            b.out.line(f"if ({acc}_i < 0 || ({acc} == {acc} && ({x} > {acc} || {x} != {x}))) "
                       f"{{ {acc} = {x}; {acc}_i = {pos}; }}")
        else:
            b.out.line(_combine(red.op, d, acc, x))
        close_loops(b.out, inner)
        t = b.fresh()
        res = f"({ct.value(red.type.dtype)}){acc}_i" if red.op == "argmax" else \
            _finish(red.op, d, acc)
        b.out.line(f"const {ct.value(red.type.dtype)} {t} = {res};")
        b.temps[red.name] = (t, rmap)
        _after_reduce(env, b, red, before, rmap)
        close_loops(b.out, outer)

    body = two_phase(env, extents, groups, emit, merge=red.op != "argmax" and rows is None)
    w.lines.extend("    " * (w.depth - 1) + line for line in body.out.lines)
    return "generated-reduce"


# a reduction that keeps the input's last axis (a bias gradient: sum over the batch of a
# [B, N] matrix) runs in column order when that axis is at least COLUMN_MIN wide: a chunk of
# up to COLUMN_ACC accumulators along it, the reduced axes outside, so every load is
# contiguous and the inner loop vectorises. In row order the reduced axis is innermost and
# strided (N floats apart): the MLP step's 128 x 128 bias gradient took 24 us that way
COLUMN_MIN = 8
COLUMN_ACC = 256
# a column reduce counts each element COLUMN_SPLIT_WEIGHT times toward the target's threshold
# for sharing a kernel out (the CPU's PARALLEL_MIN_WORK, 32768), so a 128 x 128 bias gradient
# is split into column chunks. Its input is a GEMM's output that the team computed in column
# chunks too, claimed by the same threads, so each thread sums the columns already in its
# cache; serial, one thread read the other's half. The MLP step 784-128-10/128 on 2 threads
# (Emerald Rapids, both builds in one process in turns of 20 calls, SCHED_FIFO, load ~8):
# 174.0 -> 169.9 and 168.3 -> 163.6 us p50, the same bits (784-512-512-10 and batch 1024
# have no column reduce this small: unchanged)
COLUMN_SPLIT_WEIGHT = 4


def _emit_column_reduce(env: KernelEnv, w: Writer, red: Node, xname: str, xshape: Shape,
                        axes: tuple[int, ...], before: set[str], d: dt.DType) -> str:
    """for outer kept: for chunk c of the last axis: acc[c] = init; for r in reduced:
    producers; combine into acc; then for c: consumers; store (the accumulators are
    combined in the same order as in row order, one element at a time)."""
    k, n = env.kernel, len(xshape)
    outer = tuple(a for a in range(n - 1) if a not in axes)
    no, nr = len(outer), len(axes)
    nvars = no + nr + 1
    extents = tuple(xshape[a] for a in outer) + tuple(xshape[a] for a in axes) + (xshape[-1],)
    groups = (0,) * no + (1,) * nr + (2,)
    var_of_axis = tuple(outer.index(a) if a in outer else
                        no + axes.index(a) if a in axes else nvars - 1 for a in range(n))
    xmap = identity(nvars, var_of_axis)
    rmap = identity(nvars, tuple(range(no)) + (nvars - 1,))
    last, work = xshape[-1], math.prod(xshape)
    pragma = env.parallel(work * COLUMN_SPLIT_WEIGHT, 0)
    width = COLUMN_ACC
    if not any(xshape[a] > 1 for a in outer) and pragma and splits(pragma):
        # the chunks are the only parallel loop: make enough of them for a team to share
        quarter = -(-last // 4)
        width = min(COLUMN_ACC, max(32, -(-quarter // 16) * 16))
    acc_t = ct.accumulator(d, red.op)

    def emit(b: Body, plan: LoopPlan) -> None:
        loops = plan.of_group(0)
        depth = open_loops(b.out, plan, 0, pragma, collapse_all=True)
        if not loops and pragma:
            b.out.line(pragma)
        acc, c0, c1 = b.fresh("acc"), b.fresh("c"), b.fresh("c")
        b.out.open(f"for (int64_t {c0} = 0; {c0} < {last}; {c0} += {width})")
        b.out.line(f"const int64_t {c1} = {c0} + {width} < {last} ? {c0} + {width} : {last};")
        b.out.line(f"{acc_t} {acc}[{width}];")
        b.out.line(f"for (int64_t j = 0; j < {c1} - {c0}; ++j) {acc}[j] = {_init(red.op, d)};")
        col = plan.name(plan.of_group(2)[0][0]) if b.plan is not None else "0"
        bounds = {nvars - 1: (c0, c1)}
        red_depth = open_loops(b.out, plan, 1, None, collapse_all=True)
        inner = open_loops(b.out, plan, 2, None, collapse_all=True, bounds=bounds)
        for node in k.nodes:
            if node.name in before and not is_virtual(node):
                b.compute(node, xmap)
        b.out.line(_combine(red.op, d, f"{acc}[{col} - {c0}]", b.value(xname, xmap)))
        close_loops(b.out, inner + red_depth)
        inner = open_loops(b.out, plan, 2, None, collapse_all=True, bounds=bounds)
        t = b.fresh()
        b.out.line(f"const {ct.value(red.type.dtype)} {t} = "
                   f"{_finish(red.op, d, f'{acc}[{col} - {c0}]')};")
        b.temps[red.name] = (t, rmap)
        _after_reduce(env, b, red, before, rmap)
        close_loops(b.out, inner)
        b.out.close()
        close_loops(b.out, depth)

    body = two_phase(env, extents, groups, emit)
    w.lines.extend("    " * (w.depth - 1) + line for line in body.out.lines)
    return "generated-reduce"


# ---- opaque: one data-movement / indexing op ------------------------------------------------


def _copy_bytes(w: Writer, dst: str, src: str, nbytes: int) -> None:
    if nbytes:
        w.line(f"memcpy({dst}, {src}, {nbytes});")


COPY_CHUNK = 1 << 14  # bytes per memcpy when a copy is shared out (a multiple of 64)


def _copy_spread(env: KernelEnv, w: Writer, dst: str, src: str, nbytes: int,
                 elements: int) -> None:
    """A copy, in chunks shared over the threads when the target splits loops this big (one
    thread's memcpy does not reach the memory bandwidth of two)."""
    pragma = env.parallel(elements, 0)
    chunks = -(-nbytes // COPY_CHUNK)
    if not pragma or not splits(pragma) or chunks < 2:
        _copy_bytes(w, dst, src, nbytes)  # small: one thread (a team runs it on thread 0)
        return
    w.line(pragma)
    w.open(f"for (int64_t c = 0; c < {chunks}; ++c)")
    w.line(f"const int64_t at = c * {COPY_CHUNK}, len = {nbytes} - at < {COPY_CHUNK} ? "
           f"{nbytes} - at : {COPY_CHUNK};")
    w.line(f"memcpy((char*){dst} + at, (const char*){src} + at, (size_t)len);")
    w.close()


def emit_opaque(env: KernelEnv, w: Writer) -> str:
    k = env.kernel
    if len(k.nodes) != 1:
        raise RenderError(f"kernel {k.name}: an opaque kernel holds one op, got {len(k.nodes)}")
    node = k.nodes[0]
    out = env.outputs[node.name]
    op = node.op
    if op in INDEX_MAP_OPS:
        return emit_elementwise(env, w).replace("elementwise", op)
    if op == "reshape" and env.rows is not None:  # this call's rows: same bytes per row
        row = out.type.nbytes // out.type.shape[0]
        lo, hi = env.rows
        w.line(f"memcpy((char*){out.ptr} + ({lo}) * {row}, "
               f"(const char*){env.inputs[node.inputs[0]].ptr} + ({lo}) * {row}, "
               f"(size_t)(({hi}) - ({lo})) * {row});")
        return "copy"
    if op == "reshape":
        _copy_spread(env, w, out.ptr, env.inputs[node.inputs[0]].ptr, out.type.nbytes,
                     out.type.size)
        return "copy"
    if op == "constant":
        return _constant(node, out, w, env.rows)
    if op == "iota":
        return _iota(env, node, out, w)
    if op == "pad":
        return _pad(env, node, out, w)
    if op == "concat":
        return _concat(env, node, out, w)
    if op == "gather":
        return _gather(env, node, out, w)
    if op == "scatter_add":
        return _scatter_add(env, node, out, w)
    raise RenderError(f"kernel {k.name}: no C rule for op {c_comment(op)}",
                      hint="the target's capability table claims an op its renderer lacks")


def _constant(node: Node, out: Buffer, w: Writer, rows: tuple[str, str] | None = None) -> str:
    d = node.type.dtype
    vals = node.attr("value")
    store_t = "uint16_t" if d in (dt.f16, dt.bf16) else ct.storage(d)
    if not vals:
        return "constant"
    body = ", ".join(ct.storage_literal(v, d) for v in vals)
    w.line(f"static const {store_t} data[{len(vals)}] = {{{body}}};")
    # read the table through a volatile pointer, so the compiler cannot turn the copy into
    # stores of vector constants: GCC 12.2 with AVX-512 built [2,2,2,2,0,0,0,0] (i64) as a
    # broadcast of 2 (seen in the assembly of a TopK program's index table; -mno-avx512f or
    # -fno-builtin-memcpy gave the right values); tests/onnx/test_import_topk.py checks it
    w.line("const void* volatile src = data;")
    if rows is not None:  # this call's rows (row_split): the same bytes of the table
        row = out.type.nbytes // out.type.shape[0]
        w.line(f"memcpy((char*){out.ptr} + ({rows[0]}) * {row}, (const char*)src + "
               f"({rows[0]}) * {row}, (size_t)(({rows[1]}) - ({rows[0]})) * {row});")
        return "constant"
    _copy_bytes(w, out.ptr, "src", out.type.nbytes)
    return "constant"


def _coord_loops(env: KernelEnv, shape: Shape, emit: Callable[[Body, LoopPlan], None]) -> Body:
    n = len(shape)
    return two_phase(env, tuple(shape), (0,) * n, emit, merge=False)


def _iota(env: KernelEnv, node: Node, out: Buffer, w: Writer) -> str:
    shape, dim, d = node.type.shape, node.attr("dim"), node.type.dtype
    n = len(shape)

    def emit(b: Body, plan: LoopPlan) -> None:
        depth = open_loops(b.out, plan, 0, env.parallel(math.prod(shape), 0), False)
        val = _cast(f"(int64_t){plan.coord(dim)}", dt.i64, d)
        off = b.fmt(_row(n, shape))
        b.out.line(f"{out.ptr}[{off}] = {ct.store(d, val)};")
        close_loops(b.out, depth)

    w.lines.extend("    " * (w.depth - 1) + ln for ln in _coord_loops(env, shape, emit).out.lines)
    return "iota"


def _row(n: int, shape: Shape) -> Affine:
    total = Affine(0, (0,) * n)
    for lv, st in enumerate(row_strides(shape)):
        total = total + var(n, lv).scale(st)
    return total


def _pad(env: KernelEnv, node: Node, out: Buffer, w: Writer) -> str:
    src = env.inputs[node.inputs[0]]
    shape, d = node.type.shape, node.type.dtype
    low, ishape = node.attr("low"), src.type.shape
    n = len(shape)
    fill = ct.literal(node.attr("value"), d)

    def emit(b: Body, plan: LoopPlan) -> None:
        depth = open_loops(b.out, plan, 0, env.parallel(math.prod(shape), 0), False)
        conds = []
        for a in range(n):
            c = plan.coord(a) if b.plan is not None else "0"
            if low[a] or shape[a] != ishape[a]:
                conds.append(f"({c} >= {low[a]} && {c} < {low[a] + ishape[a]})")
        amap: AxisMap = tuple(var(n, a).shift(-low[a]) for a in range(n))
        inside = b.load(src, amap)
        val = f"(({' && '.join(conds)}) ? {inside} : {fill})" if conds else inside
        b.out.line(f"{out.ptr}[{b.fmt(_row(n, shape))}] = {ct.store(d, val)};")
        close_loops(b.out, depth)

    w.lines.extend("    " * (w.depth - 1) + ln for ln in _coord_loops(env, shape, emit).out.lines)
    return "pad"


def _concat(env: KernelEnv, node: Node, out: Buffer, w: Writer) -> str:
    ax = node.attr("axis")
    start = 0
    for name in node.inputs:
        src = env.inputs[name]
        shape = src.type.shape
        n = len(shape)
        base = start

        def emit(b: Body, plan: LoopPlan, src: Buffer = src, shape: Shape = shape,
                 base: int = base, n: int = n) -> None:
            depth = open_loops(b.out, plan, 0, env.parallel(math.prod(shape), 0), False)
            dmap = tuple(var(n, a).shift(base if a == ax else 0) for a in range(n))
            from rlx_core.targets.c_common.loops import offset
            val = b.load(src, identity(n, tuple(range(n))))
            b.out.line(f"{out.ptr}[{b.fmt(offset(dmap, out.type.shape, n))}] = "
                       f"{ct.store(src.type.dtype, val)};")
            close_loops(b.out, depth)

        body = two_phase(env, tuple(shape), (0,) * n, emit)
        w.lines.extend("    " * (w.depth - 1) + ln for ln in body.out.lines)
        start += shape[ax]
    return "concat"


def split_axis(shape: Shape, ax: int) -> tuple[int, int, int]:
    """(elements before axis ``ax``, its extent, elements after it): a row-major tensor as
    pre x size x post."""
    return math.prod(shape[:ax]), shape[ax], math.prod(shape[ax + 1:])


def _norm_index(w: Writer, env: KernelEnv, idx: str, size: int, bad: str) -> None:
    """``j`` = the index, negative ones counted from the end; out of range reports an error."""
    w.line(f"int64_t j = (int64_t){idx};")
    w.line(f"if (j < 0) j += {size};")
    w.line(f"if (j < 0 || j >= {size}) {{ {env.fail}({env.index}, (int64_t){idx}, {size}); "
           f"{bad} }}")


def _gather(env: KernelEnv, node: Node, out: Buffer, w: Writer) -> str:
    x, idx = env.inputs[node.inputs[0]], env.inputs[node.inputs[1]]
    ax = node.attr("axis")
    pre, size, post = split_axis(x.type.shape, ax)
    q = idx.type.size
    esz = ct.storage(x.type.dtype)
    w.open(f"for (int64_t p = 0; p < {pre}; ++p)")
    w.open(f"for (int64_t q = 0; q < {q}; ++q)")
    dst = f"{out.ptr} + (p * {q} + q) * {post}"
    _norm_index(w, env, f"{idx.ptr}[q]", size,
                f"memset({dst}, 0, {post} * sizeof({esz})); continue;")
    if post:
        w.line(f"memcpy({dst}, {x.ptr} + (p * {size} + j) * {post}, {post} * sizeof({esz}));")
    w.close()
    w.close()
    return "gather"


def _scatter_add(env: KernelEnv, node: Node, out: Buffer, w: Writer) -> str:
    x, idx, upd = (env.inputs[i] for i in node.inputs)
    ax = node.attr("axis")
    d = x.type.dtype
    pre, size, post = split_axis(x.type.shape, ax)
    q = idx.type.size
    total = x.type.size
    wide = d in (dt.f16, dt.bf16)
    # f16/bf16 accumulate in float and round once (the reference adds in f32)
    acc = "acc" if wide else out.ptr
    if wide:
        w.line(f"float* restrict acc = (float*){env.scratch};")
        w.line(f"for (int64_t i = 0; i < {total}; ++i) acc[i] = {ct.load(d, x.ptr + '[i]')};")
    else:
        w.line(f"if ((const void*){out.ptr} != (const void*){x.ptr}) "
               f"memcpy({out.ptr}, {x.ptr}, {x.type.nbytes});")
    w.open(f"for (int64_t p = 0; p < {pre}; ++p)")
    w.open(f"for (int64_t q = 0; q < {q}; ++q)")
    _norm_index(w, env, f"{idx.ptr}[q]", size, "continue;")
    w.open(f"for (int64_t r = 0; r < {post}; ++r)")
    dst = f"{acc}[(p * {size} + j) * {post} + r]"
    src = f"{upd.ptr}[(p * {q} + q) * {post} + r]"
    if wide:
        w.line(f"{dst} += {ct.load(d, src)};")
    elif d.is_float:
        w.line(f"{dst} = {dst} + {src};")
    else:
        u = ct.UNSIGNED[d.name]
        w.line(f"{dst} = ({ct.storage(d)})(({u}){dst} + ({u}){src});")
    w.close()
    w.close()
    w.close()
    if wide:
        w.line(f"for (int64_t i = 0; i < {total}; ++i) {out.ptr}[i] = {ct.store(d, 'acc[i]')};")
    elif d == dt.bool_:
        w.line(f"for (int64_t i = 0; i < {total}; ++i) {out.ptr}[i] = {out.ptr}[i] != 0;")
    return "scatter_add"


def scratch_bytes(kernel: Kernel, types: dict[str, object]) -> int:
    """Scratch a kernel of a non-matmul kind needs (scatter_add of f16/bf16)."""
    for n in kernel.nodes:
        if n.op == "scatter_add" and n.type.dtype in (dt.f16, dt.bf16):
            return 4 * n.type.size
    return 0
