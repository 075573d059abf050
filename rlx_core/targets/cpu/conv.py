"""The CPU's convolution kernels: HIR ``conv2d`` / ``conv2d_fused`` kept whole, in f32.

Decomposed, a 3x3 convolution is a pad, one strided slice per tap, a concat of the taps (the
im2col matrix, written twice), a GEMM and, behind a reshape the GEMM epilogue cannot see
through, a bias / ReLU / residual pass over the result: on ResNet-50 the GEMM was under half
of each conv. Kept whole, a convolution is one kernel of two kinds:

- **implicit GEMM** (every conv whose groups have several input channels): the output of
  one image and group is the GEMM ``Y (O/G x OH*OW) = W (O/G x C/G*KH*KW) . cols``, run on the
  own GEMM's register tile (sgemm.py: ``rlx_sgemm_tile``, A = the filter read in place). The
  im2col matrix ``cols`` is never materialised: ``rlx_conv_pack_panel`` writes each KC x NR
  block of it straight from the NCHW input into the packed B panel the tile reads (a copy of
  one run of contiguous floats per output row and tap at stride 1, zeros for the padding), so
  the input is read from L2 once per tap and no pad or slice buffer exists. A 1x1 stride-1
  convolution needs no im2col at all: its input rows are B, and the GEMM reads or packs them
  as any B (``rlx_sgemm_core``).
- **shifted** (a stride-1 window of several taps, up to 128 output channels per group, rows
  14 or more wide; ``use_shifted``): the same
  GEMM in the padded input's coordinates, where each tap's im2col rows are the padded planes
  shifted by a constant, read by the tile in place (``rlx_conv_shifted``): no panel packing,
  at the price of computing (kw - 1) dw dropped columns per output row. The 3x3 convs of
  ResNet-50 at 28x28 and 14x14 went from 0.73x to 0.83-0.84x of ONNX Runtime's CPU time (1
  thread, Zen 1); with many output channels, or a 7x7 output, the packed path stays faster.
- **blocked direct** (groups 1, a parameter filter, where conv_blocked.use_blocked says so):
  conv_blocked.py, on a channel-blocked copy of the input with the filter prepacked.
- **Winograd** (3x3, stride 1, groups 1, a parameter filter, where winograd_tile says so):
  winograd.py's F(4x4, 3x3) or F(2x2, 3x3), its GEMMs on the blocked direct kernel's tile.
- **depthwise** (one input channel per group): depthwise.py, in NCHW or NCHW8c.

The epilogue runs where the result is stored: bias, the residual (``conv2d_fused``'s fourth
input: ResNet's skip connection) and max / min / clip (ReLU, ReLU6), on every register tile
as soon as it is final (the GEMM's tile epilogue hook), or on each finished depthwise row. The
arithmetic is the decomposition's, in its order: ``act((acc + bias) + residual)``.

The work is shared over the team in items of (image, group, row block, column block) (depthwise:
image and channel); each item packs its own panels into its thread's buffer. Row blocks exist
only where there are too few other items to go round (a 14x14 layer at batch 1), and a thread
running alone ignores them: each row block packs the same im2col panels again, which made
ResNet's late 3x3 convs (256 x 2304 x 196) take 1.8x the time of a plain GEMM of that size.
"""

from __future__ import annotations

from dataclasses import dataclass

from rlx_core.ir.graph import Node
from rlx_core.targets.c_common import ctype_table as ct
from rlx_core.targets.c_common.expr import RenderError
from rlx_core.targets.c_common.kernels import KernelEnv
from rlx_core.targets.c_common.loops import Writer
from rlx_core.targets.cpu import conv_blocked, depthwise, winograd
from rlx_core.targets.cpu.env import env_choice, env_flag

IMPL = "rlx-conv"
IMPL_SHIFTED = "rlx-conv-shifted"  # stride-1 windows on the shifted padded input
IMPLS = (IMPL, IMPL_SHIFTED)
SHIFT_WASTE = 1.3  # at most this many tiles against the packed path's (see use_shifted)
SHIFT_MAX_ROWS = 128  # output channels per group, at most
SHIFT_WINDOW_BYTES = 28 * 1024  # what a panel's taps read over all channels, at most
DTYPES: tuple[str, ...] = ("f32",)
OPS: tuple[str, ...] = ("conv2d", "conv2d_fused")
ACT_CODES = {"none": 0, "max": 1, "min": 2, "clip": 3}
COL_BLOCK = 256  # output positions per item: a multiple of both panel widths (16, 32)
ROW_BLOCK = 48  # output channels per item when rows are split: whole 6- and 8-row tiles
MIN_ITEMS = 8  # split rows too when (image, group, column block) items are fewer

# after sgemm.SOURCE, whose tile, scratch buffer and core it uses
SOURCE = r"""
#ifndef RLX_CONV_H
#define RLX_CONV_H
/* one image and group of a convolution: its input channels c (h x w each), the window */
typedef struct {
    int64_t c, h, w, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow;
} rlx_conv_geo;

/* the store of a tile: y = act((y + bias[i]) + res[i, j]); y, res: rows ld apart */
typedef struct {
    float *y;
    const float *bias, *res;
    int64_t ld;
    int act;  /* 0 none, 1 max(., lo), 2 min(., hi), 3 min(max(., lo), hi) */
    float lo, hi;
} rlx_conv_epi_ctx;

/* threads sharing the current loop (1 outside a parallel region) */
static inline int rlx_conv_team(void) {
#ifdef _OPENMP
    return omp_get_num_threads();
#else
    return 1;
#endif
}

static inline float rlx_conv_act(float v, int act, float lo, float hi) {
    if (act & 1) v = rlx_max_f(v, lo);
    if (act & 2) v = rlx_min_f(v, hi);
    return v;
}

/* the epilogue of one output, the decomposition's order: act((v + bias) + res[at]) (res 0:
   none); every kernel that stores outputs one at a time calls it */
static inline float rlx_conv_fin(float v, float bias, int has_bias, const float *res,
                                 int64_t at, int act, float lo, float hi) {
    if (has_bias) v = v + bias;
    if (res) v = v + res[at];
    return act ? rlx_conv_act(v, act, lo, hi) : v;
}

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
/* the same on 8 outputs in a register: b added when has_bias, res 8 floats (or 0); the
   blends are rlx_max_f / rlx_min_f exactly: keep a where a > lo (a < hi) or a is NaN */
static inline __attribute__((always_inline)) __m256 rlx_conv_fin8(
        __m256 a, int has_bias, __m256 b, const float *res, int act, __m256 vlo, __m256 vhi) {
    if (has_bias) a = _mm256_add_ps(a, b);
    if (res) a = _mm256_add_ps(a, _mm256_loadu_ps(res));
    if (act & 1) a = _mm256_blendv_ps(vlo, a, _mm256_cmp_ps(a, vlo, _CMP_NLE_UQ));
    if (act & 2) a = _mm256_blendv_ps(vhi, a, _mm256_cmp_ps(a, vhi, _CMP_NGE_UQ));
    return a;
}
#endif
#if defined(__AVX512F__)
/* the same on 16 outputs (two NCHW8c pixels: b holds the 8 channels' bias twice) */
static inline __attribute__((always_inline)) __m512 rlx_conv_fin16(
        __m512 a, int has_bias, __m512 b, const float *res, int act, __m512 vlo, __m512 vhi) {
    if (has_bias) a = _mm512_add_ps(a, b);
    if (res) a = _mm512_add_ps(a, _mm512_loadu_ps(res));
    if (act & 1) a = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(a, vlo, _CMP_NLE_UQ), vlo, a);
    if (act & 2) a = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(a, vhi, _CMP_NGE_UQ), vhi, a);
    return a;
}
#endif

/* rows [i0, i1) x columns [j0, j1) of a finished tile (rlx_sg_epi) */
static void rlx_conv_epi(const void *vc, int64_t i0, int64_t i1, int64_t j0, int64_t j1) {
    const rlx_conv_epi_ctx *e = (const rlx_conv_epi_ctx *)vc;
    const int act = e->act;
    const float lo = e->lo, hi = e->hi;
    for (int64_t i = i0; i < i1; ++i) {
        float *restrict y = e->y + i * e->ld;
        if (e->bias) {
            const float b = e->bias[i];
            #pragma omp simd
            for (int64_t j = j0; j < j1; ++j) y[j] = y[j] + b;
        }
        if (e->res) {
            const float *restrict r = e->res + i * e->ld;
            #pragma omp simd
            for (int64_t j = j0; j < j1; ++j) y[j] = y[j] + r[j];
        }
        if (act) {
            #pragma omp simd
            for (int64_t j = j0; j < j1; ++j) y[j] = rlx_conv_act(y[j], act, lo, hi);
        }
    }
}

/* rows [p0, p0 + kc) x columns [j0, j0 + nr) of the image's im2col matrix (row p: channel
   p / (kh kw), tap p % (kh kw); column j: output position j) as one panel of kc rows of
   RLX_SG_NR floats, zero padded on the right. The columns are cut into runs inside one
   output row; each run of each row is a strided (at stride 1: contiguous) read of one input
   row, with zeros where the window leaves the input */
static void rlx_conv_pack_panel(const rlx_conv_geo *g, const float *x, int64_t p0, int64_t kc,
                                int64_t j0, int64_t nr, float *dst) {
    enum { NR = RLX_SG_NR };
    int64_t ry[NR], rx[NR], rn[NR], rd[NR];  /* each run: output row, first column, length, offset */
    int runs = 0;
    for (int64_t j = 0; j < nr;) {
        const int64_t y = (j0 + j) / g->ow, x0 = (j0 + j) % g->ow;
        const int64_t len = g->ow - x0 < nr - j ? g->ow - x0 : nr - j;
        ry[runs] = y; rx[runs] = x0; rn[runs] = len; rd[runs] = j; ++runs;
        j += len;
    }
    const int64_t khw = g->kh * g->kw, hw = g->h * g->w, sw = g->sw;
    int64_t c = p0 / khw, t = p0 % khw;
    int64_t ki = t / g->kw, kj = t % g->kw;
    for (int64_t p = 0; p < kc; ++p) {
        float *restrict d = dst + p * NR;
        const float *xc = x + c * hw;
        const int64_t dy = ki * g->dh - g->ph, dx = kj * g->dw - g->pw;
        for (int r = 0; r < runs; ++r) {
            float *restrict dr = d + rd[r];
            const int64_t len = rn[r], iy = ry[r] * g->sh + dy;
            if (iy < 0 || iy >= g->h) {
                for (int64_t j = 0; j < len; ++j) dr[j] = 0.0f;
                continue;
            }
            const float *row = xc + iy * g->w;
            const int64_t ix0 = rx[r] * sw + dx, ixl = ix0 + (len - 1) * sw;
            if (ix0 >= 0 && ixl < g->w) {
                if (sw == 1 && len == NR) {  /* a whole panel row: two vector copies */
                    memcpy(dr, row + ix0, NR * sizeof(float));
                } else if (sw == 1) {
                    const float *restrict sr = row + ix0;
                    for (int64_t j = 0; j < len; ++j) dr[j] = sr[j];
                } else
                    for (int64_t j = 0; j < len; ++j) dr[j] = row[ix0 + j * sw];
                continue;
            }
            for (int64_t j = 0; j < len; ++j) {
                const int64_t ix = ix0 + j * sw;
                dr[j] = ix >= 0 && ix < g->w ? row[ix] : 0.0f;
            }
        }
        for (int64_t j = nr; j < NR; ++j) d[j] = 0.0f;
        if (++kj == g->kw) {
            kj = 0;
            if (++ki == g->kh) { ki = 0; ++c; }
        }
    }
}

/* rows [0, m) x columns [n0, n1) of one image and group: C = A cols, A (m x k) the filter
   rows (k = c kh kw floats each), C rows ldc apart; epi(ectx) on each finished tile. The loop
   nest of rlx_sgemm_core with the im2col panels packed from x */
static void rlx_conv_gemm(int64_t m, int64_t k, const float *A, const rlx_conv_geo *g,
                          const float *x, float *C, int64_t ldc, int64_t n0, int64_t n1,
                          rlx_sg_epi epi, const void *ectx) {
    enum { MR = RLX_SG_MR, NR = RLX_SG_NR, KC = RLX_SG_KC, NC = RLX_SG_NC, MC = RLX_SG_MC };
    for (int64_t jc = n0; jc < n1; jc += NC) {
        const int64_t nc = n1 - jc < NC ? n1 - jc : NC;
        const int64_t panels = (nc + NR - 1) / NR;
        const int64_t kcap = k < KC ? k : KC;
        float *bp = rlx_sgemm_scratch(panels * NR * kcap);
        if (bp == 0) {  /* out of memory for the panels: one column at a time, slow but right */
            float col[NR];
            for (int64_t j = jc; j < jc + nc; ++j)
                for (int64_t i = 0; i < m; ++i) {
                    float s = 0.0f;
                    for (int64_t p = 0; p < k; ++p) {
                        rlx_conv_pack_panel(g, x, p, 1, j, 1, col);
                        s += A[i * k + p] * col[0];
                    }
                    C[i * ldc + j] = s;
                }
            if (epi) epi(ectx, 0, m, jc, jc + nc);
            continue;
        }
        for (int64_t pc = 0; pc < k; pc += KC) {
            const int64_t kc = k - pc < KC ? k - pc : KC;
            const int last = pc + kc >= k;
            for (int64_t q = 0; q < panels; ++q) {
                const int64_t j = jc + q * NR, nr = jc + nc - j < NR ? jc + nc - j : NR;
                rlx_conv_pack_panel(g, x, pc, kc, j, nr, bp + q * NR * kc);
            }
            for (int64_t ic = 0; ic < m; ic += MC) {
                const int64_t ie = m - ic < MC ? m : ic + MC;
                for (int64_t q = 0; q < panels; ++q) {
                    const int64_t j = jc + q * NR, nr = jc + nc - j < NR ? jc + nc - j : NR;
                    for (int64_t i = ic; i < ie; i += MR) {
                        const int64_t mr = ie - i < MR ? ie - i : MR;
                        rlx_sgemm_tile(kc, A + i * k + pc, k, 1, bp + q * NR * kc, NR,
                                       C + i * ldc + j, ldc, pc > 0, mr, nr, 0);
                        if (epi && last) epi(ectx, i, i + mr, j, j + nr);
                    }
                }
            }
        }
    }
}

/* rows [r0, r1) and columns [j0, j1) of the output of one image and group (y: its first
   row, o = r1 - r0 <= its rows): the implicit GEMM, or the plain GEMM on the input rows for a
   1x1 stride-1 unpadded window. bias, res (or 0) as the output, from row r0 */
static void rlx_conv_block(const rlx_conv_geo *g, const float *x, const float *wt,
                           const float *bias, const float *res, float *y, int64_t r0,
                           int64_t r1, int64_t j0, int64_t j1, int act, float lo, float hi) {
    const int64_t k = g->c * g->kh * g->kw, p = g->oh * g->ow;
    rlx_conv_epi_ctx e = {y + r0 * p, bias ? bias + r0 : 0, res ? res + r0 * p : 0, p, act,
                          lo, hi};
    const int any = bias || res || act;
    if (k == 0) {  /* no input channels: the GEMMs store nothing for an empty K once their
                      scratch exists (their K loop never runs), so write the zeros here */
        for (int64_t i = r0; i < r1; ++i)
            for (int64_t j = j0; j < j1; ++j) y[i * p + j] = 0.0f;
        if (any) rlx_conv_epi(&e, 0, r1 - r0, j0, j1);
        return;
    }
    if (g->kh == 1 && g->kw == 1 && g->sh == 1 && g->sw == 1 && g->ph == 0 && g->pw == 0)
        rlx_sgemm_core(r1 - r0, k, wt + r0 * k, k, 1, x, p, 1, 0, y + r0 * p, p, j0, j1,
                       any ? rlx_conv_epi : 0, &e);
    else
        rlx_conv_gemm(r1 - r0, k, wt + r0 * k, g, x, y + r0 * p, p, j0, j1,
                      any ? rlx_conv_epi : 0, &e);
}

/* rows [r0, r1) and columns [j0, j1) of a stride-1 convolution's output in padded
   coordinates: position q = oy * wp + ox of the padded input's row width wp = w + 2 pw
   (columns ox >= ow are not outputs). In those coordinates tap (ki, kj) of every output reads
   the padded input at q + ki dh wp + kj dw: the im2col rows of a tap are the padded input
   itself, shifted, so nothing is packed; the tile reads its 32 (16) floats straight from the
   rows [ylo, yhi) of the padded planes this item copies into its scratch (xp). The filter rows
   of a tile are packed once per tile, taps outer and channels inner (a tap's slice of A is
   then contiguous), and the tile sums every tap and channel in its registers before its
   valid columns are stored, with the epilogue. Returns 0 when out of memory (the caller
   then runs rlx_conv_block) */
static int rlx_conv_shifted(const rlx_conv_geo *g, const float *x, const float *wt,
                            const float *bias, const float *res, float *y, int64_t r0,
                            int64_t r1, int64_t j0, int64_t j1, int act, float lo, float hi) {
    enum { MR = RLX_SG_MR, NR = RLX_SG_NR };
    const int64_t c = g->c, khw = g->kh * g->kw, k = c * khw, p = g->oh * g->ow;
    const int64_t wp = g->w + 2 * g->pw, hp = g->h + 2 * g->ph;
    const int64_t ylo = j0 / wp;
    int64_t yhi = (j1 - 1) / wp + (g->kh - 1) * g->dh + 1;
    if (yhi > hp) yhi = hp;
    const int64_t ps = (yhi - ylo) * wp;  /* floats per channel of xp */
    const int64_t apk = (khw * c) * MR, xfl = c * ps + 2 * NR + (g->kw - 1) * g->dw;
    float *buf = rlx_sgemm_scratch(apk + xfl + 16);
    if (buf == 0) return 0;
    float *ap = buf, *xp = buf + apk;
    /* the padded rows [ylo, yhi) of every channel; zeros past the last one (a tile's
       columns past j1 read there, and are not stored) */
    for (int64_t ci = 0; ci < c; ++ci) {
        const float *xc = x + ci * g->h * g->w;
        for (int64_t r = ylo; r < yhi; ++r) {
            float *d = xp + ci * ps + (r - ylo) * wp;
            const int64_t iy = r - g->ph;
            if (iy < 0 || iy >= g->h) {
                memset(d, 0, (size_t)wp * sizeof(float));
                continue;
            }
            for (int64_t j = 0; j < g->pw; ++j) d[j] = d[g->pw + g->w + j] = 0.0f;
            memcpy(d + g->pw, xc + iy * g->w, (size_t)g->w * sizeof(float));
        }
    }
    memset(xp + c * ps, 0, (size_t)(xfl - c * ps) * sizeof(float));
    rlx_conv_epi_ctx e = {y, bias, res, p, act, lo, hi};
    const int any = bias || res || act;
    float t[MR * NR];
    for (int64_t i = r0; i < r1; i += MR) {
        const int64_t mr = r1 - i < MR ? r1 - i : MR;
        /* the tile's filter rows: ap[(tap * c + ci) * MR + ii] = wt[(i + ii) k + ci khw + tap] */
        for (int64_t ii = 0; ii < MR; ++ii) {  /* each filter row read in order */
            const float *wr = wt + (i + ii) * k;
            float *d = ap + ii;
            if (ii >= mr) {
                for (int64_t q = 0; q < k; ++q) d[q * MR] = 0.0f;
                continue;
            }
            for (int64_t ci = 0; ci < c; ++ci)
                for (int64_t tap = 0; tap < khw; ++tap) d[(tap * c + ci) * MR] = wr[ci * khw + tap];
        }
        for (int64_t q0 = j0; q0 < j1; q0 += NR) {
            for (int64_t tap = 0; tap < khw; ++tap) {
                const int64_t off = (tap / g->kw) * g->dh * wp + (tap % g->kw) * g->dw;
                rlx_sgemm_tile(c, ap + tap * c * MR, 1, MR, xp + q0 - ylo * wp + off, ps, t,
                               NR, tap > 0, MR, NR, 1);
            }
            /* the valid columns, a run per output row, with the epilogue */
            const int64_t qe = j1 - q0 < NR ? j1 : q0 + NR;
            for (int64_t q = q0; q < qe;) {
                const int64_t oy = q / wp, ox = q % wp;
                int64_t len = wp - ox < qe - q ? wp - ox : qe - q;
                if (ox < g->ow) {
                    const int64_t n = ox + len > g->ow ? g->ow - ox : len, yo = oy * g->ow + ox;
                    for (int64_t ii = 0; ii < mr; ++ii) {
                        float *restrict yr = y + (i + ii) * p + yo;
                        const float *restrict tr = t + ii * NR + (q - q0);
                        for (int64_t l = 0; l < n; ++l) yr[l] = tr[l];
                    }
                    if (any) rlx_conv_epi(&e, i, i + mr, yo, yo + n);
                }
                q += len;
            }
        }
    }
    return 1;
}

#endif
"""


def _ints(node: Node, name: str) -> tuple[int, int]:
    a, b = (int(v) for v in node.attr(name))
    return a, b


@dataclass(frozen=True)
class PackedFilter:
    """A convolution's filter as the renderer prepacked it (renderer.packed_conv), which
    decides the kernel once: ``wino`` the m of the Winograd F(m, 3) it was transformed for
    (winograd_tile; 0: packed for the blocked direct kernel), ``lazy`` whether Winograd
    transforms it in each call from the direct kernel's packing (winograd.filter_on_the_fly)."""

    ptr: str  # the kernel parameter holding it
    wino: int = 0
    lazy: bool = False


def emit_conv(env: KernelEnv, w: Writer, node: Node, packed: PackedFilter | None = None,
              lay: int = 0) -> str:
    """Write the kernel's loop over its work items; returns its impl label. ``packed``: the
    filter prepacked for the blocked direct kernel (conv_blocked.py, groups 1) or for
    Winograd (winograd.py), or None. ``lay``: which sides are NCHW8c (layout.py's
    plan): 1 the input, 2 the output, 4 the residual (a depthwise conv's: all or none);
    those run on conv_blocked.py's kernels (``packed`` given for groups 1, a channel
    multiplier of 1 for a depthwise conv)."""
    d = node.type.dtype
    if d.name not in DTYPES:
        raise RenderError(f"{node.op} on {d} has no CPU kernel",
                          hint="the capability table claims convolutions in f32 only")
    residual = node.op == "conv2d_fused" and bool(node.attr("residual"))
    ins = [env.inputs[v] for v in node.inputs]
    xb, wb = ins[0], ins[1]
    res = ins[-1] if residual else None
    bias = ins[2] if len(ins) - int(residual) == 3 else None
    out = env.outputs[node.name]
    n, c, h, wd = xb.type.shape
    o, cg, kh, kw = wb.type.shape
    groups = int(node.attr("groups"))
    og = o // groups
    oh, ow = out.type.shape[2:]
    (sh, sw), (ph, pw), (dh, dw) = (_ints(node, a) for a in ("stride", "padding", "dilation"))
    act, lo, hi = 0, 0.0, 0.0
    if node.op == "conv2d_fused":
        act = ACT_CODES[str(node.attr("act"))]
        lo, hi = float(node.attr("lo")), float(node.attr("hi"))
    p = oh * ow
    geo = f"{{{cg}, {h}, {wd}, {kh}, {kw}, {sh}, {sw}, {ph}, {pw}, {dh}, {dw}, {oh}, {ow}}}"
    bias_p = bias.ptr if bias else "0"
    res_p = res.ptr if res else "0"
    tail = f"{act}, {ct.literal(lo, d)}, {ct.literal(hi, d)}"
    flops = n * o * p * cg * kh * kw
    if cg == 1 and groups > 1 and lay:
        return depthwise.emit_blocked(env, w, geo, n, xb.ptr, wb.ptr, c, h * wd, o, p,
                                      bias_p if bias else None, res_p if res else None,
                                      out.ptr, tail, flops, kh * kw, bool(ph or pw),
                                      depthwise.small_map(kh, kw, sh, sw, dh, dw, oh, ow))
    # depthwise (a channel multiplier og >= 1); a one-channel groups-1 conv with a packed
    # filter is a stem for the blocked kernel (its filter is already in the prepack list,
    # and layout.py may have planned its output NCHW8c)
    if cg == 1 and (groups > 1 or packed is None):
        depthwise.emit_nchw(env, w, geo, n, xb.ptr, wb.ptr, c, h * wd, o, p, kh, kw, sh, sw,
                            oh, bias.ptr if bias else None, res_p if res else None, out.ptr,
                            tail, flops, bool(ph or pw))
        return IMPL
    if packed is not None and packed.wino:
        return winograd.emit_winograd(env, w, packed.wino, packed.ptr, geo, n, xb.ptr, wb.ptr,
                                      c, o, oh, ow, bias_p if bias else None,
                                      res_p if res else None, out.ptr, tail, flops, lay,
                                      packed.lazy)
    if packed is not None and groups == 1:
        fold = conv_blocked.images_per_call(
            n, c * (oh if kh == 1 else h) * wd * 4, conv_blocked.packed_bytes(o, c, kh, kw),
            bool(lay & 1) and not (ph or pw))
        return conv_blocked.emit_blocked(env, w, packed.ptr, geo, n, xb.ptr, wb.ptr, c, h * wd, o,
                                         oh, ow, bias_p if bias else None,
                                         res_p if res else None, out.ptr, tail, flops, lay,
                                         fold=fold)
    if lay:
        raise RenderError(f"{node.name}: a blocked layout (NCHW8c) reached a convolution "
                          "without a blocked kernel",
                          hint="layout.py's plan and the renderer's kernel choice disagree")
    shifted = use_shifted(cg, og, h, wd, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow)
    wp = wd + 2 * pw
    span = oh * wp if shifted else p  # the column space: padded coordinates when shifted
    cols = -(-span // COL_BLOCK)
    rows = 1
    if n * groups * cols < MIN_ITEMS and og > ROW_BLOCK:
        rows = min(-(-og // ROW_BLOCK), -(-MIN_ITEMS // (n * groups * cols)))
    rstep = -(-og // rows)
    rstep = -(-rstep // 24) * 24  # whole 6- and 8-row tiles
    rows = -(-og // rstep)
    items = n * groups * rows * cols
    conv_blocked.open_items(env, w, flops, items, geo)
    w.line(f"const int64_t cb = it % {cols}, rb = (it / {cols}) % {rows}, "
           f"gi = (it / {cols * rows}) % {groups}, b = it / {cols * rows * groups};")
    conv_blocked.item_rows(w, rows, rstep, og, "r0", "r1")  # the im2col panels: once alone
    w.line(f"const int64_t j0 = cb * {COL_BLOCK}, j1 = j0 + {COL_BLOCK} < {span} ? "
           f"j0 + {COL_BLOCK} : {span};")
    w.line(f"const int64_t yo = (b * {o} + gi * {og}) * {p};")
    bias_g = f"{bias_p} + gi * {og}" if bias else "0"
    res_g = f"{res_p} + yo" if res else "0"
    args = (f"&geo, {xb.ptr} + (b * {c} + gi * {cg}) * {h * wd}, "
            f"{wb.ptr} + gi * {og * cg * kh * kw}, {bias_g}, {res_g}, {out.ptr} + yo, r0, r1")
    if shifted:
        # out of memory for the scratch: the same outputs by the packing kernel (an output
        # position f(q) = (q / wp) * ow + min(q % wp, ow) for the item's padded columns)
        w.open(f"if (!rlx_conv_shifted({args}, j0, j1, {tail}))")
        w.line(f"rlx_conv_block({args}, (j0 / {wp}) * {ow} + (j0 % {wp} < {ow} ? j0 % {wp} : {ow}), "
               f"(j1 / {wp}) * {ow} + (j1 % {wp} < {ow} ? j1 % {wp} : {ow}), {tail});")
        w.close()
    else:
        w.line(f"rlx_conv_block({args}, j0, j1, {tail});")
    w.close()
    return IMPL_SHIFTED if shifted else IMPL


def use_shifted(cg: int, og: int, h: int, w: int, kh: int, kw: int, sh: int, sw: int,
                ph: int, pw: int, dh: int, dw: int, oh: int, ow: int) -> bool:
    """Run a convolution on the shifted padded input (rlx_conv_shifted) rather than packed
    im2col panels. The shifted path saves the packing, which costs most where few filter rows
    share each packed panel, but its tile reads B from the padded planes, rows a plane apart:
    it wins only while a panel's window over all channels stays in L1 and the rows are few.
    CPU time, 1 thread, Zen 1, against the packed path: 64 -> 64 at 28x28 and 56x56, 128 ->
    128 at 14x14: 13-20% faster; 128 -> 256 at 28x28, 256 -> 512 at 14x14: the same;
    256 -> 256 at 28x28: 7% slower; 512 -> 512 at 7x7: 39% slower."""
    if not env_flag("RLX_CONV_SHIFTED", True):
        return False
    if (sh, sw) != (1, 1) or kh * kw == 1 or cg < 8 or og > SHIFT_MAX_ROWS:
        return False
    nr = 16  # AVX2's panel width
    wp = w + 2 * pw
    window = cg * ((kh - 1) * dh * wp + nr + (kw - 1) * dw) * 4  # bytes a panel reads
    tiles_shifted = -(-oh * wp // nr)
    tiles_packed = -(-oh * ow // nr)
    # under 8 tiles of columns (a 7x7 output) the filter is packed for too few tiles
    return (window <= SHIFT_WINDOW_BYTES and tiles_shifted >= 8
            and tiles_shifted <= SHIFT_WASTE * tiles_packed)


def winograd_tile(n: int, c: int, o: int, groups: int, kh: int, kw: int, sh: int, sw: int,
                  dh: int, dw: int, oh: int, ow: int) -> int:
    """The m of the Winograd F(m x m, 3 x 3) a convolution with a parameter filter runs on
    (winograd.py), or 0 for the direct kernels. Only 3x3, stride 1, undilated, groups 1, whole
    blocks of 8 input and output channels, where the blocked kernel could run (mode not "0").
    ``RLX_WINOGRAD``: "0" never, "2" / "4" that tile for every such shape (A/B timing,
    tests); anything else is an ArgumentError."""
    env = env_choice("RLX_WINOGRAD", ("0", "2", "4"))
    if (env == "0" or conv_blocked.mode() == "0" or groups != 1 or (kh, kw) != (3, 3)
            or (sh, sw) != (1, 1) or (dh, dw) != (1, 1) or c % 8 or o % 8):
        return 0
    if env in ("2", "4"):
        return int(env)
    if conv_blocked.mode() == "all" or c < WINO_MIN_CHANNELS:
        return 0
    for m in (4, 2):  # the larger tile while the batch has tiles enough for the GEMMs
        if n * -(-oh // m) * -(-ow // m) >= WINO_MIN_TILES[m]:
            return m
    return 0


def winograd_tile_of(node: Node, x_shape: tuple[int, ...], w_shape: tuple[int, ...]) -> int:
    """winograd_tile for a convolution node of input ``x_shape`` and OIHW filter ``w_shape``."""
    o, c, kh, kw = (int(v) for v in w_shape)
    sh, sw = (int(v) for v in node.attr("stride"))
    dh, dw = (int(v) for v in node.attr("dilation"))
    oh, ow = (int(v) for v in node.type.shape[2:])
    return winograd_tile(int(x_shape[0]), c, o, int(node.attr("groups")), kh, kw, sh, sw, dh,
                         dw, oh, ow)


# the rule, from single layers (bench_winograd.py: 3x3 + bias + ReLU, CPU time, 1 thread, Zen 1,
# ONNX Runtime's ratio, direct -> F(2, 3) -> F(4, 3)): 64->64 at 28x28 1.04x -> 1.21x ->
# 1.68x (batch 1), 0.97x -> 0.98x -> 1.56x (8); 128->128 at 14x14 1.00x -> 1.46x -> 1.59x,
# 0.95x -> 1.29x -> 1.46x; 64->64 at 56x56 0.97x -> 1.01x -> 1.61x. Few tiles leave the
# GEMMs' 6-pixel tile idle and stream the transformed filter (36 or 16 copies) for them:
# 256->256 at 7x7 1.04x -> 1.25x -> 0.83x (batch 1: 4 tiles of F(4, 3), 16 of F(2, 3)),
# 0.94x -> 1.28x -> 1.88x (8); 512->512 at 7x7 1.02x -> 1.47x -> 1.16x (1); 512->512 at 4x4
# 1.24x -> 1.09x -> 0.84x (1: 1 and 4 tiles), 1.24x -> 2.51x -> 3.40x (8: 8 and 32 tiles)
WINO_MIN_CHANNELS = 16
WINO_MIN_TILES = {4: 8, 2: 12}  # tiles of F(m, 3) over the batch, at least
