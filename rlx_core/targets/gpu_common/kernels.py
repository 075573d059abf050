"""GPU kernels: one compute kernel per LIR kernel, as a grid of workgroups, in any dialect.

Every kernel binds its inputs then its outputs as storage buffers (all read-write, so two
bindings of one buffer never mix read-only and writable usages), in the order of
``Kernel.inputs`` and ``Kernel.outputs``. Shapes are static, so every index map is
constant-folded into the source and no uniform buffer is needed. The loop nests::

    elementwise   workgroups of 256: i = global id; if i < N { y[i] = f(x[map(i)], ...) }
    reduce        one workgroup per kept index o; each lane strides over the reduced indices,
                  accumulates in registers, then a tree combine in shared memory (where
                  the dialect has subgroup shuffles: xor shuffles inside each warp /
                  subgroup / simdgroup, one partial per subgroup in shared memory, folded
                  in order by lane 0); lane 0 applies the consumers and stores:
                  y[o] = g(acc, z[o])
    matmul        16x16 output tiles; each K step stages a 16x16 tile of lhs and of rhs in
                  shared memory (any dot_general layout: index maps per operand), then the
                  epilogue runs where the accumulator is stored
    opaque        one invocation per output element computes its source index (transpose,
                  reshape, slice, pad, concat, gather, scatter_add, iota)

Storage and compute types are expr.py's ``STORAGE`` / ``COMPUTE``. Tuple constants are not
rendered: the runtime uploads them once. Value names never reach the source except sanitised
inside comments; each statement made for a node names it there.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rlx_core.ir import dtypes as dt
from rlx_core.ir.dtypes import DType
from rlx_core.ir.graph import Graph, Kernel, Node, Shape, TensorType, row_strides
from rlx_core.ir.ops import MIR_OPS
from rlx_core.targets.gpu_common.dialect import Buffer, Dialect, Shared, Subgroup
from rlx_core.targets.gpu_common.expr import (
    COMPUTE,
    FLOATS,
    STORAGE,
    Body,
    ExprGen,
    GpuRenderError,
    bounds,
    cast,
    check_dtype,
    finish,
    isnan,
    linear,
    lit,
    load,
    safe,
    store,
    zero,
)
from rlx_core.targets.gpu_common.helpers import helpers

WG = 256  # invocations per workgroup for elementwise, opaque and reduce kernels
TILE = 16  # matmul tile edge: a 16x16 workgroup computes a 16x16 block of the result
MAX_GROUPS = 65535  # the common limit of workgroups per grid dimension (WebGPU, Vulkan)


@dataclass(frozen=True)
class Guard:
    """A scratch buffer of u32 words a kernel sets when its result is invalid (a list it sized
    at plan time overflowed). A kernel cannot raise, so the runtime reads the words back after
    the call and ``check`` raises the typed error (webgpu/splat_raster.py's tile entries)."""

    buffer: str
    words: int
    check: Callable[[tuple[int, ...]], None]

    def __call__(self, raw: bytes) -> None:
        self.check(struct.unpack(f"<{self.words}I", raw[:4 * self.words]))


@dataclass(frozen=True)
class Derived:
    """A buffer the host computes from another's storage bytes whenever that one is written:
    a graph constant at plan time, a parameter whenever its data is uploaded (gpu_common/int8.py's
    prepacked int8 weights). ``fn`` maps the source's storage bytes to this buffer's."""

    source: str
    fn: Callable[[bytes], bytes]


@dataclass(frozen=True)
class GpuKernel:
    """One rendered kernel: source, bindings (inputs then outputs) and the dispatch grid.

    ``constant`` holds the flat values of a tuple constant the runtime uploads instead of
    dispatching (then ``source`` is a comment only). ``local`` is the workgroup size.
    ``scratch`` names device buffers a multi-dispatch kernel of a dialect's own uses beyond
    the graph's values (the plan allocates them; webgpu/splat.py's tile lists); ``guard``
    one of them the runtime checks after every call. ``derived``: the host fills this
    kernel's one scratch buffer from another buffer (``constant`` is then ``()``: it is not
    dispatched either).
    """

    name: str
    kind: str
    source: str
    reads: tuple[str, ...]
    writes: tuple[str, ...]
    workgroups: tuple[int, int, int]
    constant: tuple[Any, ...] | None = None
    local: tuple[int, int, int] = (WG, 1, 1)
    scratch: tuple[tuple[str, TensorType], ...] = ()
    guard: Guard | None = None
    derived: Derived | None = None


class _Kernel:
    """What every loop nest starts from: buffers, their variables, helpers used, shared."""

    def __init__(self, d: Dialect, k: Kernel, types: dict[str, TensorType]) -> None:
        self.d, self.k, self.types = d, k, types
        self.used: set[str] = set()
        self.shared: list[Shared] = []
        self.buffers: list[Buffer] = []
        self.bind: dict[str, str] = {}
        for i, v in enumerate((*k.inputs, *k.outputs)):
            t = types[v]
            check_dtype(d, t.dtype, f"kernel {k.name} value %{safe(v)}")
            var = f"b{i}"
            self.bind[v] = var
            role = "in" if i < len(k.inputs) else "out"
            self.buffers.append(Buffer(i, var, STORAGE[t.dtype.name], f"{role} %{safe(v)} : {t}"))

    def gen(self, body: Body, indent: str = "  ",
            fixed: dict[str, str] | None = None) -> ExprGen:
        return ExprGen(self.d, {n.name: n for n in self.k.nodes}, self.types, self.bind, body,
                       self.used, indent, fixed)

    def source(self, wg: tuple[int, int, int], lines: list[str]) -> str:
        k = self.k
        uses_f16 = any(self.types[v].dtype == dt.f16 for v in (*k.inputs, *k.outputs)) or any(
            n.type.dtype == dt.f16 for n in k.nodes)
        if any(self.types[v].dtype == dt.bf16 for v in (*k.inputs, *k.outputs)) or any(
                n.type.dtype == dt.bf16 for n in k.nodes):
            self.used.add("rlx_bf16")
        own: list[str] = []
        if self.d.f64_emulation is not None and (any(
                self.types[v].dtype == dt.f64 for v in (*k.inputs, *k.outputs)) or any(
                n.type.dtype == dt.f64 for n in k.nodes)):
            self.used.update(("rlx_log", "rlx_powf"))  # the f64 library calls them
            own = self.d.f64_emulation.library()
        prelude = [*self.d.enables(uses_f16), *helpers(self.d, self.used), *own]
        return self.d.kernel(self.buffers, self.shared, wg, prelude, lines)

    def store_outputs(self, gen: ExprGen, idx: tuple[str, ...], shape: Shape,
                      lines: list[str], indent: str) -> None:
        for o in self.k.outputs:
            t = self.types[o]
            if t.shape != shape:
                raise GpuRenderError(f"kernel {self.k.name}: output %{safe(o)} {t} is not on "
                                     f"the loop shape {list(shape)}",
                                     hint="report this fusion case")
            val = gen.at(o, idx)
            lines.extend(gen.body.lines)
            gen.body.lines.clear()
            lines.append(f"{indent}{self.bind[o]}[{linear(idx, shape)}] = "
                         f"{store(self.d, val, t.dtype)};  {self.d.comment} store %{safe(o)}")


def _grid(groups: int) -> tuple[int, int, int]:
    """Workgroup counts for ``groups`` workgroups, folded into y past the per-dimension limit."""
    if groups <= MAX_GROUPS:
        return (max(groups, 1), 1, 1)
    y = -(-groups // MAX_GROUPS)
    return (MAX_GROUPS, y, 1)


def _flat_id(d: Dialect, grid: tuple[int, int, int]) -> str:
    return d.let("i", None, f"{d.builtin('gx')} + {d.builtin('gy')} * {grid[0] * WG}u")


def render_elementwise(d: Dialect, k: Kernel, types: dict[str, TensorType]) -> GpuKernel:
    shape = types[k.outputs[0]].shape
    total = math.prod(shape)
    kr = _Kernel(d, k, types)
    body = Body(d)
    gen = kr.gen(body)
    grid = _grid(-(-total // WG))
    lines = [f"  {_flat_id(d, grid)}", f"  if (i >= {total}u) {{ return; }}"]
    idx = body.digits("i", shape)
    kr.store_outputs(gen, idx, shape, lines, "  ")
    return GpuKernel(k.name, k.kind, kr.source((WG, 1, 1), lines), k.inputs, k.outputs, grid)


_INIT = {"reduce_sum": 0, "reduce_prod": 1}


def _reduce_init(d: Dialect, op: str, t: DType) -> str:
    c = COMPUTE[t.name]
    if op in _INIT:
        return lit(d, _INIT[op], t) if c != "bool" else ("0u" if op == "reduce_sum" else "1u")
    lowest = op == "reduce_max"
    if c in FLOATS:
        return lit(d, -math.inf if lowest else math.inf, dt.get(c))
    if c == "bool":
        return "0u" if lowest else "1u"
    lo, hi = bounds(t)
    return lit(d, lo if lowest else hi, t)


def _combine(d: Dialect, op: str, a: str, b: str, c: str) -> str:
    if c == "f64" and d.f64_emulation is not None:
        return d.f64_emulation.combine(op, a, b)
    if c == "bool":  # bools accumulate as u32 0/1: sum is any, prod is all
        op = {"reduce_sum": "reduce_max", "reduce_prod": "reduce_min"}.get(op, op)
    if op in ("reduce_sum", "reduce_prod"):
        sym = "+" if op == "reduce_sum" else "*"
        return f"({a} {sym} {b})" if c in (*FLOATS, "u32") else d.int_binary(sym, a, b, c)
    fn = "max" if op == "reduce_max" else "min"
    if c in FLOATS:  # a NaN wins, as in numpy's max/min (drivers' max/min drop it)
        return d.select(d.select(f"{fn}({a}, {b})", b, isnan(d, b, c)), a, isnan(d, a, c))
    return f"{fn}({a}, {b})"


def render_reduce(d: Dialect, k: Kernel, types: dict[str, TensorType]) -> GpuKernel:
    red = next(n for n in k.nodes if MIR_OPS.get(n.op) and MIR_OPS[n.op].category == "reduce")
    src_t = types[red.inputs[0]]
    out_shape = red.type.shape
    axes = (red.attr("axis"),) if red.op == "argmax" else tuple(red.attr("axes"))
    kept = tuple(i for i in range(src_t.rank) if i not in axes)
    rshape = tuple(src_t.shape[i] for i in axes)
    outer, inner = math.prod(out_shape), math.prod(rshape)
    kr = _Kernel(d, k, types)
    t = src_t.dtype
    c = COMPUTE[t.name]
    argmax = red.op == "argmax"
    acc_t = "u32" if c == "bool" else c
    sg = d.subgroup if not argmax else None
    kr.shared.append(Shared("acc_v", acc_t, (WG // sg.min_width if sg else WG,)))
    if argmax:
        kr.shared.append(Shared("acc_i", "u32", (WG,)))
    grid = _grid(outer)
    lid, wx, wy = d.builtin("li"), d.builtin("wx"), d.builtin("wy")
    note = f"  {d.comment} %{safe(red.name)} = {red.op}"
    lines = [f"  {d.let('lid', None, lid)}",
             f"  {d.let('o', None, f'{wx} + {wy} * {grid[0]}u')}",
             f"  if (o >= {outer}u) {{ return; }}"]  # uniform: depends on the workgroup only
    outer_body = Body(d, "p")
    oidx = outer_body.digits("o", out_shape)
    lines += outer_body.lines
    outer_body.lines.clear()
    # inner loop: lane lid visits reduced offsets lid, lid + WG, ... in increasing order
    inner_body = Body(d, "q")
    ridx = inner_body.digits("r", rshape, "    ")
    full = [""] * src_t.rank
    for pos, ax in enumerate(kept):
        full[ax] = oidx[pos]
    for pos, ax in enumerate(axes):
        full[ax] = ridx[pos]
    gen_in = kr.gen(inner_body, "    ")
    x = gen_in.at(red.inputs[0], tuple(full))
    xv = x if c != "bool" else d.select("0u", "1u", x)
    loop = d.loop("r", "lid", f"{inner}u", f"{WG}u")
    if argmax:
        def nan(v: str) -> str:
            return isnan(d, v, acc_t) if acc_t in FLOATS else "false"

        init_v = lit(d, -math.inf, dt.get(acc_t)) if acc_t in FLOATS else \
            _reduce_init(d, "reduce_max", t)
        lines += [f"  {d.var('best', acc_t, init_v)}", f"  {d.var('best_i', 'u32', '0xffffffffu')}",
                  f"  {loop}"]
        lines += inner_body.lines
        # first maximum wins; a NaN counts as the maximum (as numpy's argmax)
        lines += [f"    {d.let('xv', acc_t, xv)}",
                  f"    if (best_i == 0xffffffffu || (xv > best) || ({nan('xv')} && "
                  f"!{nan('best')})) {{ best = xv; best_i = r; }}{note}", "  }",
                  "  acc_v[lid] = best;", "  acc_i[lid] = best_i;", f"  {d.barrier}",
                  f"  {d.var('s', 'u32', f'{WG // 2}u')}",
                  "  while (s > 0u) {",
                  "    if (lid < s) {",
                  f"      {d.let('va', acc_t, 'acc_v[lid]')} {d.let('ia', 'u32', 'acc_i[lid]')}",
                  f"      {d.let('vb', acc_t, 'acc_v[lid + s]')} "
                  f"{d.let('ib', 'u32', 'acc_i[lid + s]')}",
                  f"      {d.let('na', 'bool', nan('va'))} {d.let('nb', 'bool', nan('vb'))}",
                  f"      {d.let('take_b', 'bool', 'ib != 0xffffffffu && (ia == 0xffffffffu || (nb && !na) || (nb && na && ib < ia) || (!na && !nb && (vb > va || (vb == va && ib < ia))))')}",
                  "      if (take_b) { acc_v[lid] = vb; acc_i[lid] = ib; }",
                  "    }", f"    {d.barrier}", "    s = s >> 1u;", "  }"]
        result = cast(d, "acc_i[0]", dt.u32, red.type.dtype)
    elif sg is not None:
        lines += _subgroup_reduce(d, sg, red.op, acc_t, c, _reduce_init(d, red.op, t), loop,
                                  inner_body.lines, xv, note)
        result = "(acc != 0u)" if c == "bool" else finish(d, "acc", t)
    else:
        init = _reduce_init(d, red.op, t)
        lines += [f"  {d.var('acc', acc_t, init)}", f"  {loop}"]
        lines += inner_body.lines
        lines += [f"    acc = {_combine(d, red.op, 'acc', xv, c)};{note}", "  }",
                  "  acc_v[lid] = acc;", f"  {d.barrier}",
                  f"  {d.var('s', 'u32', f'{WG // 2}u')}",
                  "  while (s > 0u) {",
                  f"    if (lid < s) {{ acc_v[lid] = "
                  f"{_combine(d, red.op, 'acc_v[lid]', 'acc_v[lid + s]', c)}; }}",
                  f"    {d.barrier}", "    s = s >> 1u;", "  }"]
        result = "(acc_v[0] != 0u)" if c == "bool" else finish(d, "acc_v[0]", t)
    lines.append("  if (lid != 0u) { return; }")
    lines += outer_body.lines
    res_var = outer_body.let(result, COMPUTE[red.type.dtype.name], note=f"%{safe(red.name)}")
    lines += outer_body.lines
    outer_body.lines.clear()
    gen_out = kr.gen(outer_body, fixed={red.name: res_var})
    kr.store_outputs(gen_out, oidx, out_shape, lines, "  ")
    return GpuKernel(k.name, k.kind, kr.source((WG, 1, 1), lines), k.inputs, k.outputs, grid)


def _subgroup_reduce(d: Dialect, sg: Subgroup, op: str, acc_t: str, c: str, init: str,
                     loop: str, inner: list[str], xv: str, note: str) -> list[str]:
    """Lanes accumulate strided as in the tree; then xor shuffles halve the distance inside
    each subgroup (no barrier, no shared memory), lane 0 of each subgroup stores its partial,
    and after one barrier invocation 0 folds the partials in subgroup order into ``acc``."""
    def f(e: str) -> str:
        return e.format(lid="lid", wg=WG)

    return [f"  {d.var('acc', acc_t, init)}", f"  {loop}", *inner,
            f"    acc = {_combine(d, op, 'acc', xv, c)};{note}", "  }",
            f"  {d.var('s', 'u32', f'({f(sg.width)} >> 1u)')}",
            "  while (s > 0u) {",  # uniform: every lane shuffles (the shuffle is not in a select)
            f"    {d.let('other', acc_t, d.shuffle_xor('acc', 's', acc_t))}",
            f"    acc = {_combine(d, op, 'acc', 'other', c)};", "    s = s >> 1u;", "  }",
            f"  if ({f(sg.lane)} == 0u) {{ acc_v[{f(sg.index)}] = acc; }}", f"  {d.barrier}",
            "  if (lid != 0u) { return; }",
            "  acc = acc_v[0];", f"  {d.loop('w', '1u', f(sg.count), '1u')}",
            f"    acc = {_combine(d, op, 'acc', 'acc_v[w]', c)};", "  }"]


def _operand_load(d: Dialect, var: str, t: TensorType, groups: tuple[tuple[int, ...], ...],
                  flats: tuple[str, ...], prefix: str, indent: str) -> tuple[list[str], str]:
    """Statements and the compute value of operand ``t`` at flattened group indices."""
    st = row_strides(t.shape)
    body = Body(d, prefix)
    terms = []
    for flat, axes in zip(flats, groups, strict=True):
        sub = tuple(t.shape[a] for a in axes)
        digits = body.digits(flat, sub, indent)
        terms += [f"{dg} * {st[a]}u" for dg, a in zip(digits, axes, strict=True) if t.shape[a] != 1]
    off = " + ".join(terms) or "0u"
    return body.lines, load(d, f"{var}[{off}]", t.dtype)


def render_matmul(d: Dialect, k: Kernel, types: dict[str, TensorType]) -> GpuKernel:
    dot = next(n for n in k.nodes if n.op == "dot_general")
    lhs_t, rhs_t = types[dot.inputs[0]], types[dot.inputs[1]]
    (lc, rc), (lb, rb) = dot.attr("contract"), dot.attr("batch")
    lf = tuple(i for i in range(lhs_t.rank) if i not in lc and i not in lb)
    rf = tuple(i for i in range(rhs_t.rank) if i not in rc and i not in rb)
    nb = math.prod(lhs_t.shape[i] for i in lb)
    m = math.prod(lhs_t.shape[i] for i in lf)
    n = math.prod(rhs_t.shape[i] for i in rf)
    kk = math.prod(lhs_t.shape[i] for i in lc)
    if nb > MAX_GROUPS:
        raise GpuRenderError(f"matmul batch {nb} exceeds {MAX_GROUPS} workgroups per dimension",
                             hint="reshape the batch into fewer, larger matmuls")
    kr = _Kernel(d, k, types)
    for name in dot.inputs:
        if name not in kr.bind:
            raise GpuRenderError(f"matmul operand %{safe(name)} is not a kernel buffer")
    t = dot.type.dtype
    c = COMPUTE[t.name]
    if c == "bool":
        raise GpuRenderError("bool matmul is undefined")
    kr.shared += [Shared("ta", c, (TILE, TILE)), Shared("tb", c, (TILE, TILE))]
    grid = (-(-n // TILE), -(-m // TILE), max(nb, 1))
    z = zero(d, t)
    a_lines, a_val = _operand_load(d, kr.bind[dot.inputs[0]], lhs_t, (tuple(lb), lf, tuple(lc)),
                                   ("b", "row", "ka"), "za", "      ")
    b_lines, b_val = _operand_load(d, kr.bind[dot.inputs[1]], rhs_t, (tuple(rb), tuple(rc), rf),
                                   ("b", "kb", "col"), "zb", "      ")
    prod = "ta[ly][j] * tb[j][lx]"
    step = f"acc + {prod}" if c in (*FLOATS, "u32") else d.int_binary(
        "+", "acc", d.int_binary("*", "ta[ly][j]", "tb[j][lx]", c), c)
    if c == "f64" and d.f64_emulation is not None:
        step = "rlx_df_add(acc, rlx_df_mul(ta[ly][j], tb[j][lx]))"
    note = f"  {d.comment} %{safe(dot.name)} = dot_general"
    wx, wy = d.builtin("wx"), d.builtin("wy")
    lines = [f"  {d.let('lx', None, d.builtin('lx'))} {d.let('ly', None, d.builtin('ly'))}",
             f"  {d.let('b', None, d.builtin('wz'))}",
             f"  {d.let('row', None, f'{wy} * {TILE}u + ly')}",
             f"  {d.let('col', None, f'{wx} * {TILE}u + lx')}",
             f"  {d.var('acc', c, z)}",
             f"  {d.loop('k0', '0u', f'{kk}u', f'{TILE}u')}",
             # every lane stages one element of each tile (zero outside the operands)
             f"    {d.let('ka', None, 'k0 + lx')} {d.let('kb', None, 'k0 + ly')}",
             f"    {d.var('av', c, z)} {d.var('bv', c, z)}",
             f"    if (row < {m}u && ka < {kk}u) {{", *a_lines, f"      av = {a_val};", "    }",
             f"    if (kb < {kk}u && col < {n}u) {{", *b_lines, f"      bv = {b_val};", "    }",
             "    ta[ly][lx] = av; tb[ly][lx] = bv;",
             f"    {d.barrier}",
             f"    {d.loop('j', '0u', f'{TILE}u', '1u')} acc = {step}; }}{note}",
             f"    {d.barrier}", "  }",
             f"  if (row >= {m}u || col >= {n}u) {{ return; }}"]
    body = Body(d, "e")
    bdig = body.digits("b", tuple(lhs_t.shape[i] for i in lb))
    mdig = body.digits("row", tuple(lhs_t.shape[i] for i in lf))
    ndig = body.digits("col", tuple(rhs_t.shape[i] for i in rf))
    lines += body.lines
    body.lines.clear()
    res = body.let(finish(d, "acc", t), c, note=f"%{safe(dot.name)}")
    lines += body.lines
    body.lines.clear()
    gen = kr.gen(body, fixed={dot.name: res})
    kr.store_outputs(gen, bdig + mdig + ndig, dot.type.shape, lines, "  ")
    return GpuKernel(k.name, k.kind, kr.source((TILE, TILE, 1), lines), k.inputs, k.outputs,
                     grid, local=(TILE, TILE, 1))


def _opaque_value(d: Dialect, n: Node, types: dict[str, TensorType], bind: dict[str, str],
                  body: Body, idx: tuple[str, ...], lines: list[str]) -> str:
    """The compute value of opaque node ``n`` at output index ``idx`` (statements to ``lines``)."""
    t = n.type
    ins = [types[i] for i in n.inputs]

    def read(j: int, sub: tuple[str, ...]) -> str:
        return load(d, f"{bind[n.inputs[j]]}[{linear(sub, ins[j].shape)}]", ins[j].dtype)

    if n.op == "transpose":
        perm = n.attr("perm")
        sub = [""] * t.rank
        for i, p in enumerate(perm):
            sub[p] = idx[i]
        return read(0, tuple(sub))
    if n.op == "reshape":
        flat = body.let(linear(idx, t.shape))
        return read(0, body.digits(flat, ins[0].shape))
    if n.op == "slice":
        sub = tuple(f"({s}u + {i} * {st}u)" for i, s, st in
                    zip(idx, n.attr("start"), n.attr("stride"), strict=True))
        return read(0, sub)
    if n.op == "pad":
        low = n.attr("low")
        conds = [f"({i} >= {lo}u && {i} < {lo + s}u)"
                 for i, lo, s in zip(idx, low, ins[0].shape, strict=True)]
        sub = tuple(f"min({i} - min({i}, {lo}u), {max(s - 1, 0)}u)"
                    for i, lo, s in zip(idx, low, ins[0].shape, strict=True))
        inside = " && ".join(conds) or "true"
        return d.select(lit(d, n.attr("value"), t.dtype), read(0, sub), inside)
    if n.op == "iota":
        return cast(d, idx[n.attr("dim")], dt.u32, t.dtype)
    c = COMPUTE[t.dtype.name]
    if n.op == "concat":
        ax = n.attr("axis")
        res = f"r{len(lines)}"
        lines.append(f"  {d.var(res, c)}")
        start = 0
        for j, it in enumerate(ins):
            stop = start + it.shape[ax]
            sub = tuple(f"({i} - {start}u)" if a == ax else i for a, i in enumerate(idx))
            kw = "if" if j == 0 else "} else if"
            lines.append(f"  {kw} ({idx[ax]} < {stop}u) {{ {res} = {read(j, sub)};")
            start = stop
        lines.append("  }")
        return res
    if n.op == "gather":
        ax = n.attr("axis")
        x_t, i_t = ins
        rank = i_t.rank
        ivals = idx[ax:ax + rank]
        iv = load(d, f"{bind[n.inputs[1]]}[{linear(ivals, i_t.shape)}]", i_t.dtype)
        raw = body.let(d.conv("i32", iv), "i32")
        size = x_t.shape[ax]
        # negative indices count from the end; out-of-range ones are refused on the host side
        # (graph inputs) and clamped here so a computed bad index cannot read out of bounds
        wrapped = d.select(raw, f"{raw} + {size}", f"{raw} < 0")
        j = body.let(d.conv("u32", f"clamp({wrapped}, 0, {max(size - 1, 0)})"))
        return read(0, idx[:ax] + (j,) + idx[ax + rank:])
    if n.op == "scatter_add":
        ax = n.attr("axis")
        x_t, i_t, u_t = ins
        size = x_t.shape[ax]
        res = f"r{len(lines)}"
        lines.append(f"  {d.var(res, c, read(0, idx))}")
        lines.append(f"  {d.loop('p', '0u', f'{i_t.size}u', '1u')}")
        sub_b = Body(d, "s")
        pd = sub_b.digits("p", i_t.shape, "    ")
        lines += sub_b.lines
        ival = load(d, f"{bind[n.inputs[1]]}[p]", i_t.dtype)
        lines.append(f"    {d.let('raw', 'i32', d.conv('i32', ival))}")
        lines.append(f"    {d.let('j', None, d.conv('u32', d.select('raw', f'raw + {size}', 'raw < 0')))}")
        usub = idx[:ax] + pd + idx[ax + 1:]
        upd = load(d, f"{bind[n.inputs[2]]}[{linear(usub, u_t.shape)}]", u_t.dtype)
        add = (f"({res} || {upd})" if c == "bool" else f"{res} + {upd}" if c in (*FLOATS, "u32")
               else d.int_binary("+", res, upd, c))
        if c == "f64" and d.f64_emulation is not None:
            add = d.f64_emulation.combine("reduce_sum", res, upd)
        lines.append(f"    if (j == {idx[ax]}) {{ {res} = {finish(d, add, t.dtype)}; }}")
        lines.append("  }")
        return res
    raise GpuRenderError(f"no {d.name} kernel for op {n.op!r}",
                         hint=f"the {d.name} capability table should not have claimed it")


def render_opaque(d: Dialect, k: Kernel, types: dict[str, TensorType]) -> GpuKernel:
    main = k.nodes[-1]
    t = main.type
    if main.op == "constant":
        value = main.attr("value")
        src = (f"{d.comment} {k.name}: constant %{safe(main.name)} : {t}, uploaded once by the "
               f"runtime\n")
        return GpuKernel(k.name, k.kind, src, (), k.outputs, (0, 0, 0), tuple(value))
    kr = _Kernel(d, k, types)
    total = t.size
    grid = _grid(-(-total // WG))
    lines = [f"  {_flat_id(d, grid)}", f"  if (i >= {total}u) {{ return; }}"]
    body = Body(d)
    idx = body.digits("i", t.shape)
    stmts: list[str] = []
    val = _opaque_value(d, main, types, kr.bind, body, idx, stmts)
    lines += body.lines + stmts
    lines.append(f"  {kr.bind[main.name]}[i] = {store(d, val, t.dtype)};  "
                 f"{d.comment} %{safe(main.name)} = {main.op}")
    return GpuKernel(k.name, k.kind, kr.source((WG, 1, 1), lines), k.inputs, k.outputs, grid)


RENDERERS = {"elementwise": render_elementwise, "reduce": render_reduce,
             "matmul": render_matmul, "opaque": render_opaque}

OPAQUE_OPS = ("transpose", "reshape", "slice", "pad", "concat", "gather", "scatter_add", "iota",
              "constant")


def render_kernel(d: Dialect, k: Kernel, types: dict[str, TensorType]) -> GpuKernel:
    """One LIR kernel in dialect ``d`` (raises GpuRenderError for what it does not cover)."""
    if k.kind not in RENDERERS:
        raise GpuRenderError(f"kernel {k.name}: unknown kernel kind {k.kind!r}")
    if k.kind == "opaque" and len(k.nodes) != 1:
        raise GpuRenderError(f"kernel {k.name}: an opaque kernel holds one node")
    if k.kind == "opaque" and k.nodes[0].op not in OPAQUE_OPS:
        raise GpuRenderError(f"kernel {k.name}: no {d.name} kernel for op {k.nodes[0].op!r}",
                             hint="decompose it to MIR primitives (do not claim it natively)")
    return RENDERERS[k.kind](d, k, types)


def render_graph(d: Dialect, lir: Graph) -> tuple[GpuKernel, ...]:
    """Every kernel of a LIR graph in dialect ``d``, in execution order (a composite the
    dialect renders itself may be several dispatches)."""
    from rlx_core.targets.gpu_common.int8 import render_int8  # it imports this module

    types = {name: v.type for name, v in lir.values().items()}
    # values whose data the host has before any call: parameters and tuple constants (the
    # int8 kernels prepack such weights once instead of in every call)
    fixed = frozenset([*(v.name for v in lir.params),
                       *(k.outputs[0] for k in lir.kernels if k.kind == "opaque"
                         and len(k.nodes) == 1 and k.nodes[0].op == "constant")])
    out: list[GpuKernel] = []
    for k in lir.kernels:
        own = d.composite(k, types)
        if own is None:
            own = render_int8(d, k, types, fixed)
        out.extend(own if own is not None else (render_kernel(d, k, types),))
    return tuple(out)
