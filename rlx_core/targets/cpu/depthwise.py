"""The CPU's depthwise convolutions (one input channel per group), in NCHW and in NCHW8c.

conv.py's ``emit_conv`` hands every convolution with one input channel per group here:

- **NCHW** (items: image, output channel; any channel multiplier): at stride 1 or 2 on the
  padded plane split into its stride x stride phases, where every tap of every output is one
  flat offset, so 8 outputs sum all their taps in a register whatever the row width
  (``rlx_conv_dw_flat``, ``use_dw_flat``); otherwise per output row, vectorized over the
  columns whose window lies inside the input, with unrolled copies for 3x3 and 5x5 at
  stride 1 and 2 (``rlx_conv_dw_row``).
- **NCHW8c** (layout.py keeps input, output and residual blocked; a channel multiplier of 1;
  items: image, block of 8 channels): each output pixel's 8 channels are one vector, every
  tap one FMA (``rlx_dw_b``). Columns whose window lies inside the input run in groups of
  pixels with the taps unrolled (3x3 and 5x5 at stride 1 and 2 get their own copies); each
  edge pixel runs only its taps inside the input, so a 7x7 or 4x4 map (MobileNetV2's late
  layers: 2 of 7 columns, 2 of 4, are edges) pays no per-tap test on its interior.
  Against the kernel before (8 pixels in flight, edges tested per tap, the window rows
  found by division each row), CPU time of one image, Zen 1: 576 channels at 7x7 71-92 ->
  45-55 us, 192 at 14x14 64-98 -> 42-56 us, 144 at 28x28 stride 2 52-54 -> 33-46 us; the
  11 MobileNetV2-like shapes together 754-920 -> 567-580 us. An input above
  conv_blocked.L3_BYTES (a batch of 8 of MobileNetV2's 96 x 56 x 56 expansion, 9.6 MB)
  runs backward over the items, reading first what the conv before it wrote last:
  1.95-1.99 -> 1.52-1.67 ms there (144 x 56 x 56: 2.99 -> 2.60; 1 thread, Zen 1, loaded;
  ``RLX_CPU_BACKWARD=0`` for A/B).
  On AVX-512, stride-1 rows of 8 inner pixels or more run two pixels a vector (16 floats
  contiguous in NCHW8c, the tap's 8 weights broadcast twice from memory), 8 pixels a group,
  then 4, then 2 (``rlx_dw_b16``), in a copy of their own; shorter rows (7x7, 4x4 maps) and
  stride 2 (a pair's inputs two pixels apart: one shuffle per FMA, no gain) stay on ymm.
  MobileNetV2 b8, 1 thread, Emerald Rapids, thread CPU, A/B in one process (chrt -f 1, load
  15): its depthwise convs 2.04 -> 1.92 ms; 144 @28 0.302 -> 0.234, 192 @14 0.105 -> 0.092.
  3x3 maps of up to 16 output columns at stride 1 or 2 (``rlx_dw_b_small``, AVX-512; one
  function per stride and width, named by ``small_map`` into the kernel; ``RLX_DW_SMALL=0``
  for A/B): the block's input window is first copied into a zero-padded buffer on the stack
  (at stride 2 split into its two column phases), then every row runs without edge tests,
  pixel pairs per zmm, an odd last pixel in a ymm. Same A/B (chrt -f 1, load 5): 384 @7 0.073 -> 0.038,
  576 @7 0.110 -> 0.060, 960 @4 0.073 -> 0.044, 192 @14 0.092 -> 0.060, stride 2 576 @7->4
  0.054 -> 0.036; all 17 depthwise convs 1.95 -> 1.49 ms.

The epilogue (bias, residual, max / min / clip) is conv.py's ``rlx_conv_fin`` / ``_fin8``,
on each output as it is finished, in the decomposition's order. The row kernels leave out the
taps over the padding, where a weight of inf or NaN would make the output NaN (0 * inf, as
the phase planes' zeros do; a cpu fuzz finding): a padded conv checks its whole filter once a
call (``rlx_dw_nonfinite``) and, only where a weight is not finite, ``rlx_dw_pad_nan`` sets
those outputs after each item. Checked per item instead, 960 channels at 7x7 (batch 8,
NCHW8c) took 0.153 -> 0.180 ms; once a call, the four MobileNetV2-like shapes of the A/B
(NCHW8c and rows, Emerald Rapids, thread CPU, FIFO, load 8) are within their noise. No
pointer is formed outside its array (a row pointer before the plane's first row was
undefined behaviour: the row's pointer is taken only for the window rows inside the input).
"""

from __future__ import annotations

from rlx_core.targets.c_common.kernels import KernelEnv
from rlx_core.targets.c_common.loops import Writer
from rlx_core.targets.cpu import conv_blocked
from rlx_core.targets.cpu.env import env_flag

IMPL_B = "rlx-conv-blocked-dw"  # NCHW8c (rlx_dw_b); NCHW depthwise convs keep conv.IMPL
IMPLS = (IMPL_B,)
BLOCK = 8  # channels per vector in NCHW8c
FLAT_TAPS = 49  # RLX_DW_FLAT_TAPS: windows of up to 7 x 7 on the phase planes and blocked
SMALL_W = 16  # RLX_DW_SMALL_W: output columns of the widest map rlx_dw_bs_* takes
SMALL_FLOATS = 16 * 16 * BLOCK  # RLX_DW_SMALL_FLOATS: its padded copy of a block's window

# after conv.SOURCE (rlx_conv_geo, the epilogue) and sgemm.SOURCE (its scratch buffer)
SOURCE = r"""
#ifndef RLX_DW_H
#define RLX_DW_H
#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define RLX_DW_VEC 1
#else
#define RLX_DW_VEC 0
#endif
/* the window rows [*ki0, *ki1) of output row oy that lie inside the input's h rows, and the
   columns [*jlo, *jhi) whose window columns all lie inside its w columns */
static inline void rlx_dw_span(const rlx_conv_geo *g, int64_t oy, int64_t kh, int64_t kw,
                               int64_t sw, int64_t *ki0, int64_t *ki1, int64_t *jlo,
                               int64_t *jhi) {
    const int64_t base = oy * g->sh - g->ph, dh = g->dh;  /* input row of window row 0 */
    int64_t a = base < 0 ? (-base + dh - 1) / dh : 0;
    int64_t b = g->h - 1 - base < 0 ? 0 : (g->h - 1 - base) / dh + 1;
    if (b > kh) b = kh;
    if (a > b) a = b;
    *ki0 = a;
    *ki1 = b;
    int64_t lo = g->pw > 0 ? (g->pw + sw - 1) / sw : 0;
    const int64_t lim = g->w - 1 + g->pw - (kw - 1) * g->dw;
    int64_t hi = lim < 0 ? 0 : lim / sw + 1;
    if (hi > g->ow) hi = g->ow;
    if (lo > hi) lo = hi;
    *jlo = lo;
    *jhi = hi;
}

/* is any of w[0..n) inf or NaN (inf - inf is NaN)? */
static int rlx_dw_nonfinite(const float *w, int64_t n) {
    int bad = 0;
    for (int64_t i = 0; i < n; ++i) bad |= w[i] - w[i] != 0.0f;
    return bad;
}

/* 0 * inf and 0 * NaN are NaN: an output whose window reaches the padding through a tap
   whose weight is not finite is NaN, as with the zeros of an explicit pad (the definition:
   the reference's np.pad, the decomposition's pad_hw, the phase planes here). The row kernels
   skip the taps outside the input, so those outputs are set here, after them: one channel,
   its kh x kw taps at wt, its outputs ys floats apart from y */
static void rlx_dw_pad_nan(const rlx_conv_geo *g, const float *wt, float *y, int64_t ys) {
    const int64_t taps = g->kh * g->kw;
    if (!rlx_dw_nonfinite(wt, taps)) return;
    for (int64_t oy = 0; oy < g->oh; ++oy)
        for (int64_t ox = 0; ox < g->ow; ++ox)
            for (int64_t t = 0; t < taps; ++t) {
                const int64_t iy = oy * g->sh - g->ph + (t / g->kw) * g->dh;
                const int64_t ix = ox * g->sw - g->pw + (t % g->kw) * g->dw;
                if ((iy < 0 || iy >= g->h || ix < 0 || ix >= g->w) && wt[t] - wt[t] != 0.0f) {
                    y[(oy * g->ow + ox) * ys] = 0.0f * wt[t];
                    break;
                }
            }
}

/* output row oy of one depthwise channel with taps KH x KW at column stride SW (constants
   where the caller names them, so the tap loops unroll): every output of the row sums its
   taps in a register, vectorized over the columns whose taps all lie inside the input
   (columns [jlo, jhi)); the few edge columns test each tap. Only the input rows
   [ki0, ki1) of the window are inside the input */
static inline __attribute__((always_inline)) void rlx_conv_dw_row(
        const rlx_conv_geo *g, const float *x, const float *wt, float bias, int has_bias,
        const float *res, float *y, int64_t oy, int act, float lo, float hi,
        const int64_t KH, const int64_t KW, const int64_t SW) {
    const int64_t ow = g->ow, w = g->w, dw = g->dw, pw = g->pw, dh = g->dh;
    const int64_t base = oy * g->sh - g->ph;  /* input row of tap row 0 */
    int64_t ki0, ki1, jlo, jhi;
    rlx_dw_span(g, oy, KH, KW, SW, &ki0, &ki1, &jlo, &jhi);
    float *restrict yr = y + oy * ow;
    const int64_t at = oy * ow;
    /* eight columns at a time, their sums in one vector register */
    int64_t j = jlo;
#if RLX_DW_VEC
    const __m256 vb = _mm256_set1_ps(bias), vlo = _mm256_set1_ps(lo), vhi = _mm256_set1_ps(hi);
    for (; jhi - jlo >= 8 && j < jhi; j += 8) {
        if (j + 8 > jhi) j = jhi - 8;  /* the last block overlaps the one before */
        __m256 acc = _mm256_setzero_ps();
        for (int64_t ki = ki0; ki < ki1; ++ki)
            for (int64_t kj = 0; kj < KW; ++kj) {
                /* inside the plane: the row is an input row, the column >= 0 */
                const float *s = x + (base + ki * dh) * w + (j * SW + kj * dw - pw);
                __m256 v;
                if (SW == 1) {
                    v = _mm256_loadu_ps(s);
                } else if (SW == 2) {  /* the even floats of s[0..14] (s[15] may be past x) */
                    const __m256 a = _mm256_loadu_ps(s), b = _mm256_loadu_ps(s + 7);
                    v = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(
                            _mm256_shuffle_ps(a, b, 0xD8)), 0xD8));
                } else {
                    v = _mm256_set_ps(s[7 * SW], s[6 * SW], s[5 * SW], s[4 * SW], s[3 * SW],
                                      s[2 * SW], s[SW], s[0]);
                }
                acc = _mm256_fmadd_ps(v, _mm256_set1_ps(wt[ki * KW + kj]), acc);
            }
        _mm256_storeu_ps(yr + j, rlx_conv_fin8(acc, has_bias, vb, res ? res + at + j : 0, act,
                                               vlo, vhi));
    }
#endif
    const int64_t jmid = j;  /* columns [jlo, jmid) are done */
    for (j = 0; j < ow; ++j) {
        if (j >= jlo && j < jmid) continue;
        float acc = 0.0f;
        for (int64_t ki = ki0; ki < ki1; ++ki)
            for (int64_t kj = 0; kj < KW; ++kj) {
                const int64_t ix = j * SW + kj * dw - pw;
                if (ix >= 0 && ix < w) acc += x[(base + ki * dh) * w + ix] * wt[ki * KW + kj];
            }
        yr[j] = rlx_conv_fin(acc, bias, has_bias, res, at + j, act, lo, hi);
    }
}

/* one depthwise channel at stride s = sh = sw (1 or 2), vectorized over whole planes (the row
   kernel's vectors need 8 columns whose taps lie inside the input: a 7x7 output has 5, all
   of them scalar there):
   the padded plane is split into its s x s phases (row r % s, column c % s), each a plane of
   W2 = ceil(wp / s) columns, so every tap of output (oy, ox) reads its phase at the flat
   index q + const, q = oy W2 + ox. One vector loop per tap over all q then covers every row
   at once (q past ow in a row is computed and dropped), and the epilogue runs on the valid
   outputs. Returns 0 when out of memory (the caller then runs rlx_conv_dw_rows) */
enum { RLX_DW_FLAT_TAPS = @FLAT_TAPS@ };  /* windows of up to 7 x 7 (depthwise.FLAT_TAPS) */
static int rlx_conv_dw_flat(const rlx_conv_geo *g, const float *x, const float *wt, float bias,
                            int has_bias, const float *res, float *y, int act, float lo,
                            float hi) {
    const int64_t s = g->sh, hp = g->h + 2 * g->ph, wp = g->w + 2 * g->pw;
    const int64_t h2 = (hp + s - 1) / s, w2 = (wp + s - 1) / s;
    const int64_t ps = h2 * w2 + 8;  /* floats per phase plane; 8 zeros read past the end */
    const int64_t nq = (g->oh - 1) * w2 + g->ow, nv = (nq + 7) / 8 * 8;
    float *buf = rlx_sgemm_scratch(s * s * ps + nv);
    if (buf == 0) return 0;
    float *t = buf + s * s * ps;
    memset(buf, 0, (size_t)(s * s * ps) * sizeof(float));
    const int64_t sh1 = s - 1;  /* s is 1 or 2: c % s = c & sh1, c / s = c >> sh1 */
    for (int64_t iy = 0; iy < g->h; ++iy) {
        const int64_t r = iy + g->ph;
        float *restrict d = buf + (r & sh1) * s * ps + (r >> sh1) * w2;
        const float *restrict xr = x + iy * g->w;  /* input column c: padded column c + pw */
        const int64_t c0 = g->pw, c1 = g->pw + g->w;
        if (s == 1) {
            memcpy(d + c0, xr, (size_t)g->w * sizeof(float));
            continue;
        }
        /* the even padded columns to phase 0, the odd ones to phase 1 (strided reads) */
        float *restrict d1 = d + ps;
        for (int64_t c = c0 + (c0 & 1); c < c1; c += 2) d[c >> 1] = xr[c - c0];
        for (int64_t c = c0 + 1 - (c0 & 1); c < c1; c += 2) d1[c >> 1] = xr[c - c0];
    }
    /* each tap's phase plane and weight; all taps of 8 positions summed in one register */
    const int64_t taps = g->kh * g->kw;
    const float *src[RLX_DW_FLAT_TAPS];
    float wv[RLX_DW_FLAT_TAPS];
    for (int64_t ki = 0; ki < g->kh; ++ki)
        for (int64_t kj = 0; kj < g->kw; ++kj) {
            const int64_t dy = ki * g->dh, dx = kj * g->dw, k = ki * g->kw + kj;
            src[k] = buf + ((dy & sh1) * s + (dx & sh1)) * ps + (dy >> sh1) * w2 + (dx >> sh1);
            wv[k] = wt[k];
        }
    int64_t q0 = 0;
#if RLX_DW_VEC
    for (; q0 < nv; q0 += 8) {
        __m256 acc = _mm256_setzero_ps();
        for (int64_t k = 0; k < taps; ++k)
            acc = _mm256_fmadd_ps(_mm256_loadu_ps(src[k] + q0), _mm256_set1_ps(wv[k]), acc);
        _mm256_storeu_ps(t + q0, acc);
    }
#endif
    for (int64_t q = q0; q < nv; ++q) {
        float a = 0.0f;
        for (int64_t k = 0; k < taps; ++k) a += src[k][q] * wv[k];
        t[q] = a;
    }
    for (int64_t oy = 0; oy < g->oh; ++oy)
        for (int64_t ox = 0; ox < g->ow; ++ox) {
            const int64_t at = oy * g->ow + ox;
            y[at] = rlx_conv_fin(t[oy * w2 + ox], bias, has_bias, res, at, act, lo, hi);
        }
    return 1;
}

/* rows [r0, r1) of one channel's depthwise output (y, res: the channel's output plane; x
   its input plane; wt its kh x kw taps); 3x3 and 5x5 at stride 1 and 2 get their own
   unrolled copies */
static void rlx_conv_dw_rows(const rlx_conv_geo *g, const float *x, const float *wt, float bias,
                             int has_bias, const float *res, float *y, int64_t r0, int64_t r1,
                             int act, float lo, float hi) {
#define RLX_DW_CASE(KH, KW, SW) \
    if (g->kh == KH && g->kw == KW && g->sw == SW) { \
        for (int64_t oy = r0; oy < r1; ++oy) \
            rlx_conv_dw_row(g, x, wt, bias, has_bias, res, y, oy, act, lo, hi, KH, KW, SW); \
        return; \
    }
    RLX_DW_CASE(3, 3, 1)
    RLX_DW_CASE(3, 3, 2)
    RLX_DW_CASE(5, 5, 1)
    RLX_DW_CASE(5, 5, 2)
#undef RLX_DW_CASE
    for (int64_t oy = r0; oy < r1; ++oy)
        rlx_conv_dw_row(g, x, wt, bias, has_bias, res, y, oy, act, lo, hi, g->kh, g->kw,
                        g->sw);
}

/* channel block cb (8 channels, a channel multiplier of 1) of one image of a depthwise
   convolution in NCHW8c: x, y, res the image's input, output and residual; wt the OIHW
   filter (o x 1 x kh x kw). Each tap of an output pixel is one vector FMA, the 8 channels
   along the vector. Per output row, the columns [jlo, jhi) whose window lies inside the
   input run RLX_DW_P pixels at a time with the taps unrolled (KH, KW, SW constants where
   the caller names them), then one at a time; each edge pixel runs its window columns
   inside the input only. Windows of up to RLX_DW_FLAT_TAPS taps */
enum { RLX_DW_P = 4 };  /* pixels in flight: 4 accumulators + up to 9 tap vectors in ymm */
#if defined(__AVX512F__)
#define RLX_DW_WIDE 1
enum { RLX_DW_P16 = 4 };  /* AVX-512: pixel pairs in flight, 8 pixels in 4 zmm */

/* AVX-512, stride 1: pixels [j, j + 2 P) of an output row whose windows lie inside the
   input, two pixels (16 floats, contiguous in NCHW8c) a vector, every tap one FMA on a
   vector of the two pixels' inputs (also contiguous at stride 1) and the tap's 8 channel
   weights (wv, as rlx_dw_b_rows lays them out) twice */
static inline __attribute__((always_inline)) void rlx_dw_b16(
        const rlx_conv_geo *g, const float *xc, const float *wv, int has_bias, __m512 vb,
        const float *rr, float *yr, int64_t row0, int64_t ki0, int64_t ki1, int64_t j, int act,
        __m512 vlo, __m512 vhi, const int64_t KH, const int64_t KW, const int P) {
    const int64_t w = g->w, dw = g->dw, dh = g->dh;
    __m512 acc[RLX_DW_P16];
    for (int i = 0; i < P; ++i) acc[i] = _mm512_setzero_ps();
    for (int64_t ki = 0; ki < KH; ++ki) {
        if (ki < ki0 || ki >= ki1) continue;
        const float *s = xc + ((row0 + ki * dh) * w + j - g->pw) * 8;
        for (int64_t kj = 0; kj < KW; ++kj) {
            /* the broadcast from memory is a load alone, no shuffle */
            const __m512 wk = _mm512_broadcast_f32x8(_mm256_loadu_ps(wv + (ki * KW + kj) * 8));
            for (int i = 0; i < P; ++i)
                acc[i] = _mm512_fmadd_ps(_mm512_loadu_ps(s + (kj * dw + 2 * i) * 8), wk, acc[i]);
        }
    }
    for (int i = 0; i < P; ++i)
        _mm512_storeu_ps(yr + (j + 2 * i) * 8,
                         rlx_conv_fin16(acc[i], has_bias, vb, rr ? rr + (j + 2 * i) * 8 : 0,
                                        act, vlo, vhi));
}

/* AVX-512, stride SW = 1 or 2, maps of up to RLX_DW_SMALL_W output columns (MobileNetV2's
   7x7 and 4x4, whose rows are mostly edge pixels): the block's input window is copied once
   into a zero-padded buffer (bh rows of SW column phases, bwp pixels of 8 channels each:
   padded column c at phase c % SW, index c / SW, so a pixel pair's inputs are contiguous at
   stride 2 too), then every output row runs with no edge test, P pixel pairs a zmm and an
   odd last pixel in a ymm, the taps' weights held in registers. The copy costs one load and
   store a pixel; the rows then need no per-pixel window bounds (the row kernel ran every edge
   pixel alone, its taps in a loop) */
/* depthwise.SMALL_W, SMALL_FLOATS */
enum { RLX_DW_SMALL_W = @SMALL_W@, RLX_DW_SMALL_FLOATS = @SMALL_FLOATS@ };

static inline __attribute__((always_inline)) void rlx_dw_b_small(
        const rlx_conv_geo *g, const float *x, const float *wt, const float *bias,
        const float *res, float *y, int64_t cb, int act, float lo, float hi,
        const int64_t KH, const int64_t KW, const int64_t SW, const int P, const int ODD) {
    const int64_t h = g->h, w = g->w, oh = g->oh, ow = g->ow, ph = g->ph, pw = g->pw;
    /* padded rows read; pixels per column phase; padded columns */
    const int64_t bh = (oh - 1) * SW + KH, bwp = ow + (KW - 1) / SW, bw = SW * bwp;
    float buf[RLX_DW_SMALL_FLOATS] __attribute__((aligned(64)));
    const float *xc = x + cb * h * w * 8;
    float *yc = y + cb * oh * ow * 8;
    const float *rc = res ? res + cb * oh * ow * 8 : 0;
    const __m256 z = _mm256_setzero_ps();
    for (int64_t r = 0; r < bh; ++r) {
        float *d = buf + r * bw * 8;  /* column c at d + ((c % SW) bwp + c / SW) 8 */
        const int64_t iy = r - ph;
        if (iy < 0 || iy >= h) {
            for (int64_t c = 0; c < bw; ++c) _mm256_store_ps(d + c * 8, z);
            continue;
        }
        const float *s = xc + iy * w * 8;
        for (int64_t c = 0; c < bw; ++c) {
            const int64_t ix = c - pw;
            _mm256_store_ps(d + ((c % SW) * bwp + c / SW) * 8,
                            ix >= 0 && ix < w ? _mm256_loadu_ps(s + ix * 8) : z);
        }
    }
    __m512 wk[9];  /* tap t's 8 channel weights, twice */
    for (int64_t t = 0; t < KH * KW; ++t) {
        float v[8];
        for (int64_t c8 = 0; c8 < 8; ++c8) v[c8] = wt[(cb * 8 + c8) * KH * KW + t];
        wk[t] = _mm512_broadcast_f32x8(_mm256_loadu_ps(v));
    }
    const __m256 bv = bias ? _mm256_loadu_ps(bias + cb * 8) : z;
    const __m512 vb = _mm512_broadcast_f32x8(bv), vlo = _mm512_set1_ps(lo),
                 vhi = _mm512_set1_ps(hi);
    const __m256 vlo8 = _mm256_set1_ps(lo), vhi8 = _mm256_set1_ps(hi);
    for (int64_t oy = 0; oy < oh; ++oy) {
        __m512 acc[RLX_DW_SMALL_W / 2];
        __m256 acc1 = z;
        for (int i = 0; i < P; ++i) acc[i] = _mm512_setzero_ps();
        for (int64_t ki = 0; ki < KH; ++ki)
            for (int64_t kj = 0; kj < KW; ++kj) {
                const float *s = buf + ((oy * SW + ki) * bw + (kj % SW) * bwp + kj / SW) * 8;
                const __m512 wt2 = wk[ki * KW + kj];
                for (int i = 0; i < P; ++i)
                    acc[i] = _mm512_fmadd_ps(_mm512_loadu_ps(s + 16 * i), wt2, acc[i]);
                if (ODD)
                    acc1 = _mm256_fmadd_ps(_mm256_load_ps(s + 16 * P),
                                           _mm512_castps512_ps256(wt2), acc1);
            }
        float *yr = yc + oy * ow * 8;
        const float *rr = rc ? rc + oy * ow * 8 : 0;
        for (int i = 0; i < P; ++i)
            _mm512_storeu_ps(yr + 16 * i, rlx_conv_fin16(acc[i], bias != 0, vb,
                                                         rr ? rr + 16 * i : 0, act, vlo, vhi));
        if (ODD)
            _mm256_storeu_ps(yr + 16 * P, rlx_conv_fin8(acc1, bias != 0, bv,
                                                        rr ? rr + 16 * P : 0, act, vlo8, vhi8));
    }
}

/* rlx_dw_b_small for 3x3 windows with the stride, the pairs per row and the odd pixel as
   constants, a function each (rlx_dw_bs_<stride>_<width>), called by name from the kernel
   (emit_blocked, small_map), so only the ones a program uses are compiled, each where the
   kernel's geometry is constant: one function switching over all 32 took the sanitized
   build of the depthwise tests (RLX_CPU_SANITIZE) over 10 minutes, and as a function of a
   runtime geometry (its copy loop not specialised) its 7x7 maps ran 1.5x slower */
#define RLX_DW_SMALL_FN(SW, OW) \
    static void rlx_dw_bs_##SW##_##OW( \
            const rlx_conv_geo *g, const float *x, const float *wt, const float *bias, \
            const float *res, float *y, int64_t cb, int act, float lo, float hi) { \
        rlx_dw_b_small(g, x, wt, bias, res, y, cb, act, lo, hi, 3, 3, SW, OW / 2, OW % 2); \
    }
/* one for each width 1 .. RLX_DW_SMALL_W */
#define RLX_DW_SMALL_FNS(SW) @SMALL_FNS@
RLX_DW_SMALL_FNS(1)
RLX_DW_SMALL_FNS(2)
#undef RLX_DW_SMALL_FNS
#undef RLX_DW_SMALL_FN
#else
#define RLX_DW_WIDE 0
enum { RLX_DW_P16 = 4 };
#endif
static inline __attribute__((always_inline)) void rlx_dw_b_rows(
        const rlx_conv_geo *g, const float *x, const float *wt, const float *bias,
        const float *res, float *y, int64_t cb, int act, float lo, float hi,
        const int64_t KH, const int64_t KW, const int64_t SW, const int WIDE) {
    const int64_t w = g->w, ow = g->ow, p = g->oh * ow;
    const int64_t pw = g->pw, dw = g->dw, dh = g->dh;
    const float *xc = x + cb * g->h * w * 8;
    float *yc = y + cb * p * 8;
    const float *rc = res ? res + cb * p * 8 : 0;
    float wv[RLX_DW_FLAT_TAPS * 8];  /* tap t of channel c8 at wv[t * 8 + c8] */
    for (int64_t t = 0; t < KH * KW; ++t)
        for (int64_t c8 = 0; c8 < 8; ++c8) wv[t * 8 + c8] = wt[(cb * 8 + c8) * KH * KW + t];
    const float *bv = bias ? bias + cb * 8 : 0;
#if RLX_DW_VEC
    const __m256 vlo = _mm256_set1_ps(lo), vhi = _mm256_set1_ps(hi);
    const __m256 vb = bv ? _mm256_loadu_ps(bv) : _mm256_setzero_ps();
#endif
#if defined(__AVX512F__)
    const __m512 vlo16 = _mm512_set1_ps(lo), vhi16 = _mm512_set1_ps(hi);
    const __m512 vb16 = _mm512_broadcast_f32x8(vb);
#endif
    int64_t ki0, ki1, jlo, jhi;  /* the columns once; the rows per output row, no division */
    rlx_dw_span(g, 0, KH, KW, SW, &ki0, &ki1, &jlo, &jhi);
    for (int64_t oy = 0; oy < g->oh; ++oy) {
        const int64_t row0 = oy * g->sh - g->ph;  /* input row of window row 0 */
        ki0 = 0;
        while (ki0 < KH && row0 + ki0 * dh < 0) ++ki0;
        ki1 = KH;
        while (ki1 > ki0 && row0 + (ki1 - 1) * dh >= g->h) --ki1;
        float *yr = yc + oy * ow * 8;
        const float *rr = rc ? rc + oy * ow * 8 : 0;
        for (int64_t j = 0; j < ow;) {
#if defined(__AVX512F__)
            /* rows of 8 inner pixels or more (rlx_dw_b), 8 pixels a group, then 4, then 2 */
            if (WIDE && j >= jlo && j + 2 <= jhi) {
                const int64_t left = jhi - j;
                if (left >= 2 * RLX_DW_P16)
                    rlx_dw_b16(g, xc, wv, bv != 0, vb16, rr, yr, row0, ki0, ki1, j, act, vlo16,
                               vhi16, KH, KW, RLX_DW_P16);
                else if (left >= 4)
                    rlx_dw_b16(g, xc, wv, bv != 0, vb16, rr, yr, row0, ki0, ki1, j, act, vlo16,
                               vhi16, KH, KW, 2);
                else
                    rlx_dw_b16(g, xc, wv, bv != 0, vb16, rr, yr, row0, ki0, ki1, j, act, vlo16,
                               vhi16, KH, KW, 1);
                j += left >= 2 * RLX_DW_P16 ? 2 * RLX_DW_P16 : left >= 4 ? 4 : 2;
                continue;
            }
#endif
#if RLX_DW_VEC
            if (j >= jlo && j + RLX_DW_P <= jhi) {  /* RLX_DW_P pixels, every tap inside */
                __m256 acc[RLX_DW_P];
                for (int i = 0; i < RLX_DW_P; ++i) acc[i] = _mm256_setzero_ps();
                for (int64_t ki = 0; ki < KH; ++ki) {
                    if (ki < ki0 || ki >= ki1) continue;
                    const float *s = xc + ((row0 + ki * dh) * w + j * SW - pw) * 8;
                    for (int64_t kj = 0; kj < KW; ++kj) {
                        const __m256 wk = _mm256_loadu_ps(wv + (ki * KW + kj) * 8);
                        for (int i = 0; i < RLX_DW_P; ++i)
                            acc[i] = _mm256_fmadd_ps(
                                _mm256_loadu_ps(s + (kj * dw + i * SW) * 8), wk, acc[i]);
                    }
                }
                for (int i = 0; i < RLX_DW_P; ++i)
                    _mm256_storeu_ps(yr + (j + i) * 8,
                                     rlx_conv_fin8(acc[i], bv != 0, vb,
                                                   rr ? rr + (j + i) * 8 : 0, act, vlo, vhi));
                j += RLX_DW_P;
                continue;
            }
#endif
            /* one pixel: its window columns [kj0, kj1) inside the input */
            int64_t kj0 = 0, kj1 = KW;
            while (kj0 < KW && j * SW + kj0 * dw - pw < 0) ++kj0;
            while (kj1 > kj0 && j * SW + (kj1 - 1) * dw - pw >= w) --kj1;
#if RLX_DW_VEC
            __m256 acc = _mm256_setzero_ps();
            for (int64_t ki = ki0; ki < ki1 && kj0 < kj1; ++ki) {
                /* inside the plane: an input row, window column kj0's input column */
                const float *s = xc + ((row0 + ki * dh) * w + j * SW - pw + kj0 * dw) * 8;
                for (int64_t kj = kj0; kj < kj1; ++kj)
                    acc = _mm256_fmadd_ps(_mm256_loadu_ps(s + (kj - kj0) * dw * 8),
                                          _mm256_loadu_ps(wv + (ki * KW + kj) * 8), acc);
            }
            _mm256_storeu_ps(yr + j * 8, rlx_conv_fin8(acc, bv != 0, vb, rr ? rr + j * 8 : 0,
                                                       act, vlo, vhi));
#else
            float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
            for (int64_t ki = ki0; ki < ki1 && kj0 < kj1; ++ki) {
                const float *s = xc + ((row0 + ki * dh) * w + j * SW - pw + kj0 * dw) * 8;
                for (int64_t kj = kj0; kj < kj1; ++kj)
                    for (int c8 = 0; c8 < 8; ++c8)
                        acc[c8] += s[(kj - kj0) * dw * 8 + c8] * wv[(ki * KW + kj) * 8 + c8];
            }
            for (int c8 = 0; c8 < 8; ++c8)
                yr[j * 8 + c8] = rlx_conv_fin(acc[c8], bv ? bv[c8] : 0.0f, bv != 0, rr,
                                              j * 8 + c8, act, lo, hi);
#endif
            ++j;
        }
    }
}

static void rlx_dw_b(const rlx_conv_geo *g, const float *x, const float *wt,
                     const float *bias, const float *res, float *y, int64_t cb, int act,
                     float lo, float hi) {
    /* AVX-512 pixel pairs at stride 1 on rows of 8 inner pixels or more (rlx_dw_span's
       [jlo, jhi) at stride 1, without its divisions), in their own copy: 7x7 and 4x4 maps
       ran 10% slower in ymm with the pairs' code beside it, and 7x7 maps' 5 inner pixels
       10% slower paired than in ymm (MobileNetV2 b8, 384 and 576 channels, A/B) */
    const int64_t jhi = g->w + g->pw - (g->kw - 1) * g->dw;
    const int wide = RLX_DW_WIDE && g->sw == 1
                     && (jhi < g->ow ? jhi : g->ow) - g->pw >= 2 * RLX_DW_P16;
#define RLX_DW_B_CASE(KH, KW, SW) \
    if (g->kh == KH && g->kw == KW && g->sw == SW) { \
        if (SW == 1 && wide) \
            rlx_dw_b_rows(g, x, wt, bias, res, y, cb, act, lo, hi, KH, KW, SW, 1); \
        else \
            rlx_dw_b_rows(g, x, wt, bias, res, y, cb, act, lo, hi, KH, KW, SW, 0); \
        return; \
    }
    RLX_DW_B_CASE(3, 3, 1)
    RLX_DW_B_CASE(3, 3, 2)
    RLX_DW_B_CASE(5, 5, 1)
    RLX_DW_B_CASE(5, 5, 2)
#undef RLX_DW_B_CASE
    rlx_dw_b_rows(g, x, wt, bias, res, y, cb, act, lo, hi, g->kh, g->kw, g->sw, wide);
}
#endif
""".replace("@FLAT_TAPS@", str(FLAT_TAPS)).replace("@SMALL_W@", str(SMALL_W)) \
    .replace("@SMALL_FLOATS@", str(SMALL_FLOATS)) \
    .replace("@SMALL_FNS@", " ".join(f"RLX_DW_SMALL_FN(SW, {ow})" for ow in range(1, SMALL_W + 1)))


def small_map(kh: int, kw: int, sh: int, sw: int, dh: int, dw: int, oh: int,
              ow: int) -> str | None:
    """The AVX-512 small-map function (``rlx_dw_bs_<stride>_<width>``, rlx_dw_b_small) that
    runs this NCHW8c depthwise conv, or None for rlx_dw_b: 3x3 windows at stride 1 or 2,
    undilated, at most SMALL_W output columns, the padded window within SMALL_FLOATS.
    ``RLX_DW_SMALL=0`` turns it off (A/B timing)."""
    s = sh
    if (not env_flag("RLX_DW_SMALL", True) or (kh, kw, sw, dh, dw) != (3, 3, s, 1, 1)
            or s not in (1, 2) or not 1 <= ow <= SMALL_W):
        return None
    fits = ((oh - 1) * s + kh) * s * (ow + (kw - 1) // s) * BLOCK <= SMALL_FLOATS
    return f"rlx_dw_bs_{s}_{ow}" if fits else None


def in_chain(c: int, o: int, groups: int, kh: int, kw: int) -> bool:
    """May a depthwise convolution run in NCHW8c (rlx_dw_b): a channel multiplier of 1 and
    windows of up to FLAT_TAPS taps (``RLX_CONV_BLOCKED=0`` turns it off with the blocked
    convs)."""
    return (groups == c == o and groups > 1 and kh * kw <= FLAT_TAPS
            and conv_blocked.mode() != "0")


def use_dw_flat(sh: int, sw: int, kh: int, kw: int) -> bool:
    """Run an NCHW depthwise channel on its phase planes (rlx_conv_dw_flat) rather than per
    row (rlx_conv_dw_row): at stride 1 or 2, the same both ways, windows up to 7 x 7. CPU
    time, 1 thread, Zen 1, 3x3 layers of MobileNetV2 against ONNX Runtime, rows -> phase
    planes: 96 ch at 56x56 0.35x -> 1.05x, 144 at 28x28 0.33x -> 1.02x, 192 at 14x14 0.46x ->
    0.90x, 576 at 7x7 0.22x -> 0.85x, 960 at 4x4 0.31x -> 0.66x; stride 2, 144 at 28x28
    0.65x -> 0.89x, 576 at 14x14 0.28x -> 0.72x (the row kernel's vectors need 8 columns whose
    taps all lie inside the input, the rest was scalar). ``RLX_CONV_DW_FLAT=0``: rows (A/B
    timing)."""
    return (env_flag("RLX_CONV_DW_FLAT", True) and sh == sw and sh in (1, 2)
            and kh * kw <= FLAT_TAPS)


def emit_nchw(env: KernelEnv, w: Writer, geo: str, n: int, x: str, wt: str, c: int, hw: int,
              o: int, p: int, kh: int, kw: int, sh: int, sw: int, oh: int, bias: str | None,
              res: str | None, out: str, tail: str, flops: int, padded: bool) -> None:
    """The kernel's loop over (image, output channel) of a depthwise convolution in NCHW (a
    channel multiplier og = o / c >= 1; ``padded``: a padding of more than 0)."""
    og = o // c
    _pad_nan_flag(w, padded, wt, o * kh * kw)
    conv_blocked.open_items(env, w, flops, n * o, geo)
    w.line(f"const int64_t b = it / {o}, oc = it % {o}, ic = oc / {og};")
    w.line(f"const float* xc = {x} + (b * {c} + ic) * {hw};")
    off = f"(b * {o} + oc) * {p}"
    res_c = f"{res} + {off}" if res else "0"
    bv = f"{bias}[oc]" if bias else "0.0f"
    args = (f"&geo, xc, {wt} + oc * {kh * kw}, {bv}, {int(bias is not None)}, "
            f"{res_c}, {out} + {off}")
    if use_dw_flat(sh, sw, kh, kw):
        w.open(f"if (!rlx_conv_dw_flat({args}, {tail}))")
        w.line(f"rlx_conv_dw_rows({args}, 0, {oh}, {tail});")
        w.line(f"if (pad_nan) rlx_dw_pad_nan(&geo, {wt} + oc * {kh * kw}, {out} + {off}, 1);")
        w.close()
    else:
        w.line(f"rlx_conv_dw_rows({args}, 0, {oh}, {tail});")
        w.line(f"if (pad_nan) rlx_dw_pad_nan(&geo, {wt} + oc * {kh * kw}, {out} + {off}, 1);")
    w.close()


def emit_blocked(env: KernelEnv, w: Writer, geo: str, n: int, x: str, wt: str, c: int,
                 hw: int, o: int, p: int, bias: str | None, res: str | None, out: str,
                 tail: str, flops: int, taps: int, padded: bool,
                 small: str | None = None) -> str:
    """The kernel's loop over (image, channel block) of a depthwise convolution in NCHW8c
    (a channel multiplier of 1: o == c, a multiple of 8; ``taps`` = kh * kw a channel,
    ``padded``: a padding of more than 0) calling rlx_dw_b, or on AVX-512 the small-map
    function ``small`` (small_map) where there is one; returns IMPL_B."""
    cbn = c // BLOCK
    _pad_nan_flag(w, padded, wt, c * taps)
    # the conv before it (a 1x1 expansion) wrote the input forward
    conv_blocked.open_items(env, w, flops, n * cbn, geo,
                            backward=conv_blocked.backward(n, n * c * hw * 4))
    w.line(f"const int64_t b = it / {cbn}, cb = it % {cbn};")
    res_b = f"{res} + b * {o * p}" if res else "0"
    args = (f"(&geo, {x} + b * {c * hw}, {wt}, {bias or '0'}, {res_b}, {out} + b * {o * p}, "
            f"cb, {tail});")
    if small:
        w.line("#if defined(__AVX512F__)")
        w.line(small + args)
        w.line("#else")
    w.line("rlx_dw_b" + args)
    if small:
        w.line("#endif")
    w.open("if (pad_nan)")  # the block's 8 channels, each output 8 floats apart
    w.line(f"for (int64_t c8 = 0; c8 < 8; ++c8) rlx_dw_pad_nan(&geo, {wt} + (cb * 8 + c8) * "
           f"{taps}, {out} + b * {o * p} + cb * {p * BLOCK} + c8, 8);")
    w.close()
    w.close()
    return IMPL_B


def _pad_nan_flag(w: Writer, padded: bool, wt: str, count: int) -> None:
    """Declare ``pad_nan`` before the item loop: does the filter (``count`` floats at ``wt``)
    hold an inf or NaN that a tap over the padding turns into a NaN output (0 when the conv
    is not ``padded``)? One pass over the filter a call, not one per item."""
    w.line(f"const int pad_nan = {f'rlx_dw_nonfinite({wt}, {count})' if padded else '0'};")
