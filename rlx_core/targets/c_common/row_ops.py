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
        pre, n = math.prod(shape[:-1]), shape[-1] if shape else 1
        extra = [env.inputs[v].ptr for v in node.inputs[1:]]
        _norm(env, w, d, x, y, pre, n, extra, float(node.attr("eps")), node.op == "layer_norm")
    return f"row-{node.op.replace('_', '-')}"


def _rows(env: KernelEnv, w: Writer, pre: int, post: int, n: int) -> None:
    """Open the loop over rows ``p`` (and, for an inner axis, columns ``q``), spread over the
    team like any generated loop; the row's first element is at ``base``."""
    pragma = env.parallel(pre * n * post, 0)
    if pragma:
        w.line(pragma + (" collapse(2)" if post > 1 and splits(pragma) else ""))
    w.open(f"for (int64_t p = 0; p < {pre}; ++p)")
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
    pragma = env.parallel(pre * n, 0)
    if pragma:
        w.line(pragma)
    w.open(f"for (int64_t blk = 0; blk < {full + (rest > 0)}; ++blk)")
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


def _norm(env: KernelEnv, w: Writer, d: dt.DType, x: str, y: str, pre: int, n: int,
          extra: list[str], eps: float, centre: bool) -> None:
    t = ct.value(d)
    lit = ct.literal(eps, d)
    _rows(env, w, pre, 1, n)
    if pre > 1:
        # the row two ahead into L1, a line at a time: the input is a GEMM's output that the
        # weights streamed through L2 since, and the first pass waited on its misses. MiniLM
        # b8 on Emerald Rapids, 1 thread, thread CPU time: its 13 layer norms 1.77-1.96 ->
        # 1.51-1.56 ms (b1, whose rows stay in L2, level)
        step = max(1, 64 // max(1, d.bits // 8))
        w.line(f"if (p + 2 < {pre}) for (int64_t c = 0; c < {n}; c += {step}) "
               f"__builtin_prefetch(&{x}[base + {2 * n} + c], 0, 3);")
    if centre:
        w.line("double s = 0.0;")
        w.line("#pragma omp simd reduction(+:s)")
        w.line(f"for (int64_t r = 0; r < {n}; ++r) s += (double){x}[base + r];")
        w.line(f"const {t} mean = ({t})s / ({t}){n};")
        dev = f"({x}[base + r] - mean)"
    else:
        dev = f"{x}[base + r]"
    w.line("double v = 0.0;")
    w.line("#pragma omp simd reduction(+:v)")
    w.open(f"for (int64_t r = 0; r < {n}; ++r)")
    w.line(f"const {t} c = {dev};")
    w.line("v += (double)(c * c);")
    w.close()
    w.line(f"const {t} var = ({t})v / ({t}){n};")
    # + (var - var): NaN where the variance overflowed, as the decomposition (_rstd)
    w.line(f"const {t} rstd = {_fn('rsqrt', f'var + {lit}', d)} + (var - var);")
    val = f"{dev} * rstd"
    if len(extra) >= 1:
        val = f"({val}) * {extra[0]}[r]"
    if len(extra) == 2:
        val = f"{val} + {extra[1]}[r]"
    w.line(f"for (int64_t r = 0; r < {n}; ++r) {y}[base + r] = {val};")
    _close_rows(w, 1)


def _close_rows(w: Writer, post: int) -> None:
    if post > 1:
        w.close()
    w.close()


