"""The AVX-512 blocked conv's full tile as one asm statement: start, K loop and epilogue.

``rlx_cb_loopz`` (conv_blocked.py) keeps the 16 accumulators of an 8 (7) pixel x 2 panel
tile in zmm0-15 for its K loop, but an asm statement takes at most 30 operands and 16 in-out
vectors count 32, so they went through a 1 KB array before and after it (~4% of a 64->256 1x1
at 28x28) and the epilogue ran as intrinsics on the way out. ``rlx_cb_wholez`` does the whole
tile in one statement whose operands are pointers, counts and memory slots only::

    start:  zmm0-15 = 0 | the bias (the tile's one K slice ends with the epilogue) |
            the partial sums in out (a later K slice)
    loop:   rlx_cb_loopz's K steps (the same macros: prefetches, broadcasts, FMAs)
    end:    the partial sums to out (not the last slice), or the epilogue to the NCHW8c
            output: + bias (a later slice only), + residual, max(., lo), min(., hi), and
            each zmm's two 8-channel halves stored to their blocks

The arithmetic is rlx_cb_endz's in its order (bias first, then the residual, then the
activations), the activations the NaN-keeping compare + masked move rlx_conv_fin8 uses (a
value <= lo, ordered, becomes lo: NaN stays, -0 becomes lo), so results are bit-identical.
Which start and which epilogue parts run is one bit field (``how``, built in C) tested by
branches that go the same way for every tile of a call. The text is generated here per pixel
count and K step width (BW 8: a block of 8 channels a tap; 3: a 3-channel stem's tap), one
line per instruction, from the register plan above; the loop's text is conv_blocked's macros.
"""

from __future__ import annotations

# how's bits (rlx_cb_wholez computes them from acc and the epilogue)
START_BIAS, START_LOAD, END_EPI, EPI_BIAS, EPI_RES, EPI_LO, EPI_HI = 1, 2, 4, 8, 16, 32, 64

ACC_PANEL1 = 8  # pixel i's second panel is in zmm i + 8 (rlx_cb_loopz's plan)
TEMPS = range(18, 32)  # zmm registers free for the residual's loads in the epilogue


def _ins(text: str) -> str:
    """One instruction as a line of the C string literal."""
    return f'        "{text}\\n\\t"'


def _label(n: int) -> str:
    return f'        "{n}:\\n\\t"'


def _accs(mr: int) -> list[tuple[int, int, int]]:
    """(register, panel, pixel) of the tile's accumulators."""
    return [(i + p * ACC_PANEL1, p, i) for p in (0, 1) for i in range(mr)]


def _start(mr: int) -> list[str]:
    lines = [_ins(f"testq ${START_LOAD}, %[how]"), _ins("jz 2f"), _ins("mov %[out], %[off]")]
    lines += [_ins(f"vmovups {64 * i}(%[off]), %%zmm{i}") for i in range(mr)]
    lines.append(_ins("add %[osb], %[off]"))
    lines += [_ins(f"vmovups {64 * i}(%[off]), %%zmm{i + ACC_PANEL1}") for i in range(mr)]
    lines += [
        _ins("jmp 4f"),
        _label(2),
        _ins(f"testq ${START_BIAS}, %[how]"),
        _ins("jz 3f"),
        _ins("mov %[e], %[off]"),
        _ins("mov 16(%[off]), %[off]"),
    ]
    # a load each (L1), not a register copy: the copies would take FMA ports
    lines += [_ins(f"vmovups {64 * p}(%[off]), %%zmm{r}") for r, p, _ in _accs(mr)]
    lines += [_ins("jmp 4f"), _label(3)]
    lines += [_ins(f"vxorps %%xmm{r}, %%xmm{r}, %%xmm{r}") for r, _, _ in _accs(mr)]
    lines.append(_label(4))
    return lines


def _scratch_store(mr: int) -> list[str]:
    lines = [_ins("mov %[out], %[off]")]
    lines += [_ins(f"vmovups %%zmm{i}, {64 * i}(%[off])") for i in range(mr)]
    lines.append(_ins("add %[osb], %[off]"))
    lines += [_ins(f"vmovups %%zmm{i + ACC_PANEL1}, {64 * i}(%[off])") for i in range(mr)]
    return lines


def _block_base(p: int, ptr: str, alt: str) -> str:
    """The register holding a panel's first block: ptr for panel 0, alt (ptr + 2 bs) for 1."""
    return ptr if p == 0 else alt


def _epilogue(mr: int) -> list[str]:
    # pk, offs, n and pf are free after the loop: pk the output, offs the residual, n the
    # bytes between two blocks (bs), pf the panel's second pair of blocks; off holds e
    lines = [
        _ins("mov %[e], %[off]"),
        _ins(f"testq ${EPI_BIAS}, %[how]"),
        _ins("jz 5f"),
        _ins("mov 16(%[off]), %[pk]"),
        _ins("vmovups (%[pk]), %%zmm16"),
        _ins("vmovups 64(%[pk]), %%zmm17"),
    ]
    lines += [_ins(f"vaddps %%zmm{16 + p}, %%zmm{r}, %%zmm{r}") for r, p, _ in _accs(mr)]
    lines += [
        _label(5),
        _ins(f"testq ${EPI_RES}, %[how]"),
        _ins("jz 6f"),
        _ins("mov 8(%[off]), %[offs]"),
        _ins("mov 24(%[off]), %[n]"),
        _ins("lea (%[offs],%[n],2), %[pf]"),
    ]
    for k, (r, p, i) in enumerate(_accs(mr)):
        t = TEMPS[k % len(TEMPS)]
        base = _block_base(p, "%[offs]", "%[pf]")
        lines += [
            _ins(f"vmovups {32 * i}({base}), %%ymm{t}"),
            _ins(f"vinsertf64x4 $1, {32 * i}({base},%[n]), %%zmm{t}, %%zmm{t}"),
            _ins(f"vaddps %%zmm{t}, %%zmm{r}, %%zmm{r}"),
        ]
    # a value <= lo (>= hi), ordered, becomes lo (hi): rlx_conv_fin8's blends exactly
    for lab, bit, field, reg, pred in ((6, EPI_LO, 40, 16, "0x12"), (7, EPI_HI, 44, 17, "0x1d")):
        lines += [
            _label(lab),
            _ins(f"testq ${bit}, %[how]"),
            _ins(f"jz {lab + 1}f"),
            _ins(f"vbroadcastss {field}(%[off]), %%zmm{reg}"),
        ]
        for r, _, _ in _accs(mr):
            lines += [
                _ins(f"vcmpps ${pred}, %%zmm{reg}, %%zmm{r}, %%k1"),
                _ins(f"vmovaps %%zmm{reg}, %%zmm{r}%{{%%k1%}}"),
            ]
    lines += [
        _label(8),
        _ins("mov (%[off]), %[pk]"),
        _ins("mov 24(%[off]), %[n]"),
        _ins("lea (%[pk],%[n],2), %[pf]"),
    ]
    for r, p, i in _accs(mr):
        base = _block_base(p, "%[pk]", "%[pf]")
        lines += [
            _ins(f"vmovups %%ymm{r}, {32 * i}({base})"),
            _ins(f"vextractf64x4 $1, %%zmm{r}, {32 * i}({base},%[n])"),
        ]
    return lines


def _loop(bw: int, mr: int) -> list[str]:
    """rlx_cb_loopz's K loop (conv_blocked's macros), accumulators already in zmm0-15."""
    return [
        _label(1),
        _ins("mov (%[offs]), %[off]"),
        _ins("add $8, %[offs]"),
        f"        RLX_CB_ZK{bw}(RLX_CB_Z{mr})",
        _ins("dec %[n]"),
        _ins("jnz 1b"),
    ]


def asm_text(bw: int, mr: int) -> str:
    """The asm template of the whole tile for ``mr`` pixels (7 or 8) and ``bw`` K steps a
    tap (8 or 3), as C string literals."""
    body = _start(mr) + _loop(bw, mr)
    body += [_ins(f"testq ${END_EPI}, %[how]"), _ins("jnz 9f")] + _scratch_store(mr)
    body += [_ins("jmp 10f"), _label(9)] + _epilogue(mr) + [_label(10)]
    return "\n".join(body)


CLOBBERS = ", ".join(f'"xmm{r}"' for r in range(32)) + ', "k1", "memory", "cc"'


def source() -> str:
    """C text of rlx_cb_wholez (inside conv_blocked's RLX_CB_ASMZ_ON section)."""
    cases = []
    for bw, mr in ((8, 8), (8, 7), (3, 8), (3, 7)):
        ins = "RLX_CB_ZIN8" if mr == 8 else "RLX_CB_ZIN7"
        cond = f"MR == {mr} && BW == {bw}"
        cases.append(
            f"    {'if' if not cases else 'else if'} ({cond})\n"
            f"        __asm__ volatile(\n{asm_text(bw, mr)}\n"
            f"            : RLX_CB_ZIO : {ins}, RLX_CB_WZIN : RLX_CB_WZCLOB);"
        )
    return f"""
/* rlx_cb_tilez's whole tile for 8 (7) pixels x 2 panels of which the second is full, in one
   asm statement (conv_tilez_asm.py, RLX_CB_WHOLEZ=0: rlx_cb_loopz and the intrinsics'
   epilogue, A/B): how's bits {START_BIAS} start at e's bias, {START_LOAD} at the partial sums in out
   (os floats to the second panel), {END_EPI} end with e (else to out), {EPI_BIAS} add e's bias,
   {EPI_RES} its residual, {EPI_LO} / {EPI_HI} its max / min */
#define RLX_CB_WZIN [out] "m"(out), [osb] "m"(osb), [e] "m"(e), [how] "m"(how)
#define RLX_CB_WZCLOB {CLOBBERS}
static inline __attribute__((always_inline)) void rlx_cb_wholez(
        const float *const *a, const float *pk, int64_t pks, int64_t ntap, const int64_t *offs,
        float *out, int64_t os, int acc, const rlx_cb_epi *e, const char *pf, const int BW,
        const int MR) {{
    int64_t off, pkb = pks * (int64_t)sizeof(float), osb = os * (int64_t)sizeof(float);
    const int64_t how = (acc ? {START_LOAD} : e && e->bias ? {START_BIAS} : 0)
        | (e ? {END_EPI} | (acc && e->bias ? {EPI_BIAS} : 0) | (e->res ? {EPI_RES} : 0)
               | (e->act & 1 ? {EPI_LO} : 0) | (e->act & 2 ? {EPI_HI} : 0) : 0);
{chr(10).join(cases)}
}}
"""
