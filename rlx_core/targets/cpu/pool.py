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
"""

from __future__ import annotations

from rlx_core.ir.graph import Node
from rlx_core.targets.c_common.expr import RenderError
from rlx_core.targets.c_common.kernels import KernelEnv
from rlx_core.targets.c_common.loops import Writer
from rlx_core.targets.cpu import conv_blocked

IMPL = "rlx-pool"
DTYPES: tuple[str, ...] = ("f32",)
OPS: tuple[str, ...] = ("max_pool2d", "avg_pool2d")

SOURCE = r"""
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

/* this thread's scratch planes, grown on demand and kept */
static _Thread_local float *rlx_pool_buf = 0;
static _Thread_local int64_t rlx_pool_cap = 0;

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
    if (need > rlx_pool_cap) {
        void *p = 0;
        if (posix_memalign(&p, 64, (size_t)need * sizeof(float)) != 0) {
            /* out of memory for the scratch: each output alone, slow but right */
            for (int64_t oy = 0; oy < oh; ++oy)
                for (int64_t ox = 0; ox < ow; ++ox) {
                    float a = avg ? 0.0f : -INFINITY;
                    for (int64_t ky = 0; ky < kh; ++ky)
                        for (int64_t kx = 0; kx < kw; ++kx) {
                            const int64_t iy = oy * sh + ky - ph, ix = ox * sw + kx - pw;
                            const float v = iy >= 0 && iy < h && ix >= 0 && ix < w
                                            ? x[iy * w + ix] : avg ? 0.0f : -INFINITY;
                            a = avg ? a + v : rlx_max_f(a, v);
                        }
                    y[oy * ow + ox] = avg ? a / (float)(kh * kw) : a;
                }
            return;
        }
        free(rlx_pool_buf);
        rlx_pool_buf = (float *)p;
        rlx_pool_cap = need;
    }
    float *t = rlx_pool_buf, *u = t + oh * wp, *xp = u + oh * wp + 16;
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

/* channel block cb of one image of a pooling in NCHW8c (x: the image's h x w pixels of 8
   channels per block, y: its oh x ow): each output's 8 channels are one vector, combined
   over the window's taps inside the input (the padding never takes part, as above); an
   average sums each window column's rows, then the columns, as rlx_pool_plane does */
static void rlx_pool_b(const float *x, float *y, int64_t h, int64_t w, int64_t oh,
                       int64_t ow, int64_t kh, int64_t kw, int64_t sh, int64_t sw,
                       int64_t ph, int64_t pw, int avg, int64_t cb) {
    const float *xc = x + cb * h * w * 8;
    float *yc = y + cb * oh * ow * 8;
    for (int64_t oy = 0; oy < oh; ++oy) {
        const int64_t y0 = oy * sh - ph;
        const int64_t ky0 = y0 < 0 ? -y0 : 0, ky1 = h - y0 < kh ? h - y0 : kh;
        for (int64_t ox = 0; ox < ow; ++ox) {
            const int64_t x0 = ox * sw - pw;
            const int64_t kx0 = x0 < 0 ? -x0 : 0, kx1 = w - x0 < kw ? w - x0 : kw;
            float *d = yc + (oy * ow + ox) * 8;
#if defined(__AVX2__)
            __m256 a = _mm256_set1_ps(avg ? 0.0f : -INFINITY);
            for (int64_t kx = kx0; kx < kx1; ++kx) {
                const float *s = xc + ((y0 + ky0) * w + x0 + kx) * 8;
                __m256 t = ky0 < ky1 ? _mm256_loadu_ps(s) : a;
                for (int64_t ky = ky0 + 1; ky < ky1; ++ky) {
                    const __m256 v = _mm256_loadu_ps(s + (ky - ky0) * w * 8);
                    /* max_ps gives v where either is NaN; the blend keeps a NaN t */
                    t = avg ? _mm256_add_ps(t, v)
                            : _mm256_blendv_ps(_mm256_max_ps(t, v), t,
                                               _mm256_cmp_ps(t, t, _CMP_UNORD_Q));
                }
                a = avg ? _mm256_add_ps(a, t)
                        : _mm256_blendv_ps(_mm256_max_ps(a, t), a,
                                           _mm256_cmp_ps(a, a, _CMP_UNORD_Q));
            }
            if (avg) a = _mm256_div_ps(a, _mm256_set1_ps((float)(kh * kw)));
            _mm256_storeu_ps(d, a);
#else
            for (int c8 = 0; c8 < 8; ++c8) {
                float a = avg ? 0.0f : -INFINITY;
                for (int64_t kx = kx0; kx < kx1; ++kx) {
                    const float *s = xc + ((y0 + ky0) * w + x0 + kx) * 8 + c8;
                    float t = ky0 < ky1 ? s[0] : a;
                    for (int64_t ky = ky0 + 1; ky < ky1; ++ky) {
                        const float v = s[(ky - ky0) * w * 8];
                        t = avg ? t + v : rlx_max_f(t, v);
                    }
                    a = avg ? a + t : rlx_max_f(a, t);
                }
                d[c8] = avg ? a / (float)(kh * kw) : a;
            }
#endif
        }
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
