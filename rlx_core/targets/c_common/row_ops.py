"""Row kernels: HIR normalisations a C target keeps whole (softmax, log_softmax, layer_norm,
rms_norm), each one loop over rows with every pass over a row done while it is in L1.

Why: their common-IR forms are four or five kernels (a reduction, an elementwise pass that
reads it, another reduction, another pass), each a full sweep of the tensor through memory.
On MiniLM at batch 32 the attention softmax alone (25 MB of scores per layer) took 68 of
773 ms as four kernels. Written whole, one row of scores (128 floats) is read from memory
once and the later passes hit L1::

    softmax       for p in rows:                   # the axis is innermost when post == 1
                      m = max_r x[p, r]
                      s = sum_r (y[p, r] = exp(x[p, r] - m))      # accumulated in double
                      y[p, r] /= s                  # log_softmax: y = x - m - log(s)

    layer_norm    for p in rows:                   # always the last axis
                      mean = sum_r x / n;  var = sum_r (x - mean)^2 / n    # double sums
                      y = (x - mean) / sqrt(var + eps) * w + b              # rms_norm: no mean
                      (NaN rows where var overflowed: see decompositions._rstd)

Rows narrower than LANES (a 10-class head) are done sixteen at a time, one row per vector lane
(``_softmax_lanes``), the same steps per row.

The arithmetic is the decomposition's, step for step (dispatch/decompositions.py): the same
f32 operations in the same order, the sums in a double accumulator as generated reductions
keep them (kernels.emit_reduce), so a native and a common-IR compile agree to rounding.
NaN and infinities propagate as they do there (a NaN anywhere in a row makes the row NaN).
Only f32 and f64 are claimed (targets/cpu/caps.py); f16/bf16 keep the common-IR route.
"""

from __future__ import annotations

import math

from rlx_core.ir import dtypes as dt
from rlx_core.ir.graph import Node
from rlx_core.targets.c_common import ctype_table as ct
from rlx_core.targets.c_common.expr import RenderError, render
from rlx_core.targets.c_common.kernels import KernelEnv, split_axis, splits
from rlx_core.targets.c_common.loops import Writer

ROW_OPS: tuple[str, ...] = ("softmax", "log_softmax", "layer_norm", "rms_norm")
ROW_DTYPES: tuple[str, ...] = ("f32", "f64")
NORMS: tuple[str, ...] = ("layer_norm", "rms_norm")  # the ones a matmul kernel may end with


def _fn(op: str, arg: str, d: dt.DType) -> str:
    """The C expression of the unary MIR ``op`` on ``arg``, as generated kernels spell it."""
    return render(op, {}, [arg], [d], d)


def emit_row_op(env: KernelEnv, w: Writer, node: Node) -> str:
    """Write the loop of one row kernel into ``w`` and return its impl label."""
    d = node.type.dtype
    if d.name not in ROW_DTYPES:
        raise RenderError(f"{node.op} on {d} has no row kernel",
                          hint="the capability table claims only f32 and f64 row ops")
    x = env.inputs[node.inputs[0]].ptr
    y = env.outputs[node.name].ptr
    shape = node.type.shape
    if node.op in ("softmax", "log_softmax"):
        rank = len(shape)
        axis = node.attr("axis")
        axis = axis + rank if axis < 0 else axis
        pre, n, post = split_axis(shape, axis)
        _softmax(env, w, d, x, y, pre, n, post, node.op == "log_softmax")
    else:
        emit_norm_rows(env, w, node, x, None)
    return f"row-{node.op.replace('_', '-')}"


def emit_norm_rows(env: KernelEnv, w: Writer, node: Node, x: str,
                   rows: tuple[str, str] | None) -> None:
    """The layer_norm / rms_norm ``node`` of rows read from ``x`` (a pointer holding the
    node's input, which may be its own output buffer: each element is read before it is
    written) into the node's output: all rows spread over the team, or, with ``rows`` (C
    expressions lo, hi of the flattened [rows, last axis] view), those rows in one serial
    loop (a matmul kernel's chunk of whole rows, c_common/matmul.py)."""
    d = node.type.dtype
    if d.name not in ROW_DTYPES:
        raise RenderError(f"{node.op} on {d} has no row kernel",
                          hint="the capability table claims only f32 and f64 row ops")
    shape = node.type.shape
    pre, n = math.prod(shape[:-1]), shape[-1] if shape else 1
    extra = [env.inputs[v].ptr for v in node.inputs[1:]]
    _norm(env, w, d, x, env.outputs[node.name].ptr, pre, n, extra, float(node.attr("eps")),
          node.op == "layer_norm", rows)


def _rows(env: KernelEnv, w: Writer, pre: int, post: int, n: int) -> None:
    """Open the loop over rows ``p`` (and, for an inner axis, columns ``q``), spread over the
    team like any generated loop, or over this call's rows (env.rows); the row's first
    element is at ``base``."""
    lo, hi = _row_range(env, pre)
    pragma = env.parallel(pre * n * post, 0) if env.rows is None else None
    if pragma:
        w.line(pragma + (" collapse(2)" if post > 1 and splits(pragma) else ""))
    w.open(f"for (int64_t p = {lo}; p < {hi}; ++p)")
    if post > 1:
        w.open(f"for (int64_t q = 0; q < {post}; ++q)")
        w.line(f"const int64_t base = p * {n * post} + q;")
    else:
        w.line(f"const int64_t base = p * {n};")


# rows narrower than this (a 10-class head's log_softmax) run LANES rows side by side, one per
# vector lane: one row per step left each pass a few scalar or masked iterations around a
# horizontal reduction. A C harness on the 2-core Zen 4 VM, log_softmax of 128 x 10 f32:
# 6.6 us one row at a time, 2.2 us in lanes, 2.5 us as the decomposition's four loops
LANES = 16


def _softmax_lanes(env: KernelEnv, w: Writer, d: dt.DType, x: str, y: str, pre: int, n: int,
                   log: bool) -> None:
    """Blocks of LANES contiguous rows, each pass a loop over the row's n elements outside
    a loop over the block's rows (which the compiler vectorises): the same steps per row.
    Every block loop has a constant trip count (a last block of fewer rows gets its own copy):
    with a variable one the harness above took 5.7 instead of 2.2 us."""
    t = ct.value(d)
    full, rest = divmod(pre, LANES)
    lo, hi = _row_range(env, pre)
    blocks = str(full + (rest > 0))
    if env.rows is not None:  # this call's rows: whole blocks (row_split's chunks are)
        lo, blocks = f"({lo}) / {LANES}", f"(({hi}) + {LANES - 1}) / {LANES}"
    pragma = env.parallel(pre * n, 0) if env.rows is None else None
    if pragma:
        w.line(pragma)
    w.open(f"for (int64_t blk = {lo}; blk < {blocks}; ++blk)")
    w.line(f"const int64_t p0 = blk * {LANES};")
    if rest:
        w.open(f"if (blk < {full})")
        _lanes_block(w, d, t, x, y, n, LANES, log)
        w.close()
        w.open("else")
        _lanes_block(w, d, t, x, y, n, rest, log)
        w.close()
    else:
        _lanes_block(w, d, t, x, y, n, LANES, log)
    w.close()


def _lanes_block(w: Writer, d: dt.DType, t: str, x: str, y: str, n: int, lanes: int,
                 log: bool) -> None:
    """softmax / log_softmax of rows p0 .. p0 + lanes, one row per lane."""
    w.line(f"{t} mx[{lanes}];")
    w.line(f"double s[{lanes}];")
    w.line(f"for (int64_t q = 0; q < {lanes}; ++q) {{ mx[q] = -INFINITY; s[q] = 0.0; }}")
    at = f"[(p0 + q) * {n} + r]"
    each = f"for (int64_t q = 0; q < {lanes}; ++q)"
    w.open(f"for (int64_t r = 0; r < {n}; ++r)")
    w.line(f"{each} mx[q] = {x}{at} > mx[q] ? {x}{at} : mx[q];")
    w.close()
    w.open(f"for (int64_t r = 0; r < {n}; ++r)")
    w.open(each)
    w.line(f"const {t} e = {_fn('exp', f'{x}{at} - mx[q]', d)};")
    if not log:
        w.line(f"{y}{at} = e;")
    w.line("s[q] += (double)e;")
    w.close()
    w.close()
    if log:
        w.line(f"{t} lt[{lanes}];")
        w.line(f"{each} lt[q] = {_fn('log', f'({t})s[q]', d)};")
        w.open(f"for (int64_t r = 0; r < {n}; ++r)")
        w.line(f"{each} {y}{at} = ({x}{at} - mx[q]) - lt[q];")
    else:
        w.open(f"for (int64_t r = 0; r < {n}; ++r)")
        w.line(f"{each} {y}{at} = {y}{at} / ({t})s[q];")
    w.close()


def _softmax(env: KernelEnv, w: Writer, d: dt.DType, x: str, y: str, pre: int, n: int,
             post: int, log: bool) -> None:
    if post == 1 and n < LANES and pre > 1:
        _softmax_lanes(env, w, d, x, y, pre, n, log)
        return
    t = ct.value(d)
    at = f"[base + r{'' if post == 1 else f' * {post}'}]"
    _rows(env, w, pre, post, n)
    # the max as the decomposition's reduce_max: a NaN makes every later step NaN anyway
    w.line(f"{t} mx = -INFINITY;")
    w.line("#pragma omp simd reduction(max:mx)")
    w.line(f"for (int64_t r = 0; r < {n}; ++r) mx = {x}{at} > mx ? {x}{at} : mx;")
    w.line("double s = 0.0;")
    w.line("#pragma omp simd reduction(+:s)")
    w.open(f"for (int64_t r = 0; r < {n}; ++r)")
    w.line(f"const {t} e = {_fn('exp', f'{x}{at} - mx', d)};")
    if not log:
        w.line(f"{y}{at} = e;")
    w.line("s += (double)e;")
    w.close()
    w.line(f"const {t} tot = ({t})s;")
    if log:
        w.line(f"const {t} lt = {_fn('log', 'tot', d)};")
        w.line(f"for (int64_t r = 0; r < {n}; ++r) {y}{at} = ({x}{at} - mx) - lt;")
    else:
        w.line(f"for (int64_t r = 0; r < {n}; ++r) {y}{at} = {y}{at} / tot;")
    _close_rows(w, post)


# rows a layer norm runs side by side: each pass's double sum is a chain of dependent adds (two
# vector accumulators per row after the vectoriser), so one row at a time waited on their
# latency. Four rows per loop keep eight chains in flight, each row's sums in the same lane
# order (same bits). C harness, Emerald Rapids, one thread, 128 x 384 f32 from L1/L2 (MiniLM's
# rows): 0.352 -> 0.250 ns per element
NORM_ROWS = 4


def _norm(env: KernelEnv, w: Writer, d: dt.DType, x: str, y: str, pre: int, n: int,
          extra: list[str], eps: float, centre: bool, rows: tuple[str, str] | None) -> None:
    g = NORM_ROWS
    if rows is not None:  # a serial range: groups of rows, then the rest one by one
        w.open("")
        w.line(f"int64_t p = {rows[0]};")
        w.open(f"for (; p + {g} <= {rows[1]}; p += {g})")
        _norm_group(w, d, x, y, n, extra, eps, centre, g)
        w.close()
        w.open(f"for (; p < {rows[1]}; ++p)")
        _norm_group(w, d, x, y, n, extra, eps, centre, 1)
        w.close()
        w.close()
        return
    group = g if pre % g == 0 and pre > g else 1
    pragma = env.parallel(pre * n, 0)
    if pragma:
        w.line(pragma)
    w.open(f"for (int64_t pg = 0; pg < {pre // group}; ++pg)")
    w.line(f"const int64_t p = pg * {group};")
    if pre > group:
        # the rows after next into L1, a line at a time: the input is a GEMM's output that
        # the weights streamed through L2 since, and the first pass waited on its misses.
        # MiniLM b8 on Emerald Rapids, 1 thread, thread CPU time: its 13 layer norms
        # 1.77-1.96 -> 1.51-1.56 ms (b1, whose rows stay in L2, level). A matmul's chunk of
        # rows (``rows``) is in L2 already: the GEMM just wrote it
        step = max(1, 64 // max(1, d.bits // 8))
        w.line(f"if (p + {2 * group} <= {pre}) for (int64_t c = 0; c < {group * n}; "
               f"c += {step}) __builtin_prefetch(&{x}[p * {n} + {group * n} + c], 0, 3);")
    _norm_group(w, d, x, y, n, extra, eps, centre, group)
    w.close()


def _norm_group(w: Writer, d: dt.DType, x: str, y: str, n: int, extra: list[str], eps: float,
                centre: bool, g: int) -> None:
    """Rows p .. p + g - 1 (``p`` in scope) normalised, their passes side by side."""
    t = ct.value(d)
    lit = ct.literal(eps, d)
    ids = range(g)
    at = [f"{x}[p * {n} + {j * n} + r]" for j in ids]
    each = ", ".join
    if centre:
        w.line(f"double {each(f's{j} = 0.0' for j in ids)};")
        w.line(f"#pragma omp simd reduction(+:{each(f's{j}' for j in ids)})")
        w.line(f"for (int64_t r = 0; r < {n}; ++r) {{ "
               + " ".join(f"s{j} += (double){at[j]};" for j in ids) + " }")
        w.line(f"const {t} {each(f'mean{j} = ({t})s{j} / ({t}){n}' for j in ids)};")
        dev = [f"({at[j]} - mean{j})" for j in ids]
    else:
        dev = at
    w.line(f"double {each(f'v{j} = 0.0' for j in ids)};")
    w.line(f"#pragma omp simd reduction(+:{each(f'v{j}' for j in ids)})")
    w.open(f"for (int64_t r = 0; r < {n}; ++r)")
    for j in ids:
        w.line(f"const {t} c{j} = {dev[j]};")
        w.line(f"v{j} += (double)(c{j} * c{j});")
    w.close()
    for j in ids:
        w.line(f"const {t} var{j} = ({t})v{j} / ({t}){n};")
        # + (var - var): NaN where the variance overflowed, as the decomposition (_rstd)
        w.line(f"const {t} rstd{j} = {_fn('rsqrt', f'var{j} + {lit}', d)} + (var{j} - var{j});")
    for j in ids:
        val = f"{dev[j]} * rstd{j}"
        if len(extra) >= 1:
            val = f"({val}) * {extra[0]}[r]"
        if len(extra) == 2:
            val = f"{val} + {extra[1]}[r]"
        w.line(f"for (int64_t r = 0; r < {n}; ++r) {y}[p * {n} + {j * n} + r] = {val};")


def _row_range(env: KernelEnv, pre: int) -> tuple[str, str]:
    """The rows p a call runs: all ``pre``, or env.rows (rows of the leading axis, each
    ``pre / shape[0]`` rows p: the softmax axis is the last, cpu/row_split.py)."""
    if env.rows is None:
        return "0", str(pre)
    per = pre // env.outputs[env.kernel.outputs[0]].type.shape[0]
    scale = "" if per == 1 else f" * {per}"
    return f"({env.rows[0]}){scale}", f"({env.rows[1]}){scale}"


def _close_rows(w: Writer, post: int) -> None:
    if post > 1:
        w.close()
    w.close()


