"""WGSL renderer: one compute shader per LIR kernel (elementwise, reduce, matmul, opaque).

Every kernel binds its inputs then its outputs as ``var<storage, read_write>`` arrays (all
read-write, so two bindings of one buffer never mix read-only and writable usages), in the
order of ``Kernel.inputs`` and ``Kernel.outputs``. Shapes are static, so every index map is
constant-folded into the source and no uniform buffer is needed. The loop nests::

    elementwise   @workgroup_size(256): i = global id; if i < N { y[i] = f(x[map(i)], ...) }
    reduce        one workgroup per kept index o; each lane strides over the reduced indices,
                  accumulates in registers, then a tree combine in workgroup memory; lane 0
                  applies the consumers and stores: y[o] = g(acc, z[o])
    matmul        16x16 output tiles; each K step stages a 16x16 tile of lhs and of rhs in
                  workgroup memory (any dot_general layout: index maps per operand), then the
                  epilogue runs where the accumulator is stored
    opaque        one invocation per output element computes its source index (transpose,
                  reshape, slice, pad, concat, gather, scatter_add, iota)

Storage and compute types (see ``STORAGE`` / ``COMPUTE``): bool is stored as u32, i8/i16 as i32
and u8 as u32 (wrapped to their width after every op), f16 is stored as f16 (``enable f16``,
only with the adapter's ``shader-f16``) and computed in f32, rounded to f16 after every op, which
is what the numpy reference does. Tuple constants are not rendered: the runtime uploads them
once. Value names never reach the source except sanitised inside comments.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from rlx_core.ir import dtypes as dt
from rlx_core.ir.dtypes import DType
from rlx_core.ir.graph import Graph, Kernel, Node, Shape, TensorType
from rlx_core.ir.ops import MIR_OPS
from rlx_core.targets.webgpu.wgsl_expr import (
    COMPUTE,
    HELPERS,
    STORAGE,
    Body,
    ExprGen,
    WgslRenderError,
    _bounds,
    _check_dtype,
    _safe,
    cast,
    finish,
    isnan,
    linear,
    lit,
    load,
    store,
    strides,
    zero,
)

WG = 256  # invocations per workgroup for elementwise, opaque and reduce kernels
TILE = 16  # matmul tile edge: a 16x16 workgroup computes a 16x16 block of the result
MAX_GROUPS = 65535  # WebGPU's default maxComputeWorkgroupsPerDimension


@dataclass(frozen=True)
class WgslKernel:
    """One rendered kernel: source, bindings (inputs then outputs) and the dispatch grid.

    ``constant`` holds the flat values of a tuple constant the runtime uploads instead of
    dispatching (then ``source`` is a comment only).
    """

    name: str
    kind: str
    source: str
    reads: tuple[str, ...]
    writes: tuple[str, ...]
    workgroups: tuple[int, int, int]
    constant: tuple[Any, ...] | None = None


# ---- kernels -----------------------------------------------------------------------------------


def _header(k: Kernel, types: dict[str, TensorType]) -> tuple[list[str], dict[str, str]]:
    lines: list[str] = []
    if any(types[v].dtype == dt.f16 for v in (*k.inputs, *k.outputs)) or any(
            n.type.dtype == dt.f16 for n in k.nodes):
        lines.append("enable f16;")
    bind: dict[str, str] = {}
    for i, v in enumerate((*k.inputs, *k.outputs)):
        t = types[v]
        _check_dtype(t.dtype, f"kernel {k.name} value %{_safe(v)}")
        var = f"b{i}"
        bind[v] = var
        role = "in" if i < len(k.inputs) else "out"
        lines.append(f"@group(0) @binding({i}) var<storage, read_write> {var}: "
                     f"array<{STORAGE[t.dtype.name]}>;  // {role} %{_safe(v)} : {t}")
    return lines, bind


def _grid(groups: int) -> tuple[int, int, int]:
    """Workgroup counts for ``groups`` workgroups, folded into y past the per-dimension limit."""
    if groups <= MAX_GROUPS:
        return (max(groups, 1), 1, 1)
    y = -(-groups // MAX_GROUPS)
    return (MAX_GROUPS, y, 1)


def _assemble(header: list[str], used: set[str], body: list[str]) -> str:
    helpers = [HELPERS[h] for h in sorted(used)]
    if any("rlx_zero" in line for line in (*body, *helpers)):
        helpers.insert(0, "var<private> rlx_zero: u32;  // 0, but not a constant (see lit)")
    return "\n".join([*header, "", *helpers, *([""] if helpers else []), *body]) + "\n"


def _store_outputs(k: Kernel, gen: ExprGen, types: dict[str, TensorType], bind: dict[str, str],
                   idx: tuple[str, ...], shape: Shape, lines: list[str], indent: str) -> None:
    for o in k.outputs:
        t = types[o]
        if t.shape != shape:
            raise WgslRenderError(f"kernel {k.name}: output %{_safe(o)} {t} is not on the loop "
                                  f"shape {list(shape)}", hint="report this fusion case")
        val = gen.at(o, idx)
        lines.extend(gen.body.lines)
        gen.body.lines.clear()
        lines.append(f"{indent}{bind[o]}[{linear(idx, shape)}] = {store(val, t.dtype)};")


def render_elementwise(k: Kernel, types: dict[str, TensorType]) -> WgslKernel:
    shape = types[k.outputs[0]].shape
    total = math.prod(shape)
    header, bind = _header(k, types)
    used: set[str] = set()
    body = Body()
    gen = ExprGen({n.name: n for n in k.nodes}, types, bind, body, used)
    grid = _grid(-(-total // WG))
    lines = [f"@compute @workgroup_size({WG})",
             "fn main(@builtin(global_invocation_id) gid: vec3<u32>) {",
             f"  let i = gid.x + gid.y * {grid[0] * WG}u;",
             f"  if (i >= {total}u) {{ return; }}"]
    idx = body.digits("i", shape)
    _store_outputs(k, gen, types, bind, idx, shape, lines, "  ")
    lines.append("}")
    return WgslKernel(k.name, k.kind, _assemble(header, used, lines), k.inputs, k.outputs, grid)


_INIT = {"reduce_sum": 0, "reduce_prod": 1}


def _reduce_init(op: str, d: DType) -> str:
    c = COMPUTE[d.name]
    if op in _INIT:
        return lit(_INIT[op], d) if c != "bool" else ("0u" if op == "reduce_sum" else "1u")
    lowest = op == "reduce_max"
    if c == "f32":
        return lit(-math.inf if lowest else math.inf, dt.f32)
    if c == "bool":
        return "0u" if lowest else "1u"
    lo, hi = _bounds(d)
    return lit(lo if lowest else hi, d)


def _combine(op: str, a: str, b: str, c: str) -> str:
    if c == "bool":  # bools accumulate as u32 0/1: sum is any, prod is all
        op = {"reduce_sum": "reduce_max", "reduce_prod": "reduce_min"}.get(op, op)
    return {"reduce_sum": f"({a} + {b})", "reduce_prod": f"({a} * {b})",
            "reduce_max": f"max({a}, {b})", "reduce_min": f"min({a}, {b})"}[op]


def render_reduce(k: Kernel, types: dict[str, TensorType]) -> WgslKernel:
    red = next(n for n in k.nodes if MIR_OPS.get(n.op) and MIR_OPS[n.op].category == "reduce")
    src_t = types[red.inputs[0]]
    out_shape = red.type.shape
    axes = (red.attr("axis"),) if red.op == "argmax" else tuple(red.attr("axes"))
    kept = tuple(i for i in range(src_t.rank) if i not in axes)
    rshape = tuple(src_t.shape[i] for i in axes)
    outer, inner = math.prod(out_shape), math.prod(rshape)
    header, bind = _header(k, types)
    used: set[str] = set()
    d = src_t.dtype
    argmax = red.op == "argmax"
    acc_t = "u32" if COMPUTE[d.name] == "bool" else COMPUTE[d.name]
    if argmax:
        acc_t = "f32" if COMPUTE[d.name] == "f32" else acc_t
    nodes = {n.name: n for n in k.nodes}
    grid = _grid(outer)
    lines = [f"var<workgroup> acc_v: array<{acc_t}, {WG}>;"]
    if argmax:
        lines.append(f"var<workgroup> acc_i: array<u32, {WG}>;")
    lines += [f"@compute @workgroup_size({WG})",
              "fn main(@builtin(workgroup_id) wid: vec3<u32>, "
              "@builtin(local_invocation_index) lid: u32) {",
              f"  let o = wid.x + wid.y * {grid[0]}u;",
              f"  if (o >= {outer}u) {{ return; }}"]  # uniform: depends on the workgroup only
    outer_body = Body("p")
    oidx = outer_body.digits("o", out_shape)
    lines += outer_body.lines
    outer_body.lines.clear()
    # inner loop: lane lid visits reduced offsets lid, lid + WG, ... in increasing order
    inner_body = Body("q")
    ridx = inner_body.digits("r", rshape, "    ")
    full = [""] * src_t.rank
    for pos, ax in enumerate(kept):
        full[ax] = oidx[pos]
    for pos, ax in enumerate(axes):
        full[ax] = ridx[pos]
    gen_in = ExprGen(nodes, types, bind, inner_body, used, "    ")
    x = gen_in.at(red.inputs[0], tuple(full))
    xv = x if COMPUTE[d.name] != "bool" else f"select(0u, 1u, {x})"
    if argmax:
        def nan(v: str) -> str:
            return isnan(v) if acc_t == "f32" else "false"

        init_v = lit(-math.inf, dt.f32) if acc_t == "f32" else _reduce_init("reduce_max", d)
        lines += [f"  var best = {init_v};", "  var best_i = 0xffffffffu;",
                  f"  for (var r = lid; r < {inner}u; r = r + {WG}u) {{"]
        lines += inner_body.lines
        # first maximum wins; a NaN counts as the maximum (as numpy's argmax)
        lines += [f"    let xv = {xv};",
                  f"    if (best_i == 0xffffffffu || (xv > best) || ({nan('xv')} && "
                  f"!{nan('best')})) {{ best = xv; best_i = r; }}", "  }",
                  "  acc_v[lid] = best;", "  acc_i[lid] = best_i;", "  workgroupBarrier();",
                  f"  for (var s = {WG // 2}u; s > 0u; s = s >> 1u) {{",
                  "    if (lid < s) {",
                  "      let va = acc_v[lid]; let ia = acc_i[lid];",
                  "      let vb = acc_v[lid + s]; let ib = acc_i[lid + s];",
                  f"      let na = {nan('va')}; let nb = {nan('vb')};",
                  "      let take_b = ib != 0xffffffffu && (ia == 0xffffffffu || (nb && !na) || "
                  "(nb && na && ib < ia) || (!na && !nb && (vb > va || (vb == va && ib < ia))));",
                  "      if (take_b) { acc_v[lid] = vb; acc_i[lid] = ib; }",
                  "    }", "    workgroupBarrier();", "  }"]
        result = cast("acc_i[0]", dt.u32, red.type.dtype)
    else:
        init = _reduce_init(red.op, d)
        c = COMPUTE[d.name]
        lines += [f"  var acc = {init};", f"  for (var r = lid; r < {inner}u; r = r + {WG}u) {{"]
        lines += inner_body.lines
        lines += [f"    acc = {_combine(red.op, 'acc', xv, c)};", "  }",
                  "  acc_v[lid] = acc;", "  workgroupBarrier();",
                  f"  for (var s = {WG // 2}u; s > 0u; s = s >> 1u) {{",
                  f"    if (lid < s) {{ acc_v[lid] = "
                  f"{_combine(red.op, 'acc_v[lid]', 'acc_v[lid + s]', c)}; }}",
                  "    workgroupBarrier();", "  }"]
        result = "(acc_v[0] != 0u)" if c == "bool" else finish("acc_v[0]", d)
    lines.append("  if (lid != 0u) { return; }")
    lines += outer_body.lines
    res_var = outer_body.let(result)
    lines += outer_body.lines
    outer_body.lines.clear()
    gen_out = ExprGen(nodes, types, bind, outer_body, used, fixed={red.name: res_var})
    _store_outputs(k, gen_out, types, bind, oidx, out_shape, lines, "  ")
    lines.append("}")
    return WgslKernel(k.name, k.kind, _assemble(header, used, lines), k.inputs, k.outputs, grid)


def _operand_fn(name: str, var: str, t: TensorType, groups: tuple[tuple[int, ...], ...],
                params: tuple[str, ...]) -> str:
    """``fn name(b, x, y) -> compute``: element of operand ``t`` at flattened group indices."""
    st = strides(t.shape)
    body = Body("z")
    terms = []
    for flat, axes in zip(params, groups, strict=True):
        sub = tuple(t.shape[a] for a in axes)
        digits = body.digits(flat, sub)
        terms += [f"{dg} * {st[a]}u" for dg, a in zip(digits, axes, strict=True) if t.shape[a] != 1]
    off = " + ".join(terms) or "0u"
    c = COMPUTE[t.dtype.name]
    sig = ", ".join(f"{p}: u32" for p in params)
    return "\n".join([f"fn {name}({sig}) -> {c} {{", *body.lines,
                      f"  return {load(f'{var}[{off}]', t.dtype)};", "}"])


def render_matmul(k: Kernel, types: dict[str, TensorType]) -> WgslKernel:
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
        raise WgslRenderError(f"matmul batch {nb} exceeds {MAX_GROUPS} workgroups per dimension",
                              hint="reshape the batch into fewer, larger matmuls")
    header, bind = _header(k, types)
    for name in dot.inputs:
        if name not in bind:
            raise WgslRenderError(f"matmul operand %{_safe(name)} is not a kernel buffer")
    used: set[str] = set()
    d = dot.type.dtype
    c = COMPUTE[d.name]
    if c == "bool":
        raise WgslRenderError("bool matmul is undefined")
    fns = [_operand_fn("lhs_at", bind[dot.inputs[0]], lhs_t, (tuple(lb), lf, tuple(lc)),
                       ("b", "m", "k")),
           _operand_fn("rhs_at", bind[dot.inputs[1]], rhs_t, (tuple(rb), tuple(rc), rf),
                       ("b", "k", "n"))]
    grid = (-(-n // TILE), -(-m // TILE), max(nb, 1))
    z = zero(d) if c != "f32" else "0.0"
    lines = [*fns, "",
             f"var<workgroup> ta: array<array<{c}, {TILE}>, {TILE}>;",
             f"var<workgroup> tb: array<array<{c}, {TILE}>, {TILE}>;",
             f"@compute @workgroup_size({TILE}, {TILE})",
             "fn main(@builtin(workgroup_id) wid: vec3<u32>, "
             "@builtin(local_invocation_id) lid: vec3<u32>) {",
             "  let b = wid.z;",
             f"  let row = wid.y * {TILE}u + lid.y;", f"  let col = wid.x * {TILE}u + lid.x;",
             f"  var acc: {c} = {z};",
             f"  for (var k0 = 0u; k0 < {kk}u; k0 = k0 + {TILE}u) {{",
             # every lane stages one element of each tile (zero outside the operands)
             "    let ka = k0 + lid.x; let kb = k0 + lid.y;",
             f"    ta[lid.y][lid.x] = select({z}, lhs_at(b, min(row, {max(m - 1, 0)}u), "
             f"min(ka, {max(kk - 1, 0)}u)), row < {m}u && ka < {kk}u);",
             f"    tb[lid.y][lid.x] = select({z}, rhs_at(b, min(kb, {max(kk - 1, 0)}u), "
             f"min(col, {max(n - 1, 0)}u)), kb < {kk}u && col < {n}u);",
             "    workgroupBarrier();",
             f"    for (var t = 0u; t < {TILE}u; t = t + 1u) {{ acc = acc + ta[lid.y][t] * "
             "tb[t][lid.x]; }",
             "    workgroupBarrier();", "  }",
             f"  if (row >= {m}u || col >= {n}u) {{ return; }}"]
    body = Body("e")
    bdig = body.digits("b", tuple(lhs_t.shape[i] for i in lb))
    mdig = body.digits("row", tuple(lhs_t.shape[i] for i in lf))
    ndig = body.digits("col", tuple(rhs_t.shape[i] for i in rf))
    lines += body.lines
    body.lines.clear()
    res = body.let(finish("acc", d))
    lines += body.lines
    body.lines.clear()
    gen = ExprGen({x.name: x for x in k.nodes}, types, bind, body, used, fixed={dot.name: res})
    _store_outputs(k, gen, types, bind, bdig + mdig + ndig, dot.type.shape, lines, "  ")
    lines.append("}")
    return WgslKernel(k.name, k.kind, _assemble(header, used, lines), k.inputs, k.outputs, grid)


def _opaque_value(n: Node, types: dict[str, TensorType], bind: dict[str, str], body: Body,
                  idx: tuple[str, ...], lines: list[str]) -> str:
    """The compute value of opaque node ``n`` at output index ``idx`` (statements to ``lines``)."""
    t = n.type
    ins = [types[i] for i in n.inputs]

    def read(j: int, sub: tuple[str, ...]) -> str:
        return load(f"{bind[n.inputs[j]]}[{linear(sub, ins[j].shape)}]", ins[j].dtype)

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
        conds = [f"({i} >= {lo}u && {i} < {lo + s}u)" for i, lo, s in zip(idx, low, ins[0].shape, strict=True)]
        sub = tuple(f"min({i} - min({i}, {lo}u), {max(s - 1, 0)}u)"
                    for i, lo, s in zip(idx, low, ins[0].shape, strict=True))
        inside = " && ".join(conds) or "true"
        return f"select({lit(n.attr('value'), t.dtype)}, {read(0, sub)}, {inside})"
    if n.op == "iota":
        return cast(idx[n.attr("dim")], dt.u32, t.dtype)
    if n.op == "concat":
        ax = n.attr("axis")
        res = f"r{len(lines)}"
        lines.append(f"  var {res}: {COMPUTE[t.dtype.name]};")
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
        k = i_t.rank
        ivals = idx[ax:ax + k]
        raw = body.let(f"i32({load(f'{bind[n.inputs[1]]}[{linear(ivals, i_t.shape)}]', i_t.dtype)})")
        size = x_t.shape[ax]
        # negative indices count from the end; out-of-range ones are refused on the host side
        # (graph inputs) and clamped here so a computed bad index cannot read out of bounds
        j = body.let(f"u32(clamp(select({raw}, {raw} + {size}, {raw} < 0), 0, {max(size - 1, 0)}))")
        return read(0, idx[:ax] + (j,) + idx[ax + k:])
    if n.op == "scatter_add":
        ax = n.attr("axis")
        x_t, i_t, u_t = ins
        size = x_t.shape[ax]
        c = COMPUTE[t.dtype.name]
        res = f"r{len(lines)}"
        lines.append(f"  var {res}: {c} = {read(0, idx)};")
        lines.append(f"  for (var p = 0u; p < {i_t.size}u; p = p + 1u) {{")
        sub_b = Body("s")
        pd = sub_b.digits("p", i_t.shape, "    ")
        lines += sub_b.lines
        ival = load(f"{bind[n.inputs[1]]}[p]", i_t.dtype)
        lines.append(f"    let raw = i32({ival});")
        lines.append(f"    let j = u32(select(raw, raw + {size}, raw < 0));")
        usub = idx[:ax] + pd + idx[ax + 1:]
        upd = load(f"{bind[n.inputs[2]]}[{linear(usub, u_t.shape)}]", u_t.dtype)
        lines.append(f"    if (j == {idx[ax]}) {{ {res} = {finish(f'{res} + {upd}', t.dtype)}; }}")
        lines.append("  }")
        return res
    raise WgslRenderError(f"no WGSL kernel for op {n.op!r}",
                          hint="the webgpu capability table should not have claimed it")


def render_opaque(k: Kernel, types: dict[str, TensorType]) -> WgslKernel:
    main = k.nodes[-1]
    t = main.type
    if main.op == "constant":
        value = main.attr("value")
        src = f"// {k.name}: constant %{_safe(main.name)} : {t}, uploaded once by the runtime\n"
        return WgslKernel(k.name, k.kind, src, (), k.outputs, (0, 0, 0), tuple(value))
    header, bind = _header(k, types)
    total = t.size
    grid = _grid(-(-total // WG))
    lines = [f"@compute @workgroup_size({WG})",
             "fn main(@builtin(global_invocation_id) gid: vec3<u32>) {",
             f"  let i = gid.x + gid.y * {grid[0] * WG}u;",
             f"  if (i >= {total}u) {{ return; }}"]
    body = Body()
    idx = body.digits("i", t.shape)
    stmts: list[str] = []
    val = _opaque_value(main, types, bind, body, idx, stmts)
    lines += body.lines + stmts
    lines.append(f"  {bind[main.name]}[i] = {store(val, t.dtype)};")
    lines.append("}")
    return WgslKernel(k.name, k.kind, _assemble(header, set(), lines), k.inputs, k.outputs, grid)


RENDERERS = {"elementwise": render_elementwise, "reduce": render_reduce,
             "matmul": render_matmul, "opaque": render_opaque}


def render_kernel(k: Kernel, types: dict[str, TensorType]) -> WgslKernel:
    """WGSL for one LIR kernel (raises WgslRenderError for what it does not cover)."""
    if k.kind not in RENDERERS:
        raise WgslRenderError(f"kernel {k.name}: unknown kernel kind {k.kind!r}")
    if k.kind == "opaque" and len(k.nodes) != 1:
        raise WgslRenderError(f"kernel {k.name}: an opaque kernel holds one node")
    if k.kind == "opaque" and k.nodes[0].op not in OPAQUE_OPS:
        raise WgslRenderError(f"kernel {k.name}: no WGSL kernel for op {k.nodes[0].op!r}",
                              hint="decompose it to MIR primitives (do not claim it natively)")
    return RENDERERS[k.kind](k, types)


OPAQUE_OPS = ("transpose", "reshape", "slice", "pad", "concat", "gather", "scatter_add", "iota",
              "constant")


__all__ = ["WgslKernel", "WgslRenderError", "STORAGE", "COMPUTE", "render_graph", "render_kernel"]


def render_graph(lir: Graph) -> tuple[WgslKernel, ...]:
    """Every kernel of a LIR graph, in execution order."""
    types = {name: v.type for name, v in lir.values().items()}
    return tuple(render_kernel(k, types) for k in lir.kernels)
