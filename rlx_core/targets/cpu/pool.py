"""The CPU's pooling kernels: HIR ``max_pool2d`` / ``avg_pool2d`` kept whole, in f32.

Decomposed, a 3x3 pooling window is a pad with -inf (or 0), three strided slices and two
elementwise maxima per axis: seven tensors the size of the input written and read again. On
the Inception-style net of bench_cnn those kernels were 17% of the run (a stride-1 max pool on
every inception block), against under 3% in ONNX Runtime, whose pooling reads each input
plane once.

Kept whole, a pooling is one loop over the (image, channel) planes, shared over the team. Per
output row, only the window rows inside the input are visited, and each tap is one pass over
the row's output columns (``y[j] = max(y[j], x[j * sw + kx - pw])``), vectorized over the
columns whose tap lies inside the input; the row stays in L1 between the passes. The padding
never takes part: -inf never wins a max and 0 adds nothing to a sum, so the result is the
decomposition's (``avg_pool2d`` divides by ``kh * kw``, padding counted, as its definition
says).

In NCHW8c (``rlx_pool_b``) each output row is two passes over contiguous pixels: the window
rows into one padded row, then its window columns, each combined in registers (AVX-512: two
pixels a vector; a stride-2 output pair's taps two pixels apart). Against one window at a
time (8 combines per 3x3 output, 3 uops each on AVX2), Inception's pools at batch 8, 1 thread,
Emerald Rapids, thread CPU (profile_cnn, chrt -f 1, load 11-13): 1.78 -> 0.88 ms (ORT 0.96);
3x3 s2 64 @56 0.374 -> 0.245, 256 @14 s1 0.301 -> 0.090; the AVX2 path 0.96 ms.
"""

from __future__ import annotations

from rlx_core.ir.graph import Node
from rlx_core.targets.c_common.expr import RenderError
from rlx_core.targets.c_common.kernels import KernelEnv
from rlx_core.targets.c_common.loops import Writer
from rlx_core.targets.cpu import conv_blocked, scratch

IMPL = "rlx-pool"
DTYPES: tuple[str, ...] = ("f32",)
OPS: tuple[str, ...] = ("max_pool2d", "avg_pool2d")

SOURCE = scratch.SOURCE + r"""
#ifndef RLX_POOL_H
#define RLX_POOL_H
#if defined(__AVX2__)
#include <immintrin.h>  /* also when the GEMM's source, which includes it, is left out */
#endif
/* acc[i] = op(acc[i], x[i * sw]) for i < n: op max (rlx_max_f's: a NaN on either side wins)
   or, with avg, + */
static inline void rlx_pool_acc(float *restrict acc, const float *restrict x, int64_t n,
                                int64_t sw, int avg) {
    int64_t i = 0;
#if defined(__AVX2__)
    if (sw == 1 || sw == 2)
        for (; i + 8 <= n; i += 8) {
            const float *s = x + i * sw;
            __m256 v;
            if (sw == 1) {
                v = _mm256_loadu_ps(s);
            } else {  /* the even floats of s[0..14] (s[15] may be past the row) */
                const __m256 a = _mm256_loadu_ps(s), b = _mm256_loadu_ps(s + 7);
                v = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(
                        _mm256_shuffle_ps(a, b, 0xD8)), 0xD8));
            }
            const __m256 c = _mm256_loadu_ps(acc + i);
            /* max_ps gives v where either is NaN; the blend keeps a NaN acc */
            _mm256_storeu_ps(acc + i, avg ? _mm256_add_ps(c, v)
                                          : _mm256_blendv_ps(_mm256_max_ps(c, v), c,
                                                             _mm256_cmp_ps(c, c, _CMP_UNORD_Q)));
        }
#endif
    if (avg) {
        for (; i < n; ++i) acc[i] += x[i * sw];
        return;
    }
#if defined(__AVX2__)
    for (; i < n; ++i) {  /* the same blend on one float: a branch would miss half the time */
        const __m128 c = _mm_set_ss(acc[i]), v = _mm_set_ss(x[i * sw]);
        acc[i] = _mm_cvtss_f32(_mm_blendv_ps(_mm_max_ss(c, v), c, _mm_cmpunord_ss(c, c)));
    }
#endif
    for (; i < n; ++i) acc[i] = rlx_max_f(acc[i], x[i * sw]);
}

/* this thread's scratch floats (cpu/scratch.py; 0: out of memory) */
RLX_SCRATCH(rlx_pool_scratch, float)

/* each output alone, the window's taps in order (x, y: a plane's values es floats apart, es 1
   in NCHW, 8 for one channel of an NCHW8c block): what runs without scratch, slow but right */
static void rlx_pool_direct(const float *x, float *y, int64_t es, int64_t h, int64_t w,
                            int64_t oh, int64_t ow, int64_t kh, int64_t kw, int64_t sh,
                            int64_t sw, int64_t ph, int64_t pw, int avg) {
    for (int64_t oy = 0; oy < oh; ++oy)
        for (int64_t ox = 0; ox < ow; ++ox) {
            float a = avg ? 0.0f : -INFINITY;
            for (int64_t ky = 0; ky < kh; ++ky)
                for (int64_t kx = 0; kx < kw; ++kx) {
                    const int64_t iy = oy * sh + ky - ph, ix = ox * sw + kx - pw;
                    const float v = iy >= 0 && iy < h && ix >= 0 && ix < w
                                    ? x[(iy * w + ix) * es] : avg ? 0.0f : -INFINITY;
                    a = avg ? a + v : rlx_max_f(a, v);
                }
            y[(oy * ow + ox) * es] = avg ? a / (float)(kh * kw) : a;
        }
}

/* one output plane (oh x ow) of a max (avg = 0) or average (avg = 1) pooling of the input
   plane x (h x w): window kh x kw, strides sh, sw, padding ph, pw. The decomposition's
   steps, in its order, on planes in L1: the padded plane xp (rows wp = w + 2 pw apart), the
   window rows combined (t: oh rows of wp), then the window columns. At stride 1 each step is
   one loop over a whole plane (its rows back to back), so a 7- or 14-wide row costs no
   scalar tail; the columns past ow of each row are computed and dropped */
static void rlx_pool_plane(const float *x, float *y, int64_t h, int64_t w, int64_t oh,
                          int64_t ow, int64_t kh, int64_t kw, int64_t sh, int64_t sw,
                          int64_t ph, int64_t pw, int avg) {
    const int64_t wp = w + 2 * pw, hp = h + 2 * ph;
    const int padded = ph > 0 || pw > 0;
    const int64_t need = (padded ? hp * wp : 0) + 2 * oh * wp + 16;
    float *t = rlx_pool_scratch(need);
    if (t == 0) {
        rlx_pool_direct(x, y, 1, h, w, oh, ow, kh, kw, sh, sw, ph, pw, avg);
        return;
    }
    float *u = t + oh * wp, *xp = u + oh * wp + 16;
    const float fill = avg ? 0.0f : -INFINITY;
    if (padded) {
        for (int64_t i = 0; i < ph * wp; ++i) xp[i] = fill;
        for (int64_t r = 0; r < h; ++r) {
            float *d = xp + (ph + r) * wp;
            for (int64_t j = 0; j < pw; ++j) d[j] = d[pw + w + j] = fill;
            memcpy(d + pw, x + r * w, (size_t)w * sizeof(float));
        }
        for (int64_t i = (ph + h) * wp; i < hp * wp; ++i) xp[i] = fill;
    } else {
        xp = (float *)x;
    }
    /* the window rows: t[oy, :] = op over ky of xp[oy * sh + ky, :] */
    if (sh == 1) {
        memcpy(t, xp, (size_t)(oh * wp) * sizeof(float));
        for (int64_t ky = 1; ky < kh; ++ky) rlx_pool_acc(t, xp + ky * wp, oh * wp, 1, avg);
    } else {
        for (int64_t oy = 0; oy < oh; ++oy) {
            memcpy(t + oy * wp, xp + oy * sh * wp, (size_t)wp * sizeof(float));
            for (int64_t ky = 1; ky < kh; ++ky)
                rlx_pool_acc(t + oy * wp, xp + (oy * sh + ky) * wp, wp, 1, avg);
        }
    }
    /* the window columns: y[oy, ox] = op over kx of t[oy, ox * sw + kx] */
    if (sw == 1) {
        const int64_t n = (oh - 1) * wp + ow;  /* t[n - 1 + kw - 1] is t's last float */
        memcpy(u, t, (size_t)n * sizeof(float));
        for (int64_t kx = 1; kx < kw; ++kx) rlx_pool_acc(u, t + kx, n, 1, avg);
        for (int64_t oy = 0; oy < oh; ++oy)
            memcpy(y + oy * ow, u + oy * wp, (size_t)ow * sizeof(float));
    } else {
        for (int64_t oy = 0; oy < oh; ++oy) {
            float *yr = y + oy * ow;
            const float *tr = t + oy * wp;
            for (int64_t ox = 0; ox < ow; ++ox) yr[ox] = tr[ox * sw];
            for (int64_t kx = 1; kx < kw; ++kx) rlx_pool_acc(yr, tr + kx, ow, sw, avg);
        }
    }
    if (avg) {
        const float count = (float)(kh * kw);
        #pragma omp simd
        for (int64_t i = 0; i < oh * ow; ++i) y[i] = y[i] / count;
    }
}

/* The vector steps of the NCHW8c pooling: op(c, v) is max (rlx_max_f's: a NaN on either
   side wins) or, with avg, +. AVX-512: two pixels of 8 channels a vector (RLX_PV floats), a
   lone last pixel through the mask; AVX2: one pixel a vector */
#if defined(__AVX512F__)
#define RLX_PV 16
typedef __m512 rlx_pv;
#define RLX_PV_MASK(n) ((n) >= 16 ? (__mmask16)0xFFFF : (__mmask16)0x00FF)
#define RLX_PV_LOAD(p, n) _mm512_maskz_loadu_ps(RLX_PV_MASK(n), p)
#define RLX_PV_STORE(p, v, n) _mm512_mask_storeu_ps(p, RLX_PV_MASK(n), v)
#define RLX_PV_SET1(f) _mm512_set1_ps(f)
/* max where c is a number (max_ps gives v where v is NaN), c where c is NaN */
#define RLX_PV_OP(c, v, avg) ((avg) ? _mm512_add_ps(c, v) \
    : _mm512_mask_max_ps(c, _mm512_cmp_ps_mask(c, c, _CMP_ORD_Q), c, v))
#define RLX_PV_DIV(v, f) _mm512_div_ps(v, _mm512_set1_ps(f))
/* pixels p and p + 2 of a row of 8-channel pixels (a stride-2 output pair's tap) */
#define RLX_PV_STRIDE2(p) _mm512_insertf32x8(_mm512_castps256_ps512(_mm256_loadu_ps(p)), \
                                             _mm256_loadu_ps((p) + 16), 1)
#elif defined(__AVX2__)
#define RLX_PV 8
typedef __m256 rlx_pv;
#define RLX_PV_LOAD(p, n) _mm256_loadu_ps(p)
#define RLX_PV_STORE(p, v, n) _mm256_storeu_ps(p, v)
#define RLX_PV_SET1(f) _mm256_set1_ps(f)
/* max_ps gives v where either is NaN; the blend keeps a NaN c */
#define RLX_PV_OP(c, v, avg) ((avg) ? _mm256_add_ps(c, v) \
    : _mm256_blendv_ps(_mm256_max_ps(c, v), c, _mm256_cmp_ps(c, c, _CMP_UNORD_Q)))
#define RLX_PV_DIV(v, f) _mm256_div_ps(v, _mm256_set1_ps(f))
#endif

/* channel block cb of one image of a pooling in NCHW8c (x: the image's h x w pixels of 8
   channels per block, y: its oh x ow), in the decomposition's order, row by row: the window
   rows inside the input combined in registers into the padded row r (wp = w + 2 pw pixels,
   the padding columns fill, which never wins a max nor adds to a sum), then the window
   columns of r, in registers too. Every step runs on whole vectors of contiguous pixels
   (a stride-1 output's tap kx reads r kx pixels on; a stride-2 pair's two pixels 2 apart),
   so a 3x3 window costs 4 combines per output where one window at a time cost 8. Out of
   memory for r: each output alone (rlx_pool_direct) */
static void rlx_pool_b(const float *x, float *y, int64_t h, int64_t w, int64_t oh,
                       int64_t ow, int64_t kh, int64_t kw, int64_t sh, int64_t sw,
                       int64_t ph, int64_t pw, int avg, int64_t cb) {
    const float *xc = x + cb * h * w * 8;
    float *yc = y + cb * oh * ow * 8;
    const int64_t wp = w + 2 * pw;
    float *r = rlx_pool_scratch(wp * 8 + 16);
    if (r == 0) {
        for (int l = 0; l < 8; ++l)
            rlx_pool_direct(xc + l, yc + l, 8, h, w, oh, ow, kh, kw, sh, sw, ph, pw, avg);
        return;
    }
    const float fill = avg ? 0.0f : -INFINITY, count = (float)(kh * kw);
    for (int64_t i = 0; i < pw * 8; ++i) r[i] = r[(pw + w) * 8 + i] = fill;
    float *rm = r + pw * 8;  /* input column 0 */
    for (int64_t oy = 0; oy < oh; ++oy) {
        const int64_t y0 = oy * sh - ph;
        const int64_t ky0 = y0 < 0 ? -y0 : 0, ky1 = h - y0 < kh ? h - y0 : kh;
        const float *x0 = ky0 < ky1 ? xc + (y0 + ky0) * w * 8 : xc;  /* a row inside */
        float *yr = yc + oy * ow * 8;
        int64_t i = 0;
#ifdef RLX_PV
        if (ky0 >= ky1)
            for (; i < w * 8; i += RLX_PV) RLX_PV_STORE(rm + i, RLX_PV_SET1(fill), w * 8 - i);
        for (; i < w * 8; i += RLX_PV) {  /* the window rows */
            rlx_pv a = RLX_PV_LOAD(x0 + i, w * 8 - i);
            for (int64_t ky = 1; ky < ky1 - ky0; ++ky)
                a = RLX_PV_OP(a, RLX_PV_LOAD(x0 + ky * w * 8 + i, w * 8 - i), avg);
            RLX_PV_STORE(rm + i, a, w * 8 - i);
        }
        i = 0;
        if (sw == 1)  /* the window columns: output j's tap kx is r's pixel j + kx */
            for (; i < ow * 8; i += RLX_PV) {
                rlx_pv a = RLX_PV_LOAD(r + i, ow * 8 - i);
                for (int64_t kx = 1; kx < kw; ++kx)
                    a = RLX_PV_OP(a, RLX_PV_LOAD(r + kx * 8 + i, ow * 8 - i), avg);
                if (avg) a = RLX_PV_DIV(a, count);
                RLX_PV_STORE(yr + i, a, ow * 8 - i);
            }
#if RLX_PV == 16
        if (sw == 2)  /* output pair (j, j + 1)'s tap kx: r's pixels 2 j + kx and 2 j + 2 + kx */
            for (; i + 16 <= ow * 8; i += 16) {
                const float *s = r + i * 2;
                __m512 a = RLX_PV_STRIDE2(s);
                for (int64_t kx = 1; kx < kw; ++kx)
                    a = RLX_PV_OP(a, RLX_PV_STRIDE2(s + kx * 8), avg);
                if (avg) a = RLX_PV_DIV(a, count);
                _mm512_storeu_ps(yr + i, a);
            }
#endif
        for (; i < ow * 8; i += 8) {  /* one output pixel, any stride (AVX-512: masked) */
            const float *s = r + i / 8 * sw * 8;
            rlx_pv a = RLX_PV_LOAD(s, 8);
            for (int64_t kx = 1; kx < kw; ++kx) a = RLX_PV_OP(a, RLX_PV_LOAD(s + kx * 8, 8), avg);
            if (avg) a = RLX_PV_DIV(a, count);
            RLX_PV_STORE(yr + i, a, 8);
        }
#else
        for (; i < w * 8; ++i) {
            float a = ky0 < ky1 ? x0[i] : fill;
            for (int64_t ky = 1; ky < ky1 - ky0; ++ky)
                a = avg ? a + x0[ky * w * 8 + i] : rlx_max_f(a, x0[ky * w * 8 + i]);
            rm[i] = a;
        }
        for (i = 0; i < ow * 8; ++i) {
            const float *s = r + i / 8 * sw * 8 + i % 8;
            float a = s[0];
            for (int64_t kx = 1; kx < kw; ++kx) a = avg ? a + s[kx * 8] : rlx_max_f(a, s[kx * 8]);
            yr[i] = avg ? a / count : a;
        }
#endif
    }
}
#endif
"""


def emit_pool(env: KernelEnv, w: Writer, node: Node, blocked: bool = False) -> str:
    """Write the kernel's loop over the (image, channel) planes; returns its impl label.
    ``blocked``: input and output are NCHW8c (layout.py's plan): the loop runs over (image,
    channel block) instead, backward over a large batch (conv_blocked.backward)."""
    d = node.type.dtype
    if d.name not in DTYPES:
        raise RenderError(f"{node.op} on {d} has no CPU kernel",
                          hint="the capability table claims pooling in f32 only")
    xb = env.inputs[node.inputs[0]]
    out = env.outputs[node.name]
    n, c, h, wd = xb.type.shape
    oh, ow = out.type.shape[2:]
    (kh, kw), (sh, sw), (ph, pw) = (tuple(int(v) for v in node.attr(a))
                                    for a in ("kernel", "stride", "padding"))
    avg = int(node.op == "avg_pool2d")
    pragma = env.parallel(n * c * oh * ow * kh * kw, 0)
    if pragma:
        w.line(pragma)
    if blocked:
        cbn = c // 8
        if conv_blocked.backward(n, n * c * h * wd * 4):  # the conv before wrote it forward
            w.open(f"for (int64_t ir = 0; ir < {n * cbn}; ++ir)")
            w.line(f"const int64_t it = {n * cbn - 1} - ir;")
        else:
            w.open(f"for (int64_t it = 0; it < {n * cbn}; ++it)")
        w.line(f"rlx_pool_b({xb.ptr} + (it / {cbn}) * {c * h * wd}, "
               f"{out.ptr} + (it / {cbn}) * {c * oh * ow}, {h}, {wd}, {oh}, {ow}, {kh}, {kw}, "
               f"{sh}, {sw}, {ph}, {pw}, {avg}, it % {cbn});")
        w.close()
        return IMPL
    w.open(f"for (int64_t it = 0; it < {n * c}; ++it)")
    w.line(f"rlx_pool_plane({xb.ptr} + it * {h * wd}, {out.ptr} + it * {oh * ow}, {h}, {wd}, "
           f"{oh}, {ow}, {kh}, {kw}, {sh}, {sw}, {ph}, {pw}, {avg});")
    w.close()
    return IMPL
