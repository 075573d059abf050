"""The CPU's attention kernel: HIR ``attention`` kept whole, in f32 (cpu/caps.py).

Decomposed, attention is a scores GEMM writing (batch, heads, Sq, Sk), a row softmax reading
and writing all of it, and a second GEMM reading it back: on MiniLM at batch 32 that is
25 MB per layer through memory three times, three kernels and their barriers. Kept whole,
each thread takes (batch, head, block of query rows) items and does everything for one item
while its block of scores is in L2::

    for item in (batch, head, query rows r0..r1):        # shared out over the team
        keys j0..j1: first to last visible (padding)     # hidden ends left out: see below
        S = Q[r0:r1] @ K[j0:j1]^T                        # rlx_sgemm, into a per-thread buffer
        S = where(keep, S * scale, lowest); m = max(S)   # the padding / causal mask, one pass
        S = exp(S - m); t = sum(S)                       # f32 lane sums, the same pass
        O[r0:r1] = (S @ V[j0:j1]) / t                    # rlx_sgemm, into the output; then
                                                         # dv divisions a row instead of sk

The arithmetic is the decomposition's (dispatch/decompositions.attention): the same GEMM
kernel and summation order, scale then select, the row kernel's softmax steps, except that
the division by each row's sum follows the second GEMM instead of preceding it, so a native
and a common-IR compile agree to rounding. Both changes against the decomposition's four
passes over the scores (scale and mask, max, exp and sum, divide) leave two: MiniLM's
attention, one thread, 12 heads of 128 x 128 x 32, took 377-381 instead of 385-394 us a layer
(C harness; the two GEMMs alone take 238 us). Operands are read in place through their strides
in either layout, bhsd or bshd (the projections' own (batch, seq, heads, dim): the head split
and merge transposes then never run; see algebraic_simplify.attention_in_place).

Padded keys: a hidden key's weight is an exact 0, so the keys before a batch row's first and
after its last visible one (a padded sentence's tail, or a left-padded one's head) are left out
of both GEMMs and the softmax: exact, except that 0 * inf and 0 * NaN in the product with V
are NaN, so the ends are kept when a row of V there is not finite (and, under a causal mask,
the head is kept when a query row precedes the first visible key: it sees none and averages
all of V). MiniLM at batch 1 pads a 13-token sentence to 128. The softmax's exp is
``rlx_attn_exp``, rlx_exp_f's values for x - max <= 0 at less cost, and its sum is an f32
vector of lane sums instead of a double (the double conversion halved the vector width).
Zen 1 (AVX2 on 128-bit halves), one thread, MiniLM's 12 heads of 128 x 128 x 32 with a
quarter of the keys hidden: 1.47 ms a layer before, 1.01 after; the whole model at batch 1
88.4 -> 81.0 ms, batch 8 718 -> 652-692 ms (benchmarks/profile_minilm.py has the split).

AVX-512 (``rlx_attn_softmax_rows``): the scale/mask/max and exp/sum passes run 16 lanes with a
masked tail (``rlx_attn_exp16``, rlx_attn_exp's bits), where the compiler's vectorised loop ran
a short row's remainder as scalar code: 13 visible keys at MiniLM's batch 1 were all remainder.
Emerald Rapids, one thread, thread CPU time, the whole model's attention kernels: batch 1
1.37 -> 0.68 ms, batch 8 10.9 -> 7.0 ms, batch 2 x 8 tokens 0.19 -> 0.13 ms. The two GEMMs
read K^T and V as rlx_sgemm_packed's panels, packed once per item (``rlx_attn_pack_kt``: 16
keys a gather), and S's rows are whole panels wide, so no tile is copied out one scalar at a
time; the check that hidden rows of V are finite is one integer max a vector. Together
(A/B in alternating processes, same conditions): batch 1 0.69-0.71 -> 0.54 ms, batch 8
7.04-7.07 -> 5.85-5.90 ms. Four rows' exps then run interleaved (one row's chain of dependent
FMAs left the core idle on short rows): batch 1 0.53 -> 0.33 ms, batch 8 5.83 -> 4.67 ms,
batch 2 x 8 tokens 0.079 -> 0.056 ms. An item of at most 16 keys (after the hidden ends are
cut: a short sentence) skips the panels and rlx_sgemm_core (``rlx_attn_tiny_scores``,
``rlx_attn_tiny_out``): K^T gathered as one vector of keys a dimension, not a 32-key panel half
of zeros, each score row one accumulator, V's rows read in place, eight rows sharing each load;
the same sums in the same order, so the same bits (the C macro ``RLX_ATTN_TINY=0`` turns it off
for the test that compares them). Zen 4, 2 threads, thread 0's CPU time per call (median of
480 calls, both builds in one process, FIFO): MiniLM at batch 2 x 8 tokens 66.8 -> 41.6 us,
batch 1 (13 visible tokens of 128) 243 -> 182 us. Other ISAs keep the compiler-vectorised loops
and rlx_sgemm.
"""

from __future__ import annotations

import math

from rlx_core.dispatch.decompositions import LOWEST_FINITE
from rlx_core.ir.graph import Node
from rlx_core.ir.ops.hir import attention_dims
from rlx_core.targets.c_common import ctype_table as ct
from rlx_core.targets.c_common.expr import RenderError
from rlx_core.targets.c_common.kernels import KernelEnv
from rlx_core.targets.c_common.loops import Writer
from rlx_core.targets.cpu import scratch

IMPL = "rlx-attention"
DTYPES: tuple[str, ...] = ("f32",)
# a padding mask may be bool or any integer (or f32): nonzero is visible. A claim lists every
# dtype a node touches, and q, k, v are floats, so these widen nothing but the mask
MASK_DTYPES: tuple[str, ...] = ("bool", "u8", "i8", "i16", "i32", "u32", "i64")
# query rows per item when there are few (batch, head) pairs: enough items for the team
ROW_BLOCK = 48  # a multiple of both micro-kernels' row tiles (6 and 8)

# One sequence's attention under the team's threshold (MiniLM at one sentence of 8 tokens:
# 12 heads of 8 x 8 x 32) is still shared out over the team by heads, in the claim loop's
# affine order: thread 0 takes the first heads. Those are the columns of Q, K and V that the
# column-chunked projections before it left in that thread's cache (blas._claims_columns, the
# same order), so each thread reads its own; run on thread 0 alone it read the other half
# from the other core, and the other thread waited. When the host put the two vCPUs on
# different L3s (a 310 ns round trip between them instead of 55 ns) that took 13 us a layer
# instead of 6. MiniLM b1 s8 (2 threads, Zen 4, both builds in one process, alternating
# turns, FIFO): 0.984-0.995x the call's p50 in both build orders and both placements, same
# bits. HEADS_WORK stands in for the work so that env.parallel gives the claim loop; only in
# a team kernel (env.sync): an OpenMP region would cost more than the attention.
SHARE_HEADS = True
HEADS_WORK = 1 << 40

# the per-item work, written once per translation unit (after sgemm.SOURCE, which it calls)
SOURCE = scratch.SOURCE + r"""
#ifndef RLX_ATTENTION_H
#define RLX_ATTENTION_H
RLX_SCRATCH(rlx_attn_scratch, float)  /* one item's scores, flags, sums and panels */

/* is key j of a padding-mask row visible? any nonzero value (the sign bit of a float zero
   ignored); width in bytes */
static inline int rlx_attn_keep(const unsigned char *row, int64_t j, int width, int is_float) {
    uint64_t bits = 0;
    memcpy(&bits, row + j * width, (size_t)width);  /* little-endian: the low bytes */
    if (is_float) bits &= ~((uint64_t)1 << (8 * width - 1));
    return bits != 0;
}

/* score (i, j) scaled, or the lowest value where key j is hidden: the slow path's one score */
static inline float rlx_attn_score(int64_t i, int64_t j, const float *q, int64_t ldq,
                                   const float *k, int64_t ldk, int64_t d, float scale,
                                   float low, int causal, const unsigned char *mask, int mwidth,
                                   int mfloat) {
    if ((causal && j > i) || (mask && !rlx_attn_keep(mask, j, mwidth, mfloat))) return low;
    float s = 0.0f;
    for (int64_t p = 0; p < d; ++p) s += q[i * ldq + p] * k[j * ldk + p];
    return s * scale;
}

/* exp(x) for a softmax's x = score - row max <= 0 (or NaN), equal to rlx_exp_f there bit for
   bit (checked on every seventh negative float): the same reduction and polynomial (rlx_exp_rem_f) without the overflow case
   and the NaN select (NaN stays NaN through the arithmetic), and 2^n of a subnormal result
   as an exact scaling by 2^(n + 24) and one rounding by 2^-24 instead of two powers. 30% less
   time than rlx_exp_f in the softmax's loop (Zen 1) */
static inline float rlx_attn_exp(float x) {
    const float xc = x < -103.5f ? -103.5f : x;
    const float n = __builtin_floorf(xc * 1.44269504088896341f + 0.5f);
    const float p = rlx_exp_rem_f(xc, n);
    const float y = p * rlx_pow2i_f((int32_t)n + 24) * 5.9604644775390625e-8f;
    return x < -103.5f ? 0.0f : y;
}

#if defined(__AVX512F__)
/* the first `left` of 16 lanes (none when left <= 0) */
static inline __mmask16 rlx_attn_tail(int64_t left) {
    return left >= 16 ? (__mmask16)0xFFFF
                      : left <= 0 ? (__mmask16)0 : (__mmask16)((1u << left) - 1u);
}
#endif

/* are rows [j0, j1) of v (dv values each, ldv apart) free of NaN and infinities? A hidden
   key's weight is an exact 0, but 0 * inf or 0 * NaN in the product with V is NaN, as in
   the decomposition: such rows are not left out */
static int rlx_attn_finite(const float *v, int64_t ldv, int64_t dv, int64_t j0, int64_t j1) {
#if defined(__AVX512F__)
    /* the largest |value| as bits: not finite iff its exponent is all ones. One max a vector,
       where the sum below is a chain of dependent adds (14% of the attention's time at
       MiniLM's batch 8, whose padded tails are most of V) */
    __m512i big = _mm512_setzero_si512();
    const __m512i magnitude = _mm512_set1_epi32(0x7FFFFFFF);
    for (int64_t j = j0; j < j1; ++j)
        for (int64_t c = 0; c < dv; c += 16) {
            const __mmask16 m = rlx_attn_tail(dv - c);
            const __m512i x = _mm512_maskz_loadu_epi32(m, v + j * ldv + c);
            big = _mm512_max_epu32(big, _mm512_and_si512(x, magnitude));
        }
    return _mm512_reduce_max_epu32(big) < 0x7F800000u;
#else
    float z = 0.0f;
    for (int64_t j = j0; j < j1; ++j) {
        const float *restrict row = v + j * ldv;
        #pragma omp simd reduction(+:z)
        for (int64_t c = 0; c < dv; ++c) z += row[c] * 0.0f;  /* NaN iff one is not finite */
    }
    return z == 0.0f;
#endif
}

#if defined(__AVX512F__)
/* rlx_attn_exp on 16 lanes: the same operations in the same order (the scalar form's
   contractions are FMAs here too), so equal bit for bit (tests/targets/test_cpu_attention) */
static inline __m512 rlx_attn_exp16(__m512 x) {
    const __m512 lo = _mm512_set1_ps(-103.5f);
    const __m512 xc = _mm512_max_ps(lo, x);  /* x < lo ? lo : x: NaN stays NaN */
    const __m512 n = _mm512_roundscale_ps(
        _mm512_fmadd_ps(xc, _mm512_set1_ps(1.44269504088896341f), _mm512_set1_ps(0.5f)),
        _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), xc);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.9875691500e-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
    p = _mm512_add_ps(_mm512_fmadd_ps(_mm512_mul_ps(p, r), r, r), _mm512_set1_ps(1.0f));
    const __m512i e = _mm512_slli_epi32(
        _mm512_add_epi32(_mm512_cvttps_epi32(n), _mm512_set1_epi32(127 + 24)), 23);
    const __m512 y = _mm512_mul_ps(_mm512_mul_ps(p, _mm512_castsi512_ps(e)),
                                   _mm512_set1_ps(5.9604644775390625e-8f));
    return _mm512_maskz_mov_ps(~_mm512_cmp_ps_mask(x, lo, _CMP_LT_OQ), y);
}
#endif

#if defined(__AVX512F__)
/* AVX-512: the two GEMMs read K^T and V as rlx_sgemm_packed's panels, packed here once per
   item (the generic rlx_sgemm packed a partial panel of K^T, the keys past the last multiple
   of 32, one scalar at a time, and copied a partial tile of S out the same way: 13 keys at
   MiniLM's batch 1 were all partial), and S's rows are whole panels wide */
#define RLX_ATTN_PANELS 1
#define RLX_ATTN_PAD(x) (((x) + RLX_SG_NR - 1) / RLX_SG_NR * RLX_SG_NR)

/* K^T (d x sk, element (p, j) at k[j * ldk + p]) as panels of RLX_SG_NR keys, d rows each,
   zero past sk: 16 keys' p-th values per gather */
static void rlx_attn_pack_kt(const float *k, int64_t ldk, int64_t sk, int64_t d, float *kt) {
    enum { NR = RLX_SG_NR };
    if (ldk > INT32_MAX / 16) {  /* the gather's 32-bit offsets: one value at a time */
        for (int64_t j = 0; j < RLX_ATTN_PAD(sk); ++j)
            for (int64_t p = 0; p < d; ++p)
                kt[(j / NR) * d * NR + p * NR + j % NR] = j < sk ? k[j * ldk + p] : 0.0f;
        return;
    }
    const __m512i at = _mm512_mullo_epi32(
        _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
        _mm512_set1_epi32((int)ldk));
    for (int64_t j = 0; j < RLX_ATTN_PAD(sk); j += 16) {
        const __mmask16 m = rlx_attn_tail(sk - j);
        float *dst = kt + (j / NR) * d * NR + j % NR;
        const float *src = k + (j < sk ? j : 0) * ldk;
        for (int64_t p = 0; p < d; ++p)
            _mm512_storeu_ps(dst + p * NR,
                             _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m, at, src + p, 4));
    }
}

/* V (sk x dv, rows ldv apart) as panels of RLX_SG_NR columns, sk rows each, zero past dv */
static void rlx_attn_pack_v(const float *v, int64_t ldv, int64_t sk, int64_t dv, float *vp) {
    enum { NR = RLX_SG_NR };
    for (int64_t c = 0; c < RLX_ATTN_PAD(dv); c += 16) {
        const __mmask16 m = rlx_attn_tail(dv - c);
        float *dst = vp + (c / NR) * sk * NR + c % NR;
        for (int64_t p = 0; p < sk; ++p)
            _mm512_storeu_ps(dst + p * NR, _mm512_maskz_loadu_ps(m, v + p * ldv + c));
    }
}
#else
#define RLX_ATTN_PANELS 0
#define RLX_ATTN_PAD(x) (x)
#endif

#if defined(__AVX512F__)
#define RLX_ATTN_ROWS 4  /* rows whose exps run interleaved */

/* Few keys (RLX_ATTN_TINY at most, one vector of scores a row: MiniLM's batch 2 x 8 tokens):
   the two products without panels or rlx_sgemm_core. K^T is gathered as d vectors of the sk
   keys (not a 32-key panel, half of it zeros), each row's scores are one accumulator, and
   O's rows take V's rows in place; eight rows at a time share each load. Each score and
   each output is the GEMM's sum in the GEMM's order (fused multiply-adds over p, then over
   j, from zero), so the bits are the panels' */
#ifndef RLX_ATTN_TINY  /* keys at most; 0: none (the test of the bits compares both) */
#define RLX_ATTN_TINY 16
#endif
#define RLX_ATTN_TINY_ROWS 8

/* S (rows x sk, rows 16 floats apart) = Q K^T: q at row 0 (ldq apart), kt: d x 16 floats */
static void rlx_attn_tiny_scores(int64_t rows, int64_t sk, int64_t d, const float *q,
                                 int64_t ldq, const float *k, int64_t ldk, float *s,
                                 float *kt) {
    enum { R = RLX_ATTN_TINY_ROWS };
    const __mmask16 m = rlx_attn_tail(sk);
    const __m512i at = _mm512_mullo_epi32(
        _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
        _mm512_set1_epi32((int)ldk));
    for (int64_t p = 0; p < d; ++p)
        _mm512_storeu_ps(kt + p * 16, _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m, at,
                                                               k + p, 4));
    for (int64_t r0 = 0; r0 < rows; r0 += R) {
        const float *qi[R];
        for (int i = 0; i < R; ++i)  /* a short group repeats its last row, stored once */
            qi[i] = q + (r0 + i < rows ? r0 + i : rows - 1) * ldq;
        __m512 acc[R];
        for (int i = 0; i < R; ++i) acc[i] = _mm512_setzero_ps();
        for (int64_t p = 0; p < d; ++p) {
            const __m512 b = _mm512_loadu_ps(kt + p * 16);
            for (int i = 0; i < R; ++i)
                acc[i] = _mm512_fmadd_ps(_mm512_set1_ps(qi[i][p]), b, acc[i]);
        }
        for (int i = 0; i < R && r0 + i < rows; ++i) _mm512_storeu_ps(s + (r0 + i) * 16, acc[i]);
    }
}

/* O (rows x dv, ldo apart) = E V: E the rows' exps (16 floats apart), v at key 0 */
static void rlx_attn_tiny_out(int64_t rows, int64_t sk, int64_t dv, const float *e,
                              const float *v, int64_t ldv, float *o, int64_t ldo) {
    enum { R = RLX_ATTN_TINY_ROWS };
    for (int64_t r0 = 0; r0 < rows; r0 += R) {
        const float *ei[R];
        for (int i = 0; i < R; ++i)
            ei[i] = e + (r0 + i < rows ? r0 + i : rows - 1) * 16;
        for (int64_t c = 0; c < dv; c += 16) {
            const __mmask16 m = rlx_attn_tail(dv - c);
            __m512 acc[R];
            for (int i = 0; i < R; ++i) acc[i] = _mm512_setzero_ps();
            for (int64_t j = 0; j < sk; ++j) {
                const __m512 b = _mm512_maskz_loadu_ps(m, v + j * ldv + c);
                for (int i = 0; i < R; ++i)
                    acc[i] = _mm512_fmadd_ps(_mm512_set1_ps(ei[i][j]), b, acc[i]);
            }
            for (int i = 0; i < R && r0 + i < rows; ++i)
                _mm512_mask_storeu_ps(o + (r0 + i) * ldo + c, m, acc[i]);
        }
    }
}

/* one row of sk scores x in place: scaled, the lowest value where a key is hidden (keep[j]
   zero, or causal and j > i; select, not add); returns the row's max. 16 lanes, a masked
   tail: a short row (13 visible keys at MiniLM's batch 1) is not one scalar remainder */
static inline float rlx_attn_scale_row(float *restrict x, int64_t sk, const int32_t *keep,
                                       int causal, int64_t i, float scale, float low) {
    const __m512 vs = _mm512_set1_ps(scale), vl = _mm512_set1_ps(low);
    __m512 vmx = _mm512_set1_ps(-INFINITY);
    for (int64_t j = 0; j < sk; j += 16) {
        const __mmask16 m = rlx_attn_tail(sk - j);
        __mmask16 vis = m;
        if (keep) {
            const __m512i kj = _mm512_maskz_loadu_epi32(m, keep + j);
            vis &= _mm512_test_epi32_mask(kj, kj);
        }
        if (causal) vis &= rlx_attn_tail(i - j + 1);  /* keys j..j+15 visible up to i */
        __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + j), vs);
        v = _mm512_mask_blend_ps(vis, vl, v);
        _mm512_mask_storeu_ps(x + j, m, v);
        vmx = _mm512_mask_max_ps(vmx, m, v, vmx);  /* v > max ? v : max, as the loops below */
    }
    return _mm512_reduce_max_ps(vmx);
}

/* R rows (ls apart) of sk values: x = exp(x - mx[q]) and tot[q] = their sum (f32 lanes).
   The rows' exps interleave: one row's chain of a dozen dependent FMAs a vector left the
   core idle on short rows */
static inline __attribute__((always_inline)) void rlx_attn_exp_rows(
        const int R, float *restrict x, int64_t ls, int64_t sk, const float *mx, float *tot) {
    __m512 vm[RLX_ATTN_ROWS], vt[RLX_ATTN_ROWS];
    for (int q = 0; q < R; ++q) {
        vm[q] = _mm512_set1_ps(mx[q]);
        vt[q] = _mm512_setzero_ps();
    }
    for (int64_t j = 0; j < sk; j += 16) {
        const __mmask16 m = rlx_attn_tail(sk - j);
        for (int q = 0; q < R; ++q) {
            float *xq = x + q * ls + j;
            const __m512 e = rlx_attn_exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, xq), vm[q]));
            _mm512_mask_storeu_ps(xq, m, e);
            vt[q] = _mm512_mask_add_ps(vt[q], m, vt[q], e);
        }
    }
    for (int q = 0; q < R; ++q) tot[q] = _mm512_reduce_add_ps(vt[q]);
}
#endif

/* the softmax of rows [0, rows) of S (ls apart, sk scores each), all but its division: row r
   scaled, the lowest value where a key is hidden (keep[j] zero, or causal and j > i0 + r;
   select, not add), x = exp(x - max) and tot[r] = the row's sum of exps (f32 lane sums).
   AVX-512: rlx_attn_scale_row and RLX_ATTN_ROWS rows' exps at once; elsewhere the compiler
   vectorises */
static void rlx_attn_softmax_rows(float *restrict s, int64_t ls, int64_t rows, int64_t sk,
                                  const int32_t *keep, int causal, int64_t i0, float scale,
                                  float low, float *tot) {
#if defined(__AVX512F__)
    enum { R = RLX_ATTN_ROWS };
    float mx[R];
    int64_t r = 0;
    for (; r + R <= rows; r += R) {
        for (int q = 0; q < R; ++q)
            mx[q] = rlx_attn_scale_row(s + (r + q) * ls, sk, keep, causal, i0 + r + q, scale,
                                       low);
        rlx_attn_exp_rows(R, s + r * ls, ls, sk, mx, tot + r);
    }
    for (; r < rows; ++r) {
        mx[0] = rlx_attn_scale_row(s + r * ls, sk, keep, causal, i0 + r, scale, low);
        rlx_attn_exp_rows(1, s + r * ls, ls, sk, mx, tot + r);
    }
#else
    for (int64_t r = 0; r < rows; ++r) {
        float *restrict x = s + r * ls;
        const int64_t i = i0 + r;
        /* a loop per case, so each vectorises without the others' selects; the max in the
           same pass */
        float mx = -INFINITY;
        if (keep && causal) {
            #pragma omp simd reduction(max:mx)
            for (int64_t j = 0; j < sk; ++j) {
                x[j] = keep[j] && j <= i ? x[j] * scale : low;
                mx = x[j] > mx ? x[j] : mx;
            }
        } else if (keep) {
            #pragma omp simd reduction(max:mx)
            for (int64_t j = 0; j < sk; ++j) {
                x[j] = keep[j] ? x[j] * scale : low;
                mx = x[j] > mx ? x[j] : mx;
            }
        } else if (causal) {
            #pragma omp simd reduction(max:mx)
            for (int64_t j = 0; j < sk; ++j) {
                x[j] = j <= i ? x[j] * scale : low;
                mx = x[j] > mx ? x[j] : mx;
            }
        } else {
            #pragma omp simd reduction(max:mx)
            for (int64_t j = 0; j < sk; ++j) {
                x[j] = x[j] * scale;
                mx = x[j] > mx ? x[j] : mx;
            }
        }
        float t = 0.0f;
        #pragma omp simd reduction(+:t)
        for (int64_t j = 0; j < sk; ++j) {
            const float e = rlx_attn_exp(x[j] - mx);
            x[j] = e;
            t += e;
        }
        tot[r] = t;
    }
#endif
}

/* query rows [r0, r1) of one (batch, head): q, k, v, o point at its row 0, rows ld* apart;
   mask: that batch's padding-mask row (0: none), causal: keys j <= i only */
static void rlx_attention_rows(int64_t r0, int64_t r1, int64_t sk, int64_t d, int64_t dv,
                               const float *q, int64_t ldq, const float *k, int64_t ldk,
                               const float *v, int64_t ldv, float *o, int64_t ldo,
                               float scale, float low, int causal, const unsigned char *mask,
                               int mwidth, int mfloat) {
    const int64_t rows = r1 - r0;
    if (rows <= 0 || dv <= 0) return;
    if (sk == 0) {  /* nothing to attend to: the product with an empty V is zero */
        for (int64_t i = r0; i < r1; ++i) memset(o + i * ldo, 0, (size_t)dv * sizeof(float));
        return;
    }
    /* the scores (rows of ls floats: RLX_ATTN_PAD), the mask row as int32 flags, each row's
       sum; with AVX-512, K^T and V as GEMM panels (rlx_attn_pack_kt, rlx_attn_pack_v) */
    const int64_t sk0 = RLX_ATTN_PAD(sk), dv0 = RLX_ATTN_PAD(dv);
    const int64_t need = rows * sk0 + sk0 + rows + RLX_ATTN_PANELS * (d * sk0 + sk * dv0);
#ifndef RLX_ATTN_NO_SCRATCH  /* defined only by the test of the path below */
    float *s = rlx_attn_scratch(need);
#else
    float *s = 0;
#endif
    if (s == 0) {  /* out of memory for the scores: one row at a time, each score three times */
#define RLX_ATTN_SCORE(j) rlx_attn_score(i, j, q, ldq, k, ldk, d, scale, low, causal, mask, \
                                         mwidth, mfloat)
        for (int64_t i = r0; i < r1; ++i) {
            float mx = -INFINITY;
            for (int64_t j = 0; j < sk; ++j) {
                const float x = RLX_ATTN_SCORE(j);
                mx = x > mx ? x : mx;
            }
            double tot = 0.0;
            for (int64_t j = 0; j < sk; ++j) tot += (double)rlx_exp_f(RLX_ATTN_SCORE(j) - mx);
            for (int64_t c = 0; c < dv; ++c) o[i * ldo + c] = 0.0f;
            for (int64_t j = 0; j < sk; ++j) {
                const float pj = rlx_exp_f(RLX_ATTN_SCORE(j) - mx) / (float)tot;
                for (int64_t c = 0; c < dv; ++c) o[i * ldo + c] += pj * v[j * ldv + c];
            }
        }
#undef RLX_ATTN_SCORE
        return;
    }
    int32_t *keep = (int32_t *)(s + rows * sk0);
    float *tot = s + rows * sk0 + sk0;  /* each row's sum of exps */
    int64_t j0 = 0;  /* the item reads keys [j0, j0 + sk) of the head's: see the docstring */
    if (mask) {
        int64_t first = -1, last = -1;
        for (int64_t j = 0; j < sk; ++j) {
            keep[j] = rlx_attn_keep(mask, j, mwidth, mfloat);
            if (keep[j]) {
                first = first < 0 ? j : first;
                last = j;
            }
        }
        /* causal: a row before the first visible key sees none and averages all of V */
        first = causal && first > r0 ? 0 : first;
        if (last >= 0 && (first > 0 || last < sk - 1) && rlx_attn_finite(v, ldv, dv, 0, first)
            && rlx_attn_finite(v, ldv, dv, last + 1, sk)) {
            j0 = first;
            sk = last + 1 - first;
            k += j0 * ldk;
            v += j0 * ldv;
            keep += j0;
        }
    }
#if RLX_ATTN_PANELS
    /* few keys: rlx_attn_tiny_scores and rlx_attn_tiny_out, S's rows one vector apart */
    const int tiny = sk <= RLX_ATTN_TINY && ldk <= INT32_MAX / 16;
    const int64_t ls = tiny ? 16 : RLX_ATTN_PAD(sk);  /* S's row stride */
    /* S = Q[r0:r1] K^T over whole panels of keys (the padding keys are zeros, their scores
       never read), so every tile stores straight to S; then exp(S) V on V's panel */
    float *kt = tot + rows, *vp = kt + d * sk0;
    if (tiny) {
        rlx_attn_tiny_scores(rows, sk, d, q + r0 * ldq, ldq, k, ldk, s, kt);
    } else {
        rlx_attn_pack_kt(k, ldk, sk, d, kt);
        rlx_attn_pack_v(v, ldv, sk, dv, vp);
        /* the panels were just packed (in L1 / L2): rlx_sgemm_core fetches none ahead, as
           rlx_sgemm_packed does for a weight streamed from memory */
        rlx_sgemm_core(rows, d, q + r0 * ldq, ldq, 1, 0, 0, 0, kt, s, ls, 0, ls, 0, 0);
    }
#else
    const int64_t ls = RLX_ATTN_PAD(sk);  /* S's row stride */
    /* S = Q[r0:r1] K^T: element (p, j) of op(B) = K^T is k[j * ldk + p] */
    rlx_sgemm(rows, sk, d, q + r0 * ldq, ldq, 1, k, 1, ldk, s, ls, 0, sk);
#endif
    /* causal: key j (counted from j0) visible to query row i if j <= i - j0 */
    rlx_attn_softmax_rows(s, ls, rows, sk, mask ? keep : 0, causal, r0 - j0, scale, low, tot);
    /* O[r0:r1] = exp(S) V, then each row divided by its sum: the softmax's division moved
       past the product (dv values a row instead of sk; equal up to rounding). Element (p, c)
       of op(B) = V is v[p * ldv + c] */
#if RLX_ATTN_PANELS
    if (tiny)
        rlx_attn_tiny_out(rows, sk, dv, s, v, ldv, o + r0 * ldo, ldo);
    else
        rlx_sgemm_core(rows, sk, s, ls, 1, 0, 0, 0, vp, o + r0 * ldo, ldo, 0, dv, 0, 0);
#else
    rlx_sgemm(rows, dv, sk, s, ls, 1, v, ldv, 1, o + r0 * ldo, ldo, 0, dv);
#endif
    for (int64_t r = 0; r < rows; ++r) {
        float *restrict y = o + (r0 + r) * ldo;
        const float t = tot[r];
        for (int64_t c = 0; c < dv; ++c) y[c] = y[c] / t;
    }
}
#endif
"""


def emit_attention(env: KernelEnv, w: Writer, node: Node) -> str:
    """Write the kernel's loop over (batch, head, row block) items; returns its impl label."""
    d = node.type.dtype
    if d.name not in DTYPES:
        raise RenderError(f"attention on {d} has no CPU kernel",
                          hint="the capability table claims attention in f32 only")
    layout = node.attr("layout")
    q, k, v = (env.inputs[x] for x in node.inputs[:3])
    out = env.outputs[node.name]
    nb, nh, sq, dq = attention_dims(q.type, layout)
    sk, dv = attention_dims(k.type, layout)[2], attention_dims(v.type, layout)[3]
    scale = float(node.attr("scale")) or 1.0 / math.sqrt(dq)
    low = LOWEST_FINITE[d.name]

    def at(buf, bb: str) -> tuple[str, int]:
        """(C pointer to (b, h)'s row 0, row stride) of an operand in the layout."""
        seq, dim = attention_dims(buf.type, layout)[2:]
        if layout == "bhsd":
            return f"{buf.ptr} + ({bb}) * {seq * dim}", dim
        return f"{buf.ptr} + (({bb}) / {nh}) * {seq * nh * dim} + (({bb}) % {nh}) * {dim}", nh * dim

    mask_mode = node.attr("mask")
    if mask_mode == "padding":
        m = env.inputs[node.inputs[3]]
        md = m.type.dtype
        width = max(1, md.bits // 8)  # bytes per element (bool is one byte)
        mask = f"(const unsigned char*){m.ptr} + b * {sk * width}"
        mfloat = int(md.is_float)
    else:
        mask, width, mfloat = "0", 1, 0
    blocks = 1 if nb * nh >= 8 else -(-sq // ROW_BLOCK)
    per = sq if blocks == 1 else ROW_BLOCK
    items = nb * nh * blocks
    # all items together: a (sq x sk x d) and a (sq x dv x sk) GEMM per (batch, head)
    work = nb * nh * sq * sk * max(dq, dv)
    if SHARE_HEADS and env.sync and nb == 1 and nh > 1:  # a team kernel: see HEADS_WORK
        work = max(work, HEADS_WORK)
    pragma = env.parallel(work, 0)
    if pragma:
        w.line(pragma)
    w.open(f"for (int64_t it = 0; it < {items}; ++it)")
    w.line(f"const int64_t bb = it / {blocks}, r0 = (it % {blocks}) * {per};")
    w.line(f"const int64_t r1 = r0 + {per} < {sq} ? r0 + {per} : {sq};")
    w.line(f"const int64_t b = bb / {nh};")
    w.line("(void)b;")
    (qp, ldq), (kp, ldk), (vp, ldv), (op, ldo) = (at(x, "bb") for x in (q, k, v, out))
    w.line(f"rlx_attention_rows(r0, r1, {sk}, {dq}, {dv}, {qp}, {ldq}, {kp}, {ldk}, {vp}, "
           f"{ldv}, {op}, {ldo}, {ct.literal(scale, d)}, {ct.literal(low, d)}, "
           f"{int(mask_mode == 'causal')}, {mask}, {width}, {mfloat});")
    w.close()
    return IMPL
