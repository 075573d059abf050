"""The CPU's int8 GEMM: HIR ``int_linear`` (``sum_k (x - za)(w - zb)`` in i32) kept whole.

``w`` is (out, in) like a linear weight, so every output element is a dot product of two
contiguous rows, one of x and one of w. The kernel takes one row of x against four rows of w
at a time (x's row is loaded once for four columns) and accumulates in i32:

    C[i, j] = S_ab - zb * S_a[i] - za * S_b[j] + K * za * zb (+ bias[j])

with ``S_ab = sum_k a b`` (the raw signed product), ``S_a`` and ``S_b`` row sums. Three dot
kernels compute (S_ab, S_b) for four columns, picked at run time on the first call from what
the CPU reports (``__builtin_cpu_supports``), not from the compiler's -march:

- ``avx512vnni``: ``vpdpbusd`` on 64 bytes a step. It multiplies *unsigned* by signed bytes,
  so a signed x is offset to unsigned (``a ^ 0x80 = a + 128``) and the excess ``128 * S_b``
  is taken off; ``S_b`` comes from a second ``vpdpbusd`` of the constant 0x80 bytes, so the
  weight is read once.
- ``avxvnni`` (Alder Lake and later, Zen 5): the same on 32 bytes (``vpdpbusd`` VEX form).
- ``avx2`` (no VNNI): bytes widened to 16 bits, then ``vpmaddwd`` (exact: no
  ``vpmaddubsw`` saturation), 16 bytes a step; ``S_b`` only when x has a zero point.
- portable C: one loop the compiler vectorises, any x and w types.

The VNNI kernels need a signed (i8) weight; a u8 weight takes the portable kernel. On a
machine without VNNI the VNNI functions still compile (they carry ``target`` attributes), so
the source is checked here even when it cannot run: tests/quant/test_igemm.py compiles it and
finds their symbols. ``RLX_IGEMM_ISA=c`` forces the portable kernel (tests run both).
"""

from __future__ import annotations

import math
import os
from typing import Any

from rlx_core.errors import RlxError
from rlx_core.ir import dtypes as dt
from rlx_core.ir.graph import Node
from rlx_core.targets.c_common.expr import RenderError
from rlx_core.targets.c_common.kernels import KernelEnv
from rlx_core.targets.c_common.loops import Writer
from rlx_core.targets.cpu import igemm_packed

IMPL = "rlx-igemm"
DTYPES: tuple[str, ...] = ("i8", "u8", "i32")
ROW_BLOCK = 16  # rows of x per work item
COL_BLOCK = 64  # columns (rows of w) per work item: 16 dot4 calls
# the packed GEMM's work item: 32 rows x 64 columns (four 16-column panels, each reused from
# L1 by the eight 4-row tiles; on MiniLM at batch 1 that is 24 to 96 items for the team)
PACKED_ROW_BLOCK, PACKED_COL_BLOCK = 32, 64
# dynamic_int_linear's work item quantizes its 32 rows itself, so the fewer column blocks a
# row block has, the less that work repeats: all columns in one item where the row blocks
# alone make DYNAMIC_MIN_ITEMS items, else as many blocks of >= 128 columns as it takes
DYNAMIC_COL_BLOCK, DYNAMIC_MIN_ITEMS = 128, 8
# on AMX the tiles take about as long as quantizing the rows (an f32 division an element), so
# the rows are quantized once: column blocks only where the row blocks make fewer than 2
# items (one per thread of a 2-core team). Emerald Rapids, 1 thread, 128 x 1536 x 384:
# dynamic 0.223 -> 0.154 ms, static 0.153 -> 0.107
AMX_MIN_ITEMS = 2

SOURCE = r"""
#ifndef RLX_IGEMM_H
#define RLX_IGEMM_H
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__) && defined(__GNUC__)
#define RLX_IG_X86 1
#include <immintrin.h>
#include <cpuid.h>
#endif

/* (S_ab, S_b) for one row a against four rows b, b + ldb, ...: portable C, any byte types */
#define RLX_IDOT4_C(NAME, TA, TB)                                                          \
static void NAME(const void *av, const void *bv, int64_t ldb, int64_t k, int32_t *ab,      \
                 int32_t *sb) {                                                            \
    const TA *a = (const TA *)av;                                                          \
    for (int q = 0; q < 4; ++q) {                                                          \
        const TB *b = (const TB *)bv + q * ldb;                                            \
        int32_t s = 0, t = 0;                                                              \
        if (sb) {                                                                          \
            _Pragma("omp simd reduction(+:s,t)")                                           \
            for (int64_t p = 0; p < k; ++p) { s += (int32_t)a[p] * (int32_t)b[p];          \
                                              t += b[p]; }                                 \
            sb[q] = t;                                                                     \
        } else {                                                                           \
            _Pragma("omp simd reduction(+:s)")                                             \
            for (int64_t p = 0; p < k; ++p) s += (int32_t)a[p] * (int32_t)b[p];            \
        }                                                                                  \
        ab[q] = s;                                                                         \
    }                                                                                      \
}
RLX_IDOT4_C(rlx_idot4_c_ss, int8_t, int8_t)
RLX_IDOT4_C(rlx_idot4_c_us, uint8_t, int8_t)
RLX_IDOT4_C(rlx_idot4_c_su, int8_t, uint8_t)
RLX_IDOT4_C(rlx_idot4_c_uu, uint8_t, uint8_t)

typedef void (*rlx_idot4_fn)(const void *, const void *, int64_t, int64_t, int32_t *,
                             int32_t *);

#ifdef RLX_IG_X86
/* the end of a VNNI kernel's four dot products: s[q] (a . b_q) and t[q] (128 * S_b) summed
   across the vector (HSUM), a flipped a's 128 * S_b taken off, the last k % width inputs in
   scalar; ab[q] = a . b_q and sb[q] = S_b */
#define RLX_IDOT4_END(HSUM, FLIP)                                                          \
    for (int q = 0; q < 4; ++q) {                                                          \
        const int32_t tb = HSUM(t[q]);                                                     \
        int32_t acc = HSUM(s[q]) - (FLIP ? tb : 0), sum = tb / 128;                        \
        const int8_t *bq = b + q * ldb;                                                    \
        for (int64_t r = p; r < k; ++r) {                                                  \
            acc += (int32_t)(FLIP ? (int8_t)a[r] : (int32_t)a[r]) * bq[r]; sum += bq[r];   \
        }                                                                                  \
        ab[q] = acc; if (sb) sb[q] = sum;                                                  \
    }

/* the VNNI kernels: FLIP is 0x80 for a signed a (a ^ 0x80 = a + 128 as unsigned), else 0 */
#define RLX_IDOT4_512(NAME, FLIP)                                                          \
__attribute__((target("avx512f,avx512bw,avx512vnni")))                                     \
static void NAME(const void *av, const void *bv, int64_t ldb, int64_t k, int32_t *ab,      \
                 int32_t *sb) {                                                            \
    const uint8_t *a = (const uint8_t *)av;                                                \
    const int8_t *b = (const int8_t *)bv;                                                  \
    const __m512i flip = _mm512_set1_epi8((char)FLIP), hi = _mm512_set1_epi8((char)0x80);  \
    __m512i s0 = _mm512_setzero_si512(), s1 = s0, s2 = s0, s3 = s0;                        \
    __m512i t0 = s0, t1 = s0, t2 = s0, t3 = s0;                                            \
    int64_t p = 0;                                                                         \
    for (; p + 64 <= k; p += 64) {                                                         \
        const __m512i x = _mm512_xor_si512(_mm512_loadu_si512(a + p), flip);               \
        const __m512i b0 = _mm512_loadu_si512(b + p), b1 = _mm512_loadu_si512(b + ldb + p);\
        const __m512i b2 = _mm512_loadu_si512(b + 2 * ldb + p);                            \
        const __m512i b3 = _mm512_loadu_si512(b + 3 * ldb + p);                            \
        s0 = _mm512_dpbusd_epi32(s0, x, b0); t0 = _mm512_dpbusd_epi32(t0, hi, b0);         \
        s1 = _mm512_dpbusd_epi32(s1, x, b1); t1 = _mm512_dpbusd_epi32(t1, hi, b1);         \
        s2 = _mm512_dpbusd_epi32(s2, x, b2); t2 = _mm512_dpbusd_epi32(t2, hi, b2);         \
        s3 = _mm512_dpbusd_epi32(s3, x, b3); t3 = _mm512_dpbusd_epi32(t3, hi, b3);         \
    }                                                                                      \
    /* t = 128 * S_b over the vector part; with a flipped, S_ab = S_(a+128)b - 128 S_b */  \
    const __m512i s[4] = {s0, s1, s2, s3}, t[4] = {t0, t1, t2, t3};                        \
    RLX_IDOT4_END(_mm512_reduce_add_epi32, FLIP)                                           \
}
RLX_IDOT4_512(rlx_idot4_vnni512_s, 0x80)
RLX_IDOT4_512(rlx_idot4_vnni512_u, 0x00)

static inline int32_t rlx_ig_hsum256(__m256i v) __attribute__((target("avx2")));
static inline int32_t rlx_ig_hsum256(__m256i v) {
    __m128i x = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    x = _mm_add_epi32(x, _mm_shuffle_epi32(x, 0x4e));
    x = _mm_add_epi32(x, _mm_shuffle_epi32(x, 0xb1));
    return _mm_cvtsi128_si32(x);
}

#define RLX_IDOT4_256(NAME, FLIP)                                                          \
__attribute__((target("avx2,avxvnni")))                                                    \
static void NAME(const void *av, const void *bv, int64_t ldb, int64_t k, int32_t *ab,      \
                 int32_t *sb) {                                                            \
    const uint8_t *a = (const uint8_t *)av;                                                \
    const int8_t *b = (const int8_t *)bv;                                                  \
    const __m256i flip = _mm256_set1_epi8((char)FLIP), hi = _mm256_set1_epi8((char)0x80);  \
    __m256i s0 = _mm256_setzero_si256(), s1 = s0, s2 = s0, s3 = s0;                        \
    __m256i t0 = s0, t1 = s0, t2 = s0, t3 = s0;                                            \
    int64_t p = 0;                                                                         \
    for (; p + 32 <= k; p += 32) {                                                         \
        const __m256i x = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(a + p)),   \
                                           flip);                                          \
        const __m256i b0 = _mm256_loadu_si256((const __m256i *)(b + p));                   \
        const __m256i b1 = _mm256_loadu_si256((const __m256i *)(b + ldb + p));             \
        const __m256i b2 = _mm256_loadu_si256((const __m256i *)(b + 2 * ldb + p));         \
        const __m256i b3 = _mm256_loadu_si256((const __m256i *)(b + 3 * ldb + p));         \
        s0 = _mm256_dpbusd_avx_epi32(s0, x, b0); t0 = _mm256_dpbusd_avx_epi32(t0, hi, b0); \
        s1 = _mm256_dpbusd_avx_epi32(s1, x, b1); t1 = _mm256_dpbusd_avx_epi32(t1, hi, b1); \
        s2 = _mm256_dpbusd_avx_epi32(s2, x, b2); t2 = _mm256_dpbusd_avx_epi32(t2, hi, b2); \
        s3 = _mm256_dpbusd_avx_epi32(s3, x, b3); t3 = _mm256_dpbusd_avx_epi32(t3, hi, b3); \
    }                                                                                      \
    const __m256i s[4] = {s0, s1, s2, s3}, t[4] = {t0, t1, t2, t3};                        \
    RLX_IDOT4_END(rlx_ig_hsum256, FLIP)                                                    \
}
RLX_IDOT4_256(rlx_idot4_avxvnni_s, 0x80)
RLX_IDOT4_256(rlx_idot4_avxvnni_u, 0x00)

/* AVX2 without VNNI: bytes widened to 16 bits (exact, no vpmaddubsw saturation), then
   vpmaddwd; S_b (a second vpmaddwd with ones) only when a zero point needs it */
#define RLX_IDOT4_AVX2(NAME, CVTA, SIGNED)                                                       \
__attribute__((target("avx2")))                                                            \
static void NAME(const void *av, const void *bv, int64_t ldb, int64_t k, int32_t *ab,      \
                 int32_t *sb) {                                                            \
    const uint8_t *a = (const uint8_t *)av;                                                \
    const int8_t *b = (const int8_t *)bv;                                                  \
    const __m256i one = _mm256_set1_epi16(1);                                              \
    __m256i s0 = _mm256_setzero_si256(), s1 = s0, s2 = s0, s3 = s0;                        \
    __m256i t0 = s0, t1 = s0, t2 = s0, t3 = s0;                                            \
    int64_t p = 0;                                                                         \
    for (; p + 16 <= k; p += 16) {                                                         \
        const __m256i x = CVTA(_mm_loadu_si128((const __m128i *)(a + p)));                 \
        const __m256i b0 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(b + p)));\
        const __m256i b1 = _mm256_cvtepi8_epi16(                                           \
            _mm_loadu_si128((const __m128i *)(b + ldb + p)));                              \
        const __m256i b2 = _mm256_cvtepi8_epi16(                                           \
            _mm_loadu_si128((const __m128i *)(b + 2 * ldb + p)));                          \
        const __m256i b3 = _mm256_cvtepi8_epi16(                                           \
            _mm_loadu_si128((const __m128i *)(b + 3 * ldb + p)));                          \
        s0 = _mm256_add_epi32(s0, _mm256_madd_epi16(x, b0));                               \
        s1 = _mm256_add_epi32(s1, _mm256_madd_epi16(x, b1));                               \
        s2 = _mm256_add_epi32(s2, _mm256_madd_epi16(x, b2));                               \
        s3 = _mm256_add_epi32(s3, _mm256_madd_epi16(x, b3));                               \
        if (sb) {                                                                          \
            t0 = _mm256_add_epi32(t0, _mm256_madd_epi16(one, b0));                         \
            t1 = _mm256_add_epi32(t1, _mm256_madd_epi16(one, b1));                         \
            t2 = _mm256_add_epi32(t2, _mm256_madd_epi16(one, b2));                         \
            t3 = _mm256_add_epi32(t3, _mm256_madd_epi16(one, b3));                         \
        }                                                                                  \
    }                                                                                      \
    const __m256i s[4] = {s0, s1, s2, s3}, t[4] = {t0, t1, t2, t3};                        \
    for (int q = 0; q < 4; ++q) {                                                          \
        int32_t acc = rlx_ig_hsum256(s[q]), sum = rlx_ig_hsum256(t[q]);                    \
        const int8_t *bq = b + q * ldb;                                                    \
        for (int64_t r = p; r < k; ++r) {                                                  \
            acc += (int32_t)(SIGNED ? (int8_t)a[r] : (int32_t)a[r])                   \
                   * bq[r];                                                                \
            sum += bq[r];                                                                  \
        }                                                                                  \
        ab[q] = acc; if (sb) sb[q] = sum;                                                  \
    }                                                                                      \
}
RLX_IDOT4_AVX2(rlx_idot4_avx2_s, _mm256_cvtepi8_epi16, 1)
RLX_IDOT4_AVX2(rlx_idot4_avx2_u, _mm256_cvtepu8_epi16, 0)
#endif

/* RLX_IGEMM_ISA caps the int8 kernels at one path (each lower path is testable on one
   machine): c, avx2, avxvnni, avx512vnni or amx, ranked 0..4; unset: no cap. Code compiled
   for a forced lower family (RLX_CPU_ISA=avx2: -mno-avx512f, -mno-avxvnni) caps them too. */
static int rlx_igemm_cap(void) {
    const char *force = getenv("RLX_IGEMM_ISA");
    int cap = 4;
    if (force && force[0]) {
        cap = !strcmp(force, "avx2") ? 1 : !strcmp(force, "avxvnni") ? 2
              : !strcmp(force, "avx512vnni") ? 3 : !strcmp(force, "amx") ? 4 : 0;
    }
#ifdef RLX_IG_X86
    {   /* the family the code is compiled for: no AVX2 (RLX_CPU_ISA=sse) 0; AVX2 without
           AVX-512 (RLX_CPU_ISA=avx2) 1, or 2 with AVX-VNNI; AVX-512 4 */
#if !defined(__AVX2__)
        const int family = 0;
#elif !defined(__AVX512F__) && defined(__AVXVNNI__)
        const int family = 2;
#elif !defined(__AVX512F__)
        const int family = 1;
#else
        const int family = 4;
#endif
        cap = cap < family ? cap : family;
    }
#endif
    return cap;
}

/* the ISA the dot kernels use here: 2 avx512vnni, 1 avxvnni, 3 avx2, 0 portable C (the
   highest the CPU has within rlx_igemm_cap) */
static int rlx_igemm_isa(void) {
    static int isa = -1;
    if (isa < 0) {
        int v = 0;
#ifdef RLX_IG_X86
        const int cap = rlx_igemm_cap();
        __builtin_cpu_init();
        if (cap >= 3 && __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512bw")
            && __builtin_cpu_supports("avx512vl")) v = 2;
        else if (cap >= 2 && __builtin_cpu_supports("avxvnni")) v = 1;
        else if (cap >= 1 && __builtin_cpu_supports("avx2")) v = 3;
#endif
        isa = v;
    }
    return isa;
}

static rlx_idot4_fn rlx_idot4_pick(int a_u8, int b_u8) {
    const int isa = b_u8 ? 0 : rlx_igemm_isa();  /* VNNI needs a signed weight */
#ifdef RLX_IG_X86
    if (isa == 2) return a_u8 ? rlx_idot4_vnni512_u : rlx_idot4_vnni512_s;
    if (isa == 1) return a_u8 ? rlx_idot4_avxvnni_u : rlx_idot4_avxvnni_s;
    if (isa == 3) return a_u8 ? rlx_idot4_avx2_u : rlx_idot4_avx2_s;
#endif
    (void)isa;
    if (a_u8) return b_u8 ? rlx_idot4_c_uu : rlx_idot4_c_us;
    return b_u8 ? rlx_idot4_c_su : rlx_idot4_c_ss;
}

/* rows [i0, i1) x columns [j0, j1) of C (m x n, i32) = (A - za)(B - zb)^T (+ bias), A (m x k)
   and B (n x k) row-major bytes of the given signedness */
static void rlx_igemm_block(int64_t i0, int64_t i1, int64_t j0, int64_t j1, int64_t n,
                            int64_t k, const void *A, int a_u8, int32_t za, const void *B,
                            int b_u8, int32_t zb, const int32_t *bias, int32_t *C) {
    const rlx_idot4_fn dot4 = rlx_idot4_pick(a_u8, b_u8);
    const unsigned char *a = (const unsigned char *)A, *b = (const unsigned char *)B;
    for (int64_t i = i0; i < i1; ++i) {
        const unsigned char *ai = a + i * k;
        int32_t sa = 0;
        if (zb) {
            if (a_u8) for (int64_t p = 0; p < k; ++p) sa += ai[p];
            else for (int64_t p = 0; p < k; ++p) sa += (int8_t)ai[p];
        }
        const int32_t fixed = (int32_t)k * za * zb - zb * sa;
        int32_t *ci = C + i * n;
        int64_t j = j0;
        int32_t ab[4], sb[4];
        for (; j + 4 <= j1; j += 4) {
            dot4(ai, b + j * k, k, k, ab, za ? sb : 0);
            for (int q = 0; q < 4; ++q)
                ci[j + q] = ab[q] - (za ? za * sb[q] : 0) + fixed + (bias ? bias[j + q] : 0);
        }
        for (; j < j1; ++j) {  /* the last columns, one at a time, on the portable kernel */
            int32_t s = 0, t = 0;
            const unsigned char *bj = b + j * k;
            for (int64_t p = 0; p < k; ++p) {
                const int32_t x = a_u8 ? (int32_t)ai[p] : (int32_t)(int8_t)ai[p];
                const int32_t y = b_u8 ? (int32_t)bj[p] : (int32_t)(int8_t)bj[p];
                s += x * y; t += y;
            }
            ci[j] = s - za * t + fixed + (bias ? bias[j] : 0);
        }
    }
}
#endif
"""


def open_block_loop(env: KernelEnv, w: Writer, m: int, n: int, k: int, rows: int,
                    cols: int) -> None:
    """Open the (optionally parallel) loop over ``rows`` x ``cols`` blocks of an m x n output,
    defining the block's bounds ``i0, i1, j0, j1``; the caller writes the block call and
    closes it. Shared by the int8, dynamic int8 and int4 linears."""
    rb, cb = -(-m // rows), -(-n // cols)
    pragma = env.parallel(m * n * k, 0)
    if pragma:
        w.line(pragma)
    w.open(f"for (int64_t it = 0; it < {rb * cb}; ++it)")
    w.line(f"const int64_t i0 = (it / {cb}) * {rows}, j0 = (it % {cb}) * {cols};")
    w.line(f"const int64_t i1 = i0 + {rows} < {m} ? i0 + {rows} : {m};")
    w.line(f"const int64_t j1 = j0 + {cols} < {n} ? j0 + {cols} : {n};")


def emit_int_linear(env: KernelEnv, w: Writer, node: Node, packed: str | None = None) -> str:
    """Write the kernel's loop over (row block, column block) items; returns its impl label.
    ``packed``: the kernel parameter holding the weight prepacked (cpu/igemm_packed.py); the
    register-tiled GEMM then runs, else the dot kernels here (a weight computed in the graph,
    or a u8 weight)."""
    x, wt = env.inputs[node.inputs[0]], env.inputs[node.inputs[1]]
    bias = env.inputs[node.inputs[2]].ptr if len(node.inputs) == 3 else "0"
    out = env.outputs[node.name]
    if out.type.dtype != dt.i32 or wt.type.rank != 2:
        raise RenderError("int_linear: the CPU kernel writes i32 from a 2-D weight",
                          hint="the capability table claims int_linear in i8/u8 -> i32 only")
    n, k = wt.type.shape
    m = math.prod(x.type.shape[:-1])  # rows; with k == 0 the output is the bias, not empty
    rows, cols = (PACKED_ROW_BLOCK, PACKED_COL_BLOCK) if packed else (ROW_BLOCK, COL_BLOCK)
    open_block_loop(env, w, m, n, k, rows, cols)
    a_u8, za, zb = int(x.type.dtype == dt.u8), int(node.attr("a_zero_point")), int(
        node.attr("b_zero_point"))
    if packed:
        w.line(f"rlx_igp_block(i0, i1, j0, j1, {n}, {k}, {x.ptr}, {a_u8}, {za}, {packed}, "
               f"{wt.ptr}, {zb}, {bias}, {out.ptr});")
    else:
        w.line(f"rlx_igemm_block(i0, i1, j0, j1, {n}, {k}, {x.ptr}, {a_u8}, {za}, {wt.ptr}, "
               f"{int(wt.type.dtype == dt.u8)}, {zb}, {bias}, {out.ptr});")
    w.close()
    return igemm_packed.IMPL if packed else IMPL


def emit_dynamic_int_linear(env: KernelEnv, w: Writer, node: Node, packed: str | None) -> str:
    """``dynamic_int_linear`` whole: work items of 32 rows x all columns (or a few column
    blocks, to make enough items), each quantizing its rows once into its own buffer, then the packed GEMM (``packed``: the prepacked weight's
    parameter; else the row-major dot kernels) with the dequantize and bias in the store."""
    x, wt, ws, bias, out, act, res = _open_row_items(env, w, node)
    n, k = wt.type.shape
    w.line(f"rlx_igd_block(i0, i1, j0, j1, {n}, {k}, {x.ptr}, {int(node.attr('a_qmax'))}, "
           f"{packed or '0'}, {wt.ptr}, "
           f"{ws.ptr}, {bias}, {out.ptr}, {act}, {res});")
    w.close()
    return igemm_packed.DYNAMIC_IMPL


def _open_row_items(env: KernelEnv, w: Writer, node: Node) -> tuple[Any, ...]:
    """Open the work-item loop of a dynamic or static int8 linear: 32 rows x all columns (or
    a few column blocks, to make enough items). Returns x, the weight, the per-column scale
    buffer, the bias pointer ('0' without one), the output, the act and the residual."""
    ins, act, res = _epilogue(env, node)
    x, wt, scales = (env.inputs[i] for i in ins[:3])
    bias = env.inputs[ins[3]].ptr if len(ins) == 4 else "0"
    n, k = wt.type.shape
    m = math.prod(x.type.shape[:-1])
    open_block_loop(env, w, m, n, k, *_row_items(m, n))
    return x, wt, scales, bias, env.outputs[node.name], act, res


def _row_items(m: int, n: int) -> tuple[int, int]:
    """(rows, columns) of the work items of a linear that quantizes its rows itself: 32 rows
    x all columns, or a few column blocks of >= 128 where the row blocks alone make fewer
    than DYNAMIC_MIN_ITEMS items (each item quantizes its rows once more)."""
    rows = PACKED_ROW_BLOCK
    least = AMX_MIN_ITEMS if isa_here() == "amx" else DYNAMIC_MIN_ITEMS
    col_blocks = min(-(-n // DYNAMIC_COL_BLOCK), -(-least // max(-(-m // rows), 1)))
    return rows, -(-n // max(col_blocks, 1) // 16) * 16 or 16


def _epilogue(env: KernelEnv, node: Node) -> tuple[tuple[str, ...], int, str]:
    """The int8 linear's inputs without the residual, its act (1: GELU) and the residual's
    pointer ('0' without one): what rlx_ig_epilogue applies in the store."""
    ins = tuple(node.inputs)
    res = "0"
    if node.attr("residual"):
        res, ins = env.inputs[ins[-1]].ptr, ins[:-1]
    return ins, int(node.attr("act") == "gelu"), res


def emit_static_int_linear(env: KernelEnv, w: Writer, node: Node, packed: str | None) -> str:
    """``static_int_linear`` whole: the work items of ``dynamic_int_linear`` (each quantizes
    its rows once, with the fixed scale and zero point, into its own buffer), the packed GEMM,
    and the dequantize (``f32(acc) * acc_scale[j]``) in the store."""
    x, wt, sc, bias, out, act, res = _open_row_items(env, w, node)
    n, k = wt.type.shape
    scale = float(node.attr("a_scale"))
    w.line(f"rlx_igs_block(i0, i1, j0, j1, {n}, {k}, {x.ptr}, {scale!r}f, "
           f"{int(node.attr('a_zero_point'))}, {int(node.attr('a_qmin'))}, "
           f"{int(node.attr('a_qmax'))}, {packed or '0'}, {wt.ptr}, {sc.ptr}, {bias}, "
           f"{out.ptr}, {act}, {res});")
    w.close()
    return igemm_packed.STATIC_IMPL


def emit_requantized_int_linear(env: KernelEnv, w: Writer, node: Node,
                                packed: str | None) -> str:
    """``requantized_int_linear`` whole: int_linear's work items on the packed GEMM (the
    codes read in place; an f32 input quantized per work item, as static_int_linear's), the
    bias and requantize in the store, the int8 codes written; the
    multipliers and shifts as file-scope arrays before the kernel."""
    x, wt = env.inputs[node.inputs[0]], env.inputs[node.inputs[1]]
    bias = env.inputs[node.inputs[2]].ptr if len(node.inputs) == 3 else "0"
    out = env.outputs[node.name]
    n, k = wt.type.shape
    m = math.prod(x.type.shape[:-1])
    mult, shift = node.attr("multiplier"), node.attr("shift")
    arrays = f"{env.fn or 'rlx_igr'}_rq"
    env.preamble.append(
        f"static const int32_t {arrays}_m[{len(mult)}] = {{{', '.join(map(str, mult))}}};\n"
        f"static const int32_t {arrays}_s[{len(shift)}] = {{{', '.join(map(str, shift))}}};\n")
    kind = 2 if x.type.dtype == dt.f32 else int(x.type.dtype == dt.u8)
    # codes are read in place (int_linear's items); f32 rows are quantized per item
    items = _row_items(m, n) if kind == 2 else (PACKED_ROW_BLOCK, PACKED_COL_BLOCK)
    open_block_loop(env, w, m, n, k, *items)
    w.line(f"rlx_igr_block(i0, i1, j0, j1, {n}, {k}, {x.ptr}, {kind}, "
           f"{int(node.attr('a_zero_point'))}, {float(node.attr('a_scale'))!r}f, "
           f"{int(node.attr('a_qmin'))}, {int(node.attr('a_qmax'))}, {packed or '0'}, "
           f"{wt.ptr}, {bias}, "
           f"{arrays}_m, {arrays}_s, {int(len(mult) > 1)}, {int(node.attr('zero_point'))}, "
           f"{int(node.attr('qmin'))}, {int(node.attr('qmax'))}, "
           f"{int(out.type.dtype == dt.u8)}, {out.ptr});")
    w.close()
    return igemm_packed.REQUANT_IMPL


class IgemmIsaError(RlxError):
    """``RLX_IGEMM_ISA`` names no int8 kernel path (c, avx2, avxvnni, avx512vnni, amx)."""

    code = "RLX-Q005"


# the int8 kernel paths, lowest first (rlx_igemm_cap's ranks 0..4)
PATHS: tuple[str, ...] = ("c", "avx2", "avxvnni", "avx512vnni", "amx")


def cpu_isa_flags() -> dict[str, bool]:
    """Which int8 dot-product ISAs this machine's CPU reports (/proc/cpuinfo; Linux x86)."""
    from rlx_core.targets.cpu.isa import cpu_flags

    flags = cpu_flags()
    return {"avx512vnni": "avx512_vnni" in flags and "avx512vl" in flags,
            "avxvnni": "avx_vnni" in flags, "avx2": "avx2" in flags,
            "amx": "amx_int8" in flags and "amx_tile" in flags}


def paths_here() -> tuple[str, ...]:
    """Every int8 kernel path this machine runs in this ISA family (RLX_CPU_ISA), lowest
    first: what ``RLX_IGEMM_ISA`` can pick (tests run each)."""
    from rlx_core.targets.cpu import amx, isa

    family, f = isa.detect().family, cpu_isa_flags()
    if family not in ("avx2", "avx512"):
        return ("c",)  # code compiled without AVX2 takes the portable kernels
    # a forced avx2 family compiles with -mno-avxvnni: no VNNI (rlx_igemm_cap)
    have = {"c": True, "avx2": f["avx2"], "avxvnni": f["avxvnni"] and family == "avx512",
            "avx512vnni": f["avx512vnni"] and family == "avx512",
            "amx": f["amx"] and f["avx512vnni"] and family == "avx512"
                   and amx.request("amx_int8").usable}
    return tuple(p for p in PATHS if have[p])


def isa_here() -> str:
    """The int8 kernel path the compiled code picks on this machine (as rlx_igemm_isa and
    rlx_igemm_amx decide): the highest of ``paths_here()`` within ``RLX_IGEMM_ISA``."""
    want = os.environ.get("RLX_IGEMM_ISA", "")
    if want and want not in PATHS:
        raise IgemmIsaError(f"RLX_IGEMM_ISA={want!r} is not an int8 kernel path",
                            hint=f"use one of {', '.join(PATHS)}, or unset it")
    cap = PATHS.index(want) if want else len(PATHS) - 1
    return [p for p in paths_here() if PATHS.index(p) <= cap][-1]
