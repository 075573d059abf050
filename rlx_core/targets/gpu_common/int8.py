"""The int8 kernels of the GPU targets: ``int_linear`` on packed bytes and ``requantize`` in
32-bit arithmetic, in any dialect (with a packed dot product where it has ``dot4_i8``).

Buffers hold i8 values as i32 and u8 as u32 (expr.py's STORAGE), so ``int_linear`` packs
while it stages: each lane of a 16x16 workgroup reads four consecutive inputs of one row of
``x`` and of ``w``, writes them as one u32 word of four signed bytes to shared memory, and
the inner loop takes 16 words (64 multiply-adds) per K step. A u8 operand is offset to i8 on
the way in (``v ^ 0x80`` is ``v - 128``), and every zero point is corrected afterwards:
with ``x = x' + ox`` and ``w = w' + ow`` (x', w' the signed bytes),
``sum (x - za)(w - zb) = sum x'w' + cb * sum x' + ca * sum w' + K * ca * cb`` with
``ca = ox - za``, ``cb = ow - zb``, all wrapping i32 like the reference (the row sums: each
lane sums the words it stages, and 16 partials a row are added after the K loop). ``sum x'w'``
is the dialect's 4x8-bit dot product builtin where it has one (the "packed-dot" path: WGSL
``dot4I8Packed``, SPIR-V ``OpSDot``, CUDA ``__dp4a``, HIP ``__builtin_amdgcn_sdot4``), else four
sign-extending shifts and multiply-adds per word (the "i32" path: OpenGL, OpenCL, HLSL, MSL);
both exact.

Weights the host has before a call (a parameter or a constant: nearly always) are packed
once instead, by ``pack_weights`` when they are uploaded (a ``Derived`` buffer: the plan packs
a constant, the runtime a parameter whenever its data changes): rows of words, then each
column's whole zero-point term ``ca * sum w' + K * ca * cb``, so staging a weight word is one
load and the kernel sums only x's rows.

``requantize`` is TFLite's MultiplyByQuantizedMultiplier without 64-bit integers (WGSL and
GLSL 4.50 have none; the common-IR decomposition needs i64): ``x * m`` is formed from 16-bit
limbs as a (hi, lo) pair of u32 words, the nudge added with a carry, the high product shifted
out, then RoundingDivideByPOT and the clamp. Per-channel multipliers and shifts are one i32
buffer the runtime uploads once (a constant kernel writing a scratch buffer).
"""

from __future__ import annotations

import array
import functools
import math
import sys

from rlx_core.ir import dtypes as dt
from rlx_core.ir.graph import Kernel, TensorType
from rlx_core.targets.gpu_common.dialect import Buffer, Dialect, Shared
from rlx_core.targets.gpu_common.expr import STORAGE, GpuRenderError, bounds, safe
from rlx_core.targets.gpu_common.kernels import WG, Derived, GpuKernel, _grid

OPS: tuple[str, ...] = ("int_linear", "requantize")
DTYPES: tuple[str, ...] = ("i8", "u8", "i16", "i32")
TILE = 16  # a 16x16 workgroup computes 16x16 outputs; a K step is 16 words = 64 bytes


def _wrap(v: int) -> int:
    return (v + 2**31) % 2**32 - 2**31


def _buffers(d: Dialect, k: Kernel, types: dict[str, TensorType]) -> list[Buffer]:
    out = []
    for i, v in enumerate((*k.inputs, *k.outputs)):
        role = "in" if i < len(k.inputs) else "out"
        out.append(Buffer(i, f"b{i}", STORAGE[types[v].dtype.name],
                          f"{role} %{safe(v)} : {types[v]}"))
    return out


def _dot4_helper(d: Dialect) -> list[str]:
    """``rlx_dot4(a, b)``: the signed 4x8-bit dot product by shifts (the i32 path)."""
    terms = " + ".join(f"(({d.conv('i32', f'a << {24 - 8 * t}u')} >> 24u) * "
                       f"({d.conv('i32', f'b << {24 - 8 * t}u')} >> 24u))" for t in range(4))
    return d.guard("rlx_dot4", [d.function("rlx_dot4", [("a", "u32"), ("b", "u32")], "i32"),
                                f"  return {terms};", "}"])


def _pack(d: Dialect, var: str, t: TensorType, base: str, k: int, total: int,
          indent: str) -> list[str]:
    """Statements setting u32 ``p`` to four signed bytes of ``var[base + 0..3]`` (0 past K)."""
    lines = []
    for j in range(4):
        idx = f"min({base} + {j}u, {total - 1}u)"
        byte = f"({d.conv('u32', f'{var}[{idx}]')} & 0xffu)"
        if t.dtype == dt.u8:  # u8 -> i8 by -128: flip the top bit
            byte = f"(({d.conv('u32', f'{var}[{idx}]')} ^ 0x80u) & 0xffu)"
        shifted = f"({byte} << {8 * j}u)" if j else byte
        if k % 4 and j >= k % 4:  # this byte of the last word is past K
            shifted = d.select("0u", shifted, f"kw * 4u + {j}u < {k}u")
        lines.append(f"{indent}p = p | {shifted};")
    return lines


def pack_weights(raw: bytes, n: int, kk: int, u8: bool, ca: int, cb: int) -> bytes:
    """The prepacked weights of ``int_linear`` from the storage bytes of an (n, kk) i8 (i32
    words) or u8 (u32 words) tensor: each row as ``ceil(kk / 4)`` little-endian words of four
    signed bytes (u8 offset by -128, zeros past K), then, where ``ca`` (x's correction) is not
    0, one i32 a row: ``ca * sum(w') + kk * ca * cb`` (wrapped), the kernel's zero-point term
    for that output column. Pure Python (rlx_core imports without numpy); it runs when the
    weights are uploaded, not per call."""
    vals = array.array("i")
    vals.frombytes(raw[:4 * n * kk])
    if sys.byteorder == "big":  # storage bytes are little-endian
        vals.byteswap()
    words = -(-kk // 4)
    pad = bytes(4 * words - kk)
    packed = bytearray()
    terms = array.array("i")
    cb_k = kk * ca * cb
    for r in range(n):
        row = vals[r * kk:(r + 1) * kk]
        signed = [v - 128 for v in row] if u8 else list(row)
        packed += bytes(v & 0xFF for v in signed) + pad
        if ca:
            terms.append(_wrap(ca * sum(signed) + cb_k))
    if ca:
        if sys.byteorder == "big":
            terms.byteswap()
        packed += terms.tobytes()
    return bytes(packed)


def render_int_linear(d: Dialect, k: Kernel, types: dict[str, TensorType],
                      fixed: frozenset[str] = frozenset()) -> tuple[GpuKernel, ...]:
    node = k.nodes[0]
    x_t, w_t = types[node.inputs[0]], types[node.inputs[1]]
    kk = x_t.shape[-1]
    m = math.prod(x_t.shape[:-1])
    n = w_t.shape[0]
    words = -(-kk // 4)
    ca = (128 if x_t.dtype == dt.u8 else 0) - int(node.attr("a_zero_point"))
    cb = (128 if w_t.dtype == dt.u8 else 0) - int(node.attr("b_zero_point"))
    if m > 65535 * TILE or n > 65535 * TILE:
        raise GpuRenderError(f"int_linear {m}x{n} exceeds the workgroup grid",
                             hint="split the rows into several int_linear calls")
    # weights the host has before any call (a parameter, a constant) are packed once, with
    # their zero-point term, into one i32 buffer (pack_weights); others are packed in staging
    prepacked = node.inputs[1] in fixed
    dot = d.dot4_i8("ta[ly][j]", "tb[lx][j]")
    prelude = list(d.dot4_decl()) if dot is not None else _dot4_helper(d)

    def dot4(a: str, b: str) -> str:
        return d.dot4_i8(a, b) or f"rlx_dot4({a}, {b})"

    def add(a: str, b: str) -> str:
        return d.int_binary("+", a, b, "i32")

    note = f"  {d.comment} %{safe(node.name)} = int_linear"
    fused = d.dot4_i8_acc("ta[ly][j]", "tb[lx][j]", "acc")
    steps = [f"acc = {fused or add('acc', dot4('ta[ly][j]', 'tb[lx][j]'))};"]
    # the row sums the zero points need: each lane sums the words it stages (one dot with
    # 0x01010101 per K step, not one per word of the inner loop), then 16 partials a row
    ones = "0x01010101u"
    sum_x = [f"      sx = {add('sx', dot4('p', ones))};"] if cb else []
    sum_w = [f"      sw = {add('sw', dot4('p', ones))};"] if ca and not prepacked else []
    if prepacked:
        stage_w = [f"    if (wrow < {n}u && kw < {words}u) {{",
                   f"      p = {d.conv('u32', f'b1[wrow * {words}u + kw]')};", "    }"]
    else:
        stage_w = [f"    if (wrow < {n}u && kw < {words}u) {{",
                   *_pack(d, "b1", w_t, f"wrow * {kk}u + kw * 4u", kk, w_t.size, "      "),
                   *sum_w, "    }"]
    i32 = "i32"
    wx, wy = d.builtin("wx"), d.builtin("wy")
    lines = [f"  {d.let('lx', None, d.builtin('lx'))} {d.let('ly', None, d.builtin('ly'))}",
             f"  {d.let('row', None, f'{wy} * {TILE}u + ly')}",
             f"  {d.let('col', None, f'{wx} * {TILE}u + lx')}",
             f"  {d.let('wrow', None, f'{wx} * {TILE}u + ly')}",
             f"  {d.var('acc', i32, '0')} {d.var('sx', i32, '0')} {d.var('sw', i32, '0')}",
             f"  {d.loop('k0', '0u', f'{words}u', f'{TILE}u')}",
             f"    {d.let('kw', None, 'k0 + lx')}",
             f"    {d.var('p', 'u32', '0u')}",
             f"    if (row < {m}u && kw < {words}u) {{",
             *_pack(d, "b0", x_t, f"row * {kk}u + kw * 4u", kk, x_t.size, "      "), *sum_x,
             "    }", "    ta[ly][lx] = p;", "    p = 0u;", *stage_w, "    tb[ly][lx] = p;",
             f"    {d.barrier}",
             f"    {d.loop('j', '0u', f'{TILE}u', '1u')}{note}",
             *(f"      {s}" for s in steps), "    }",
             f"    {d.barrier}", "  }"]
    shared = [Shared("ta", "u32", (TILE, TILE)), Shared("tb", "u32", (TILE, TILE))]
    if cb or sum_w:  # lane (lx, ly) holds partial sums of x row ly and of w row lx's ... ly
        shared += [Shared("rsx", i32, (TILE, TILE)), Shared("rsw", i32, (TILE, TILE))]
        lines += ["  rsx[ly][lx] = sx; rsw[ly][lx] = sw;", f"  {d.barrier}",
                  "  sx = 0; sw = 0;",
                  f"  {d.loop('j', '0u', f'{TILE}u', '1u')}",
                  f"    sx = {add('sx', 'rsx[ly][j]')}; sw = {add('sw', 'rsw[lx][j]')};", "  }"]
    lines.append(f"  if (row >= {m}u || col >= {n}u) {{ return; }}")
    res = "acc"
    if cb:
        res = add(res, d.int_binary("*", "sx", d.int_lit(cb, i32), i32))
    if prepacked and ca:  # ca * sum w' + K * ca * cb, per column, from the packed buffer
        res = add(res, f"b1[{n * words}u + col]")
    elif ca:
        res = add(res, d.int_binary("*", "sw", d.int_lit(ca, i32), i32))
    if _wrap(kk * ca * cb) and not prepacked:
        res = add(res, d.int_lit(_wrap(kk * ca * cb), i32))
    if len(node.inputs) == 3:
        res = add(res, "b2[col]")
    out = f"b{len(k.inputs)}"
    lines.append(f"  {out}[row * {n}u + col] = {res};{note}")
    buffers = _buffers(d, k, types)
    reads = k.inputs
    extra: tuple[GpuKernel, ...] = ()
    if prepacked:
        name = f"{k.name}.wp"
        t = TensorType(dt.i32, (n * words + (n if ca else 0),))
        buffers[1] = Buffer(1, "b1", i32, f"in %{safe(node.inputs[1])} prepacked: {n} rows of "
                            f"{words} words" + (", then a zero-point term a row" if ca else ""))
        reads = (k.inputs[0], name, *k.inputs[2:])
        fn = functools.partial(pack_weights, n=n, kk=kk, u8=w_t.dtype == dt.u8, ca=ca, cb=cb)
        extra = (GpuKernel(name, "opaque", f"{d.comment} {k.name}: int8 weights packed by the "
                           "host when uploaded\n", (), (name,), (0, 0, 0), (),
                           scratch=((name, t),), derived=Derived(node.inputs[1], fn)),)
    src = d.kernel(buffers, shared, (TILE, TILE, 1), [*d.enables(False), *prelude], lines)
    grid = (-(-n // TILE), -(-m // TILE), 1)
    scratch = tuple(s for e in extra for s in e.scratch)
    return (*extra, GpuKernel(k.name, k.kind, src, reads, k.outputs, grid, local=(TILE, TILE, 1),
                              scratch=scratch))


def _requant_params(mult: tuple[int, ...], shift: tuple[int, ...]) -> list[tuple[int, int, int]]:
    """Per channel (multiplier, left shift, right shift); the IR keeps shifts in [-31, 30]."""
    out = []
    for mu, s in zip(mult, shift, strict=True):
        if not 0 <= mu < 2**31 or not -31 <= s <= 30:
            raise GpuRenderError(f"requantize ({mu}, {s}) is not a Q31 multiplier in [0, 2^31) "
                                 "with a shift in [-31, 30]",
                                 hint="use rlx.quant.quantize_multiplier")
        out.append((mu, max(s, 0), max(-s, 0)))
    return out


def render_requantize(d: Dialect, k: Kernel,
                      types: dict[str, TensorType]) -> tuple[GpuKernel, ...]:
    node = k.nodes[0]
    t = node.type
    x_t = types[node.inputs[0]]
    mult, shift = tuple(node.attr("multiplier")), tuple(node.attr("shift"))
    params = _requant_params(mult, shift)
    total = t.size
    grid = _grid(-(-total // WG))
    i32, u32 = "i32", "u32"
    gx, gy = d.builtin("gx"), d.builtin("gy")
    lines = [f"  {d.let('i', None, f'{gx} + {gy} * {grid[0] * WG}u')}",
             f"  if (i >= {total}u) {{ return; }}"]
    buffers = _buffers(d, k, types)
    extra: list[GpuKernel] = []
    table: tuple[tuple[str, TensorType], ...] = ()
    if len(set(params)) == 1:
        mu, left, right = params[0]
        m_e, l_e, r_e = d.int_lit(mu, i32), f"{left}u", f"{right}u"
    else:
        # per channel: one i32 buffer [multipliers, left shifts, right shifts], uploaded once
        # (a constant array in the shader is copied per invocation by lavapipe: a 512-channel
        # requantize of 32x512 took 233 ms of CPU against 2 ms per tensor)
        axis = node.attr("axis") % t.rank
        inner = math.prod(t.shape[axis + 1:])
        ch = len(params)
        name = f"{k.name}.rq"
        table = ((name, TensorType(dt.i32, (3 * ch,))),)
        extra.append(GpuKernel(name, "opaque", f"{d.comment} {k.name}: requantize table, "
                               "uploaded once by the runtime\n", (), (name,), (0, 0, 0),
                               tuple(p[col] for col in range(3) for p in params),
                               scratch=table))
        buffers = [buffers[0], Buffer(1, "b1", i32, f"in requantize table ({ch} channels)"),
                   Buffer(2, "b2", buffers[1].type, buffers[1].note)]
        lines.append(f"  {d.let('c', None, f'(i / {inner}u) % {ch}u')}")
        m_e, l_e, r_e = ("b1[c]", d.conv(u32, f"b1[{ch}u + c]"),
                         d.conv(u32, f"b1[{2 * ch}u + c]"))
    lo, hi = bounds(t.dtype)
    zp = int(node.attr("zero_point"))
    sel = d.select
    note = f"  {d.comment} %{safe(node.name)} = requantize"
    ux = d.conv(u32, "x")
    xin = d.conv(i32, "b0[i]") if STORAGE[x_t.dtype.name] != i32 else "b0[i]"
    lines += [
        f"  {d.let('r', u32, r_e)}",
        f"  {d.let('x', i32, d.int_binary('<<', xin, l_e, i32))}{note}",
        # |x| * m as a 64-bit (hi, lo) pair from 16-bit limbs (m < 2^31, |x| <= 2^31)
        f"  {d.let('neg', 'bool', 'x < 0')}",
        f"  {d.let('ux', u32, sel(ux, '0u - ' + ux, 'neg'))}",
        f"  {d.let('um', u32, d.conv(u32, m_e))}",
        f"  {d.let('a0', u32, 'ux & 0xffffu')} {d.let('a1', u32, 'ux >> 16u')}",
        f"  {d.let('c0', u32, 'um & 0xffffu')} {d.let('c1', u32, 'um >> 16u')}",
        f"  {d.let('p00', u32, 'a0 * c0')} {d.let('p01', u32, 'a0 * c1')}",
        f"  {d.let('p10', u32, 'a1 * c0')} {d.let('p11', u32, 'a1 * c1')}",
        f"  {d.let('mid', u32, '(p00 >> 16u) + (p01 & 0xffffu) + (p10 & 0xffffu)')}",
        f"  {d.let('plo', u32, '(mid << 16u) | (p00 & 0xffffu)')}",
        f"  {d.let('phi', u32, 'p11 + (p01 >> 16u) + (p10 >> 16u) + (mid >> 16u)')}",
        # SRDHM: trunc((x*m + nudge) / 2^31); on |x*m| that is (|x*m| + 2^30 [- 1]) >> 31
        f"  {d.let('qlo', u32, 'plo + ' + sel('0x40000000u', '0x3fffffffu', 'neg'))}",
        f"  {d.let('qhi', u32, 'phi + ' + sel('0u', '1u', 'qlo < plo'))}",
        f"  {d.let('hm', u32, '(qhi << 1u) | (qlo >> 31u)')}",
        f"  {d.let('h', i32, d.conv(i32, sel('hm', '0u - hm', 'neg')))}",
        # RoundingDivideByPOT(h, r): ties away from zero
        f"  {d.let('mask', i32, d.conv(i32, '(1u << r) - 1u'))}",
        f"  {d.let('thr', i32, '(mask >> 1u) + ' + sel('0', '1', 'h < 0'))}",
        f"  {d.let('y', i32, '(h >> r) + ' + sel('0', '1', '(h & mask) > thr'))}",
        f"  {d.let('q', i32, f'clamp(y, {d.int_lit(lo - zp, i32)}, {d.int_lit(hi - zp, i32)})')}",
    ]
    val = f"q + {d.int_lit(zp, i32)}" if zp else "q"
    if STORAGE[t.dtype.name] == u32:
        val = d.conv(u32, val)
    lines.append(f"  {buffers[-1].var}[i] = {val};{note}")
    src = d.kernel(buffers, [], (WG, 1, 1), d.enables(False), lines)
    reads = (*k.inputs, *(n for n, _ in table))
    return (*extra, GpuKernel(k.name, k.kind, src, reads, k.outputs, grid, scratch=table))


def render_int8(d: Dialect, k: Kernel, types: dict[str, TensorType],
                fixed: frozenset[str] = frozenset()) -> tuple[GpuKernel, ...] | None:
    """The dispatches of a one-node int8 kernel, or None when ``k`` is not one; ``fixed``:
    the values whose data the host has before a call (int_linear prepacks such weights)."""
    if k.kind != "opaque" or len(k.nodes) != 1 or k.nodes[0].op not in OPS:
        return None
    if k.nodes[0].op == "int_linear":
        return render_int_linear(d, k, types, fixed)
    return render_requantize(d, k, types)
