"""The matmul kernel kind: dot_general (any batch/contract layout) plus an elementwise epilogue.

Loop nest (after bringing each operand into a canonical layout)::

    lhs: [B, M, K] (or [B, K, M], "transposed")   rhs: [B, K, N] (or [B, N, K])
    for b, m:                                      # parallel when the work is large
        for n0 in blocks of NB:                    # generated kernel; a target may call BLAS
            acc[0:NB] = 0
            for k: a = lhs[b, m, k]; for n: acc[n] += a * rhs[b, k, n0 + n]
            C[b, m, n0:n0+NB] = acc
    for i in ndindex(result):                      # the epilogue (bias, activation, ...)
        y[i] = epi(C[i], ...)

Each operand is read through ``Strides``: op(A)[b, i, p] is A[offset(b) + i*row + p*col], with
a stride per batch dimension. Any operand whose free dims, and whose contract dims, each
flatten to one stride is read in place, whatever the order of its axes (MiniLM's head split:
q, k and v are transposed views the GEMM walks with a row stride of 384); only an operand
whose free or contract dims interleave with others is first copied into scratch in
[B, M, K] / [B, K, N] order. ``C`` is the dot result's own output buffer, an
epilogue output of the same dtype (the epilogue then runs in place: each element reads C[i]
before writing y[i]), or scratch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from rlx_core.ir import dtypes as dt
from rlx_core.ir.dtypes import DType
from rlx_core.ir.graph import Node, TensorType
from rlx_core.targets.c_common import ctype_table as ct
from rlx_core.targets.c_common.body import Body, Buffer
from rlx_core.targets.c_common.expr import RenderError
from rlx_core.targets.c_common.kernels import (
    KernelEnv,
    close_loops,
    emit_elementwise,
    is_virtual,
    open_loops,
    splits,
    two_phase,
)
from rlx_core.targets.c_common.loops import LoopPlan, Writer, identity, offset
from rlx_core.targets.c_common.row_ops import NORMS, emit_norm_rows

NB = 256  # accumulator block along N in the generated kernel (fits in L1 with its row of rhs)


@dataclass(frozen=True)
class Strides:
    """Where an operand's elements are: op(X)[b, i, j] = X[offset(b) + i * row + j * col].

    ``batch`` holds (extent, stride) per batch dimension, outermost first (the flat batch
    index b runs over them in row-major order). Strides count elements."""

    batch: tuple[tuple[int, int], ...]
    row: int
    col: int

    @staticmethod
    def dense(batch: int, rows: int, cols: int, transposed: bool = False) -> Strides:
        """[batch, rows, cols] row-major, or [batch, cols, rows] when ``transposed``."""
        return Strides(((batch, rows * cols),), 1 if transposed else cols,
                       rows if transposed else 1)

    def offset(self, bb: str) -> str:
        """C expression of batch ``bb``'s first element."""
        dims = [(e, st) for e, st in self.batch if e > 1]
        terms, inner = [], 1
        for i, (extent, stride) in enumerate(reversed(dims)):
            at = f"({bb})" if inner == 1 else f"({bb}) / {inner}"
            if i < len(dims) - 1:
                at = f"{at} % {extent}"
            terms.append(f"({at}) * {stride}")
            inner *= extent
        return " + ".join(reversed(terms)) or "0"


@dataclass(frozen=True)
class GemmSpec:
    """One (batched) GEMM: C[b] = op(A)[b] @ op(B)[b], C dense [batch, m, n] row-major.

    ``sa`` walks op(A) (rows: m, cols: k), ``sb`` walks op(B) (rows: k, cols: n)."""

    dtype: DType
    batch: int
    m: int
    n: int
    k: int
    a: str  # pointer expressions
    b: str
    c: str
    sa: Strides
    sb: Strides

    def a_at(self, bb: str) -> str:
        """C pointer to op(A)'s batch ``bb``."""
        off = self.sa.offset(bb)
        return self.a if off == "0" else f"{self.a} + {off}"

    def b_at(self, bb: str) -> str:
        """C pointer to op(B)'s batch ``bb``."""
        off = self.sb.offset(bb)
        return self.b if off == "0" else f"{self.b} + {off}"


def _flat(shape: tuple[int, ...], strides: tuple[int, ...],
          dims: tuple[int, ...]) -> tuple[int, int] | None:
    """(extent, stride) of ``dims`` read as one flattened index in the given order, or None
    when they do not flatten (a dim of another group sits between them). Extent-1 dims do not
    count; a group with no dims left gets stride 0 (its index is always 0)."""
    wide = [d for d in dims if shape[d] > 1]
    for a, b in zip(wide, wide[1:], strict=False):
        if strides[a] != strides[b] * shape[b]:
            return None
    return math.prod(shape[d] for d in dims), (strides[wide[-1]] if wide else 0)


def operand_strides(shape: tuple[int, ...], batch: tuple[int, ...], contract: tuple[int, ...],
                    lhs: bool) -> Strides | None:
    """The operand of a dot_general (row-major ``shape``) as Strides, or None if it needs a
    copy: its free dims (in order) and its contract dims (in the dot's order) must each
    flatten to one stride."""
    dense = [1] * len(shape)
    for i in range(len(shape) - 2, -1, -1):
        dense[i] = dense[i + 1] * shape[i + 1]
    st = tuple(dense)
    free = tuple(i for i in range(len(shape)) if i not in batch and i not in contract)
    f, c = _flat(shape, st, free), _flat(shape, st, contract)
    if f is None or c is None:
        return None
    (fe, fs), (ce, cs) = f, c
    # an index that is always 0 may take any stride: give it the one of a dense layout the
    # other index already matches, so BLAS sees a unit stride and a valid leading dimension
    if fe == 1:
        fs = ce if cs == 1 else 1
    if ce == 1:
        cs = fe if fs == 1 else 1
    rows, cols = ((fs, cs) if lhs else (cs, fs))
    merged: list[tuple[int, int]] = []
    for extent, stride in ((shape[d], st[d]) for d in batch if shape[d] > 1):
        if merged and merged[-1][1] == stride * extent:  # flattens with the one before
            merged[-1] = (merged[-1][0] * extent, stride)
        else:
            merged.append((extent, stride))
    return Strides(tuple(merged), rows, cols)


def _canonical_perm(rank: int, batch: tuple[int, ...], contract: tuple[int, ...],
                    lhs: bool) -> tuple[int, ...]:
    """The axis order of the dense copy: [B, M, K] for lhs, [B, K, N] for rhs."""
    free = tuple(i for i in range(rank) if i not in batch and i not in contract)
    return batch + free + contract if lhs else batch + contract + free


def _dense_copy(w: Writer, env: KernelEnv, src: Buffer, name: str, at: str, d: DType,
                batch: tuple[int, ...], contract: tuple[int, ...], lhs: bool) -> str:
    """Copy a GEMM operand that no strides describe to ``at`` (scratch), dense in canonical
    order (_canonical_perm), as the local ``name``; returns ``name``."""
    w.line(f"{ct.storage(d)}* restrict {name} = {at};")
    _permute(w, env, src, _canonical_perm(src.type.rank, batch, contract, lhs), name)
    if env.sync:
        w.line(env.sync)  # the GEMM reads rows of the copy other threads wrote
    return name


def _permute(w: Writer, env: KernelEnv, src: Buffer, perm: tuple[int, ...], dst: str) -> None:
    """dst (canonical order) = transpose(src, perm), as a strided copy."""
    shape = tuple(src.type.shape[p] for p in perm)
    n = len(shape)
    out = Buffer(dst, TensorType(src.type.dtype, shape))
    node = Node(out=_value("__perm", out.type), op="transpose", inputs=(src.ptr,),
                attrs=(("perm", perm),))
    sub = KernelEnv(env.kernel, env.index, {"__perm": node}, {src.ptr: src},
                    {"__perm": out}, env.parallel, env.fail, env.scratch, env.sync)

    def emit(b: Body, plan: LoopPlan) -> None:
        depth = open_loops(b.out, plan, 0, env.parallel(math.prod(shape), 0), False)
        b.compute(node, identity(n, tuple(range(n))))
        b.store(out, "__perm", identity(n, tuple(range(n))))
        close_loops(b.out, depth)

    body = two_phase(sub, shape, (0,) * n, emit)
    w.lines.extend("    " * (w.depth - 1) + ln for ln in body.out.lines)


def _value(name: str, t: TensorType):
    from rlx_core.ir.graph import Value

    return Value(name, t)


def generated_gemm(w: Writer, env: KernelEnv, g: GemmSpec) -> str:
    """The portable blocked loop GEMM (any dtype; f16/bf16/f32 accumulate in float)."""
    d = g.dtype
    if d.is_complex:
        acc_t = "double _Complex"  # c64 products summed in complex128, rounded once
    elif d.is_float:
        acc_t = "double" if d == dt.f64 else "float"
    else:
        acc_t = "uint64_t"  # wraps like the reference's i64 matmul followed by the cast

    def widen(x: str) -> str:
        if d.is_complex:
            return f"(double _Complex){x}"
        if d.is_float:
            return ct.load(d, x)
        return f"(uint64_t)(int64_t){x}" if d.kind is dt.Kind.INT else f"(uint64_t){x}"

    def store(x: str) -> str:
        if d.is_complex:
            return f"(float _Complex){x}"
        if d.is_float:
            return ct.store(d, x)
        return f"({ct.storage(d)}){x}"

    sa, sb = g.sa, g.sb
    a_off, b_off = sa.offset("bb"), sb.offset("bb")

    def a_at(m: str, k: str) -> str:
        return f"{g.a}[{a_off} + {m} * {sa.row} + {k} * {sa.col}]"

    pragma = env.parallel(g.batch * g.m * g.n * max(g.k, 1), 0)
    if pragma and g.batch * g.m > 1 and env.rows is None:
        w.line(pragma + (" collapse(2)" if splits(pragma) else ""))
    lo, hi = env.rows or ("0", str(g.m))  # a row run's block: its rows of C (cpu/row_split)
    w.open(f"for (int64_t bb = 0; bb < {g.batch}; ++bb)")
    w.open(f"for (int64_t m = {lo}; m < {hi}; ++m)")
    crow = f"{g.c} + bb * {g.m * g.n} + m * {g.n}"
    if sb.col != 1:  # B is [N, K]-like: a dot product per output, B contiguous in k
        w.open(f"for (int64_t n = 0; n < {g.n}; ++n)")
        w.line(f"{acc_t} acc = 0;")
        if d.is_float:
            w.line("#pragma omp simd reduction(+:acc)")
        w.open(f"for (int64_t k = 0; k < {g.k}; ++k)")
        b_at = f"{g.b}[{b_off} + n * {sb.col} + k * {sb.row}]"
        w.line(f"acc += {widen(a_at('m', 'k'))} * {widen(b_at)};")
        w.close()
        w.line(f"({crow})[n] = {store('acc')};")
        w.close()
    else:  # B is [K, N]: rank-1 updates of a block of accumulators, contiguous in n
        w.open(f"for (int64_t n0 = 0; n0 < {g.n}; n0 += {NB})")
        w.line(f"const int64_t nn = {g.n} - n0 < {NB} ? {g.n} - n0 : {NB};")
        w.line(f"{acc_t} acc[{NB}];")
        w.line("for (int64_t j = 0; j < nn; ++j) acc[j] = 0;")
        w.open(f"for (int64_t k = 0; k < {g.k}; ++k)")
        w.line(f"const {acc_t} av = {widen(a_at('m', 'k'))};")
        w.line(f"const {ct.storage(d)}* restrict brow = {g.b} + {b_off} + k * {sb.row} + n0;")
        w.line(f"for (int64_t j = 0; j < nn; ++j) acc[j] += av * {widen('brow[j]')};")
        w.close()
        w.line(f"for (int64_t j = 0; j < nn; ++j) ({crow})[n0 + j] = {store('acc[j]')};")
        w.close()
    w.close()
    w.close()
    return "generated-matmul"


def row_norm(k) -> Node | None:
    """The row normalisation a matmul kernel ends with (passes/fuse.py's place_norm), or None."""
    last = k.nodes[-1]
    return last if last.op in NORMS and k.kind == "matmul" else None


def _emit_epilogue(env: KernelEnv, w: Writer, dot: Node, c_ptr: str,
                   bounds: dict[int, tuple[str, str]] | None) -> None:
    """The epilogue reads the dot result from C; it is an elementwise kernel over it. With a
    row norm at the kernel's end, the value the norm reads is stored into C (in place: each
    element reads C at its own index first), and _norm_rows normalises it from there."""
    k = env.kernel
    norm = row_norm(k)
    inputs = {**env.inputs, dot.name: Buffer(c_ptr, dot.type)}
    outs = {o: b for o, b in env.outputs.items() if o != dot.name}
    rest = [x for x in k.nodes if x is not dot and x is not norm]
    names = tuple(o for o in k.outputs if o != dot.name)
    if norm is not None:
        if norm.inputs[0] == dot.name:
            return  # C holds what the norm reads
        outs = {norm.inputs[0]: Buffer(c_ptr, norm.type)}
        names = (norm.inputs[0],)
    sub_kernel = type(k)(k.name, "elementwise", tuple(rest), k.inputs, names)
    sub = KernelEnv(sub_kernel, env.index, {x.name: x for x in rest}, inputs, outs,
                    env.parallel, env.fail, env.scratch, env.sync, preamble=env.preamble,
                    erf=env.erf, rows=None if bounds else env.rows)
    emit_elementwise(sub, w, bounds)


# the work a row norm after the team's barrier (env.sync) is written as, whatever its size: the
# threads meet at that barrier anyway, so sharing the norm's rows out costs no wait of its own,
# where a norm under the target's smallest split (one chunk) ran on one thread while the others
# waited at the kernel's end. MiniLM b2 s8 (16 x 384 rows after the attention output and FFN2
# GEMMs, 2 threads, Zen 4, both builds in one process, FIFO): those twelve kernels 754 -> 736 us
# of thread 0's CPU time a call, the call's p50 2.010 -> 1.991 ms
AFTER_SYNC_WORK = 1 << 40


def _norm_rows(env: KernelEnv, w: Writer, c_ptr: str, rows: tuple[str, str] | None,
               after_sync: bool = False) -> None:
    """The kernel's row norm (if any) of flattened rows ``rows`` of C into its output (all
    rows, spread over the team, when None; whatever their size ``after_sync``: right after the
    team's barrier, see AFTER_SYNC_WORK)."""
    norm = row_norm(env.kernel)
    if norm is None:
        return
    if after_sync and rows is None:
        split = env.parallel
        env = replace(env, parallel=lambda work, collapse: split(max(work, AFTER_SYNC_WORK),
                                                                   collapse))
    emit_norm_rows(env, w, norm, c_ptr, rows)


# a kernel's row norm runs in its GEMM's chunks only when the rows make at least this many
# chunks of whole rows (16 rows, or whole sequences of a (batch, seq, d) activation), so the
# team has chunks to share; with fewer, the GEMM keeps its column chunks (a GEMM hook may
# also set ``norm`` to None: cpu/blas.py for GEMMs of few rows) and the norm follows a barrier
NORM_CHUNKS = 4


class BlockEpilogue:
    """A matmul's epilogue, written inside a team GEMM for the block of C one thread computed.

    Every epilogue element reads C at its own index (other inputs are broadcast or
    elementwise), so a thread can finish its block of C right after computing it: no barrier
    between the GEMM and the epilogue, no thread idle while another runs a small epilogue,
    and the block is still in that core's cache. A GEMM hook splits the work by batches,
    rows or columns of C (``axes``: the result dimension each split narrows, None when that
    axis is one element wide). Rows spread over several result dimensions (a (batch, seq, d)
    activation times a weight) narrow the outermost of them: a block of whole slices of it,
    ``row_unit`` rows each, is one range there, so the hook rounds its row blocks to
    ``row_unit``. A batch or column axis spread that way is missing, since its blocks are no
    single range, and the hook then leaves the epilogue to the kernel (after a barrier, over
    the whole result: one more pass through memory, 25 MB per FFN layer of MiniLM at batch 32).
    A kernel ending with a row norm (``row_norm``) is never narrowed by columns: each block of
    whole rows is normalised right after its epilogue (``_norm_rows``).
    """

    def __init__(self, env: KernelEnv, dot: Node, c_ptr: str, axes: dict[str, int | None],
                 row_unit: int = 1, rows: int = 1):
        self.env, self.dot, self.c_ptr, self.axes = env, dot, c_ptr, axes
        self.row_unit, self.rows = row_unit, rows  # rows: of C per batch
        self.emitted = False
        self.norm = row_norm(env.kernel)  # it needs whole rows: no block narrowed by columns

    @staticmethod
    def of(env: KernelEnv, dot: Node, c_ptr: str, lb: tuple[int, ...]) -> BlockEpilogue | None:
        k = env.kernel
        outs = [o for o in k.outputs if o != dot.name]
        if any(env.outputs[o].type.shape != dot.type.shape for o in outs):
            return None
        shape = dot.type.shape
        nb = len(lb)
        nl = len([i for i in range(env.inputs[dot.inputs[0]].type.rank)
                  if i not in dot.attr("contract")[0] and i not in lb])
        groups = {"batch": range(0, nb), "rows": range(nb, nb + nl),
                  "cols": range(nb + nl, len(shape))}
        axes: dict[str, int | None] = {}
        unit = 1
        for name, dims in groups.items():
            wide = [d for d in dims if shape[d] > 1]
            if len(wide) <= 1:
                axes[name] = wide[0] if wide else None
            elif name == "rows":
                axes[name] = wide[0]
                unit = math.prod(shape[d] for d in dims if d > wide[0])
        if row_norm(k) is not None and len(groups["cols"]) != 1:
            return None  # the norm's rows (its last axis) are no whole rows of C
        epi = BlockEpilogue(env, dot, c_ptr, axes, unit,
                            math.prod(shape[d] for d in groups["rows"]))
        if epi.norm is not None and \
                math.prod(shape[:-1]) < NORM_CHUNKS * math.lcm(16, unit):
            epi.norm = None  # too few whole-row chunks: emit_matmul normalises after a barrier
        return epi

    def fits(self, *axes: str) -> bool:
        """Can a block narrowed along each of ``axes`` be written as one range? (Not along
        the columns when the kernel ends with a row norm, which needs whole rows.)"""
        return all(a in self.axes and not (a == "cols" and self.norm) for a in axes)

    def emit(self, w: Writer, narrow: dict[str, tuple[str, str]]) -> None:
        """Write the epilogue for this thread's block: {axis: (lo, hi)}, C expressions; a
        "rows" range counts flattened rows (multiples of ``row_unit``)."""
        flat = self._flat_rows(narrow)
        if "rows" in narrow and self.row_unit > 1:
            lo, hi = narrow["rows"]
            narrow = {**narrow, "rows": (f"({lo}) / {self.row_unit}",
                                         f"({hi}) / {self.row_unit}")}
        bounds = {self.axes[a]: r for a, r in narrow.items() if self.axes[a] is not None}
        _emit_epilogue(self.env, w, self.dot, self.c_ptr, bounds)
        if self.norm is not None:
            _norm_rows(self.env, w, self.c_ptr, flat)
        self.emitted = True

    def _flat_rows(self, narrow: dict[str, tuple[str, str]]) -> tuple[str, str]:
        """The block's rows of C counted over all batches (the row norm's rows)."""
        if "batch" not in narrow:  # one batch, or all of them
            total = math.prod(self.dot.type.shape) // self.dot.type.shape[-1]
            return narrow.get("rows", ("0", str(total)))
        b0, b1 = narrow["batch"]
        if "rows" in narrow:
            r0, r1 = narrow["rows"]
            return (f"({b0}) * {self.rows} + ({r0})", f"({b0}) * {self.rows} + ({r1})")
        return (f"({b0}) * {self.rows}", f"({b1}) * {self.rows}")


def emit_matmul(env: KernelEnv, w: Writer, gemm_hook=None) -> tuple[str, int]:
    """Render the kernel; returns (impl label, scratch bytes it needs)."""
    k = env.kernel
    dots = [n for n in k.nodes if n.op == "dot_general"]
    if len(dots) != 1:
        raise RenderError(f"kernel {k.name}: a matmul kernel holds exactly one dot_general")
    dot = dots[0]
    lhs, rhs = env.inputs[dot.inputs[0]], env.inputs[dot.inputs[1]]
    (lc, rc), (lb, rb) = dot.attr("contract"), dot.attr("batch")
    d = dot.type.dtype
    esz = math.ceil(d.bits / 8)
    bsz = math.prod(lhs.type.shape[i] for i in lb)
    m = math.prod(s for i, s in enumerate(lhs.type.shape) if i not in lc and i not in lb)
    n = math.prod(s for i, s in enumerate(rhs.type.shape) if i not in rc and i not in rb)
    kk = math.prod(lhs.type.shape[i] for i in lc)
    scratch = 0

    def take(nbytes: int) -> str:
        nonlocal scratch
        at = scratch
        scratch += -(-nbytes // 64) * 64
        return f"({ct.storage(d)}*)({env.scratch} + {at})"

    sa = operand_strides(lhs.type.shape, tuple(lb), tuple(lc), True)
    sb = operand_strides(rhs.type.shape, tuple(rb), tuple(rc), False)
    a_ptr, b_ptr = lhs.ptr, rhs.ptr
    if sa is None:
        a_ptr = _dense_copy(w, env, lhs, "lhs_c", take(lhs.type.size * esz), d, tuple(lb),
                            tuple(lc), True)
        sa = Strides.dense(bsz, m, kk)
    if sb is None:
        b_ptr = _dense_copy(w, env, rhs, "rhs_c", take(rhs.type.size * esz), d, tuple(rb),
                            tuple(rc), False)
        sb = Strides.dense(bsz, kk, n)

    norm = row_norm(k)
    epilogue = [x for x in k.nodes if x is not dot and not is_virtual(x)]
    if dot.name in env.outputs:
        c_ptr = env.outputs[dot.name].ptr
    else:
        same = [o for o in k.outputs if env.outputs[o].type.dtype == d]
        c_ptr = env.outputs[same[0]].ptr if same else take(dot.type.size * esz)
        if not same:
            w.line(f"{ct.storage(d)}* restrict dot_c = {c_ptr};")
            c_ptr = "dot_c"
    spec = GemmSpec(d, bsz, m, n, kk, a_ptr, b_ptr, c_ptr, sa, sb)
    block = BlockEpilogue.of(env, dot, c_ptr, lb) if epilogue and env.sync else None
    if m * n == 0:
        impl = "empty"
    elif kk == 0:
        w.line(f"memset({c_ptr}, 0, {dot.type.size * esz});")
        impl = "zero"
    else:
        impl = (gemm_hook(w, env, spec, block) if gemm_hook else None) or \
            generated_gemm(w, env, spec)

    if norm is not None and block is not None and block.emitted and block.norm is None:
        w.line(env.sync)  # the block epilogues are done; a row's columns came from any thread
        _norm_rows(env, w, c_ptr, None, after_sync=True)
    elif epilogue and not (block and block.emitted):
        if env.sync and impl not in ("empty",):
            w.line(env.sync)  # the epilogue's rows need not be the rows this thread computed
        _emit_epilogue(env, w, dot, c_ptr, None)
        if norm is not None:
            if env.sync:
                w.line(env.sync)  # a row's columns came from several threads
            _norm_rows(env, w, c_ptr, None, after_sync=bool(env.sync))
    return impl, scratch


__all__ = ["GemmSpec", "Strides", "emit_matmul", "generated_gemm", "offset", "operand_strides"]
