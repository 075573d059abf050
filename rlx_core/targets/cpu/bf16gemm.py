"""The bf16 x bf16 -> f32 GEMM of the cpu target: AMX-BF16 tiles, else AVX512-BF16 ``vdpbf16ps``.

A bf16 ``dot_general`` (what ``rlx.quant.amp.autocast(g, "bf16")`` makes of a linear) has bf16
operands and a bf16 result: each product of two bf16 values is exact in f32, the products are
summed in f32, and the sum is rounded once to bf16 (round to nearest even, as the numpy
reference rounds its f32 matmul). Only the order of the f32 additions differs from the
reference, and both instructions treat subnormal inputs and results as zero (DAZ/FTZ).

Paths, picked when the program is rendered (``path()``), highest first:

* ``amx``: AMX-BF16 tiles (Sapphire Rapids and later). Per 32 x 32 block of C four f32 tiles
  accumulate ``_tile_dpbf16ps`` of two 16-row A tiles (32 k each, read in place when op(A)'s
  rows are contiguous and K is a multiple of 32, else packed with zeros) and two B tiles.
  Linux must grant the tile state first (amx.py); where it does not, the kernel runs ``dp``.
* ``avx512bf16``: ``vdpbf16ps`` on zmm (Cooper Lake, Sapphire Rapids, Zen 4): 8 rows x 32
  columns, sixteen accumulators, one broadcast (k, k+1) pair of A per row and step.
* ``float``: the generated loop GEMM (c_common/matmul.py), bf16 widened to float: every
  other CPU, and a forced lower ISA path (``RLX_CPU_ISA=avx2``).

``RLX_BF16_GEMM=amx|avx512bf16|float`` forces a path no higher than the CPU's (each path is
testable on one machine; a path it cannot run is RLX-Q010). Both native paths read op(B) as
packed panels of 16 columns: panel q holds op(B)[0:KP, 16q:16q+16] as KP/2 rows of 16 (k, k+1)
pairs (element (p, c) at ``(p/2)*32 + 2c + p%2``, the VNNI layout of an AMX B tile and of
one zmm), KP being K rounded up to 32, zero past K and past N. A weight that is a graph
parameter is packed once per binding (prepack.py, kind ``bf16``), else each call packs the
columns it computes.
"""

from __future__ import annotations

import os

from rlx_core.errors import RlxError
from rlx_core.ir import dtypes as dt
from rlx_core.ir.graph import Graph
from rlx_core.targets.c_common.kernels import KernelEnv
from rlx_core.targets.c_common.loops import Writer
from rlx_core.targets.c_common.matmul import BlockEpilogue, GemmSpec
from rlx_core.targets.cpu import amx, isa, scratch

PATHS: tuple[str, ...] = ("amx", "avx512bf16", "float")
IMPLS: dict[str, str] = {"amx": "bf16-amx", "avx512bf16": "bf16-avx512bf16"}
PANEL = 16  # columns per packed panel
FOLDED = "folded-cast"  # the impl label of a weight cast the GEMMs took over (not run)


class Bf16PathError(RlxError):
    """``RLX_BF16_GEMM`` names an unknown path, or one this CPU (or ISA path) cannot run."""

    code = "RLX-Q010"


def native_paths() -> tuple[str, ...]:
    """The paths this process can run, highest first (``float`` always)."""
    ext = isa.detect().extensions
    out = []
    if amx.request("amx_bf16").usable:
        out.append("amx")
    if "avx512_bf16" in ext and isa.detect().family == "avx512":
        out.append("avx512bf16")
    return (*out, "float")


def path() -> str:
    """The path bf16 GEMMs take in this process: the highest native one, or
    ``RLX_BF16_GEMM`` when it names one this CPU runs."""
    have = native_paths()
    wanted = os.environ.get("RLX_BF16_GEMM", "").strip().lower()
    if wanted in ("", "auto", "native"):
        return have[0]
    if wanted not in PATHS:
        raise Bf16PathError(f"RLX_BF16_GEMM={wanted!r} is not a bf16 GEMM path",
                            hint=f"use one of {', '.join(PATHS)} or auto")
    if wanted not in have:
        why = "" if wanted != "amx" else f" ({amx.request('amx_bf16').why})"
        raise Bf16PathError(f"RLX_BF16_GEMM={wanted}: this CPU cannot run it{why}",
                            hint=f"this machine runs {', '.join(have)}")
    return wanted


def packed_bytes(n: int, k: int) -> int:
    """Bytes of op(B) (k x n) packed in 16-column panels, K rounded up to 32."""
    return -(-n // PANEL) * PANEL * (-(-k // 32) * 32) * 2


def takes(spec: GemmSpec) -> bool:
    """Does a native path run this GEMM (bf16 operands and result, sizes within int64)?"""
    return spec.dtype == dt.bf16 and path() != "float"


# the kernels; an AMX kernel falls back to the vdpbf16ps one when Linux refuses the tiles
SOURCE = amx.SOURCE + scratch.SOURCE + r"""
#ifndef RLX_BF16GEMM_H
#define RLX_BF16GEMM_H
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <immintrin.h>

static inline int64_t rlx_bf_kp(int64_t k) { return (k + 31) & ~(int64_t)31; }

/* one thread's scratch: packed columns of B (0), packed rows of A (1) */
RLX_SCRATCH(rlx_bf_scratch_b, uint16_t)
RLX_SCRATCH(rlx_bf_scratch_a, uint16_t)
static uint16_t *rlx_bf_scratch(int which, int64_t elems) {
    return which ? rlx_bf_scratch_a(elems) : rlx_bf_scratch_b(elems);
}

/* rows [0, mr) of op(A) into a rows x KP block (lda KP), zeros past mr and K */
static void rlx_bf_pack_a(int64_t mr, int64_t rows, int64_t K, const uint16_t *A, int64_t rm,
                          int64_t rk, uint16_t *dst) {
    const int64_t KP = rlx_bf_kp(K);
    if (rm == 1 && rk != 1) {  /* op(A) = A^T: read A's rows (contiguous in i), write columns */
        for (int64_t i = 0; i < rows; ++i) memset(dst + i * KP, 0, (size_t)KP * 2);
        for (int64_t p = 0; p < K; ++p)
            for (int64_t i = 0; i < mr; ++i) dst[i * KP + p] = A[p * rk + i];
        return;
    }
    for (int64_t i = 0; i < rows; ++i) {
        uint16_t *d = dst + i * KP;
        int64_t p = 0;
        if (i < mr) {
            if (rk == 1) { memcpy(d, A + i * rm, (size_t)K * 2); p = K; }
            else for (; p < K; ++p) d[p] = A[i * rm + p * rk];
        }
        for (; p < KP; ++p) d[p] = 0;
    }
}

/* op(A)'s rows from a (mr of them) as a block of `rows`, the way the kernels read it: in
   place (*lda = rm) when the block is whole and its rows contiguous with K as the kernel
   steps it (in_place), else packed into this thread's scratch (*lda = KP) */
static const uint16_t *rlx_bf_rows(int64_t mr, int64_t rows, int64_t K, const uint16_t *a,
                                   int64_t rm, int64_t rk, int in_place, int64_t *lda) {
    if (in_place && mr == rows) { *lda = rm; return a; }
    uint16_t *buf = rlx_bf_scratch(1, rows * rlx_bf_kp(K));
    rlx_bf_pack_a(mr, rows, K, a, rm, rk, buf);
    *lda = rlx_bf_kp(K);
    return buf;
}

/* a bf16's bits as the f32 it is */
static inline float rlx_bf_widen(uint16_t h) {
    const uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* scalar bf16 rounding, as the prelude's rlx_bf16_st (round to nearest even, NaN kept) */
static inline uint16_t rlx_bf_round(float f) {
    uint32_t u; memcpy(&u, &f, 4);
    if (f != f) return (uint16_t)((u >> 16) | 0x40u);
    u += 0x7FFFu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

/* columns [j0, j1) of op(B) (K x N, element (p, j) at B[p*brk + j*brn]; j0 a multiple of 16)
   into panels from dst: panel q (columns j0 + 16q ...) at dst + q*KP*16, element (p, c) at
   (p/2)*32 + 2c + p%2, zeros past K and N. B holds bf16 bits, or f32 values (f32 = 1: a
   weight cast to bf16 on the way, rounded as the cast kernel rounds) */
static void rlx_bf16_pack_any(int64_t N, int64_t K, const void *B, int f32, int64_t brk,
                              int64_t brn, uint16_t *dst, int64_t j0, int64_t j1) {
    const int64_t KP = rlx_bf_kp(K);
    for (int64_t q = 0; j0 + q * 16 < j1; ++q) {
        uint16_t *pan = dst + q * KP * 16;
#if defined(__AVX512F__) && defined(__AVX512BW__)
        if (!f32 && brn == 1 && j0 + q * 16 + 16 <= N) {
            /* rows of B hold the panel's 16 columns side by side: two rows widened to
               32 bits and interleaved make one panel row of 16 (k, k+1) pairs */
            const uint16_t *b = (const uint16_t *)B + j0 + q * 16;
            for (int64_t p = 0; p < KP; p += 2) {
                const __m512i lo = p < K ? _mm512_cvtepu16_epi32(
                    _mm256_loadu_si256((const __m256i *)(b + p * brk))) : _mm512_setzero_si512();
                const __m512i hi = p + 1 < K ? _mm512_cvtepu16_epi32(
                    _mm256_loadu_si256((const __m256i *)(b + (p + 1) * brk)))
                    : _mm512_setzero_si512();
                _mm512_storeu_si512(pan + p * 16, _mm512_or_si512(lo, _mm512_slli_epi32(hi, 16)));
            }
            continue;
        }
#endif
        for (int64_t c = 0; c < 16; ++c) {
            const int64_t j = j0 + q * 16 + c;
            int64_t p = 0;
            if (j < N && f32) {
                const float *col = (const float *)B + j * brn;
                for (; p < K; ++p) pan[(p >> 1) * 32 + 2 * c + (p & 1)] = rlx_bf_round(col[p * brk]);
            } else if (j < N) {
                const uint16_t *col = (const uint16_t *)B + j * brn;
                if (brk == 1)  /* a column's (k, k+1) pairs are adjacent: copy them whole */
                    for (; p + 1 < K; p += 2) memcpy(pan + p * 16 + 2 * c, col + p, 4);
                for (; p < K; ++p) pan[(p >> 1) * 32 + 2 * c + (p & 1)] = col[p * brk];
            }
            for (; p < KP; ++p) pan[(p >> 1) * 32 + 2 * c + (p & 1)] = 0;
        }
    }
}
static void rlx_bf16_pack_b(int64_t N, int64_t K, const uint16_t *B, int64_t brk, int64_t brn,
                            uint16_t *dst, int64_t j0, int64_t j1) {
    rlx_bf16_pack_any(N, K, B, 0, brk, brn, dst, j0, j1);
}
static void rlx_bf16_pack_b_f32(int64_t N, int64_t K, const float *B, int64_t brk, int64_t brn,
                                uint16_t *dst) {
    rlx_bf16_pack_any(N, K, B, 1, brk, brn, dst, 0, N);
}

/* C[i, j] = bf16(t[i*ldt + j]) for i < mr, j < nr. Whole 32-column rows take vcvtne2ps2bf16
   (round to nearest even, NaN kept quiet: the bits of rlx_bf16_st for every value but a
   subnormal, which the dot instructions have already flushed to zero) */
static void rlx_bf_store(const float *t, int64_t ldt, int64_t mr, int64_t nr, uint16_t *C,
                         int64_t ldc) {
#if defined(__AVX512BF16__)
    if (nr == 32) {
        for (int64_t i = 0; i < mr; ++i) {
            const __m512bh r = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(t + i * ldt + 16),
                                                   _mm512_loadu_ps(t + i * ldt));
            _mm512_storeu_si512(C + i * ldc, (__m512i)r);
        }
        return;
    }
#endif
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
    const __m512i bias = _mm512_set1_epi32(0x7FFF), one = _mm512_set1_epi32(1);
    const __m512i quiet = _mm512_set1_epi32(0x40);
    for (int64_t i = 0; i < mr; ++i)
        for (int64_t j = 0; j < nr; j += 16) {
            const __mmask16 m = nr - j >= 16 ? (__mmask16)0xFFFF
                                             : (__mmask16)((1u << (nr - j)) - 1u);
            const __m512 x = _mm512_maskz_loadu_ps(m, t + i * ldt + j);
            const __m512i u = _mm512_castps_si512(x);
            const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(u, 16), one);
            __m512i r = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(bias, odd)), 16);
            const __mmask16 nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
            r = _mm512_mask_or_epi32(r, nan, _mm512_srli_epi32(u, 16), quiet);
            _mm256_mask_storeu_epi16(C + i * ldc + j, m, _mm512_cvtepi32_epi16(r));
        }
#else
    for (int64_t i = 0; i < mr; ++i)
        for (int64_t j = 0; j < nr; ++j) C[i * ldc + j] = rlx_bf_round(t[i * ldt + j]);
#endif
}

#if RLX_AMX_COMPILED && defined(__AMX_BF16__)
#define RLX_BF_AMX 1
/* 32 x 32 blocks of C from 16 x 16 f32 tiles: tmm0..3 C, tmm4..5 A, tmm6..7 B */
static void rlx_bf_amx(int64_t M, int64_t K, const uint16_t *A, int64_t rm, int64_t rk,
                       const uint16_t *P, int64_t jbase, uint16_t *C, int64_t ldc, int64_t n0,
                       int64_t n1) {
    const int64_t KP = rlx_bf_kp(K);
    rlx_amx_tilecfg cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int t = 0; t < 8; ++t) { cfg.rows[t] = 16; cfg.colsb[t] = 64; }
    _tile_loadconfig(&cfg);
    float t[32 * 32] __attribute__((aligned(64)));
    const int in_place = rk == 1 && K % 32 == 0;
    for (int64_t i = 0; i < M; i += 32) {
        const int64_t mr = M - i < 32 ? M - i : 32;
        int64_t lda;
        const uint16_t *a = rlx_bf_rows(mr, 32, K, A + i * rm, rm, rk, in_place, &lda);
        const int two_r = mr > 16;
        for (int64_t j = n0; j < n1; j += 32) {
            const int64_t nr = n1 - j < 32 ? n1 - j : 32;
            const uint16_t *b0 = P + (j - jbase) / 16 * KP * 16, *b1 = b0 + KP * 16;
            _tile_zero(0); _tile_zero(1); _tile_zero(2); _tile_zero(3);
            if (two_r && nr > 16) {
                for (int64_t k = 0; k < KP; k += 32) {
                    _tile_loadd(4, a + k, lda * 2);
                    _tile_loadd(6, b0 + k * 16, 64);
                    _tile_loadd(7, b1 + k * 16, 64);
                    _tile_loadd(5, a + 16 * lda + k, lda * 2);
                    _tile_dpbf16ps(0, 4, 6);
                    _tile_dpbf16ps(1, 4, 7);
                    _tile_dpbf16ps(2, 5, 6);
                    _tile_dpbf16ps(3, 5, 7);
                }
            } else {
                for (int64_t k = 0; k < KP; k += 32) {
                    _tile_loadd(4, a + k, lda * 2);
                    _tile_loadd(6, b0 + k * 16, 64);
                    _tile_dpbf16ps(0, 4, 6);
                    if (nr > 16) { _tile_loadd(7, b1 + k * 16, 64); _tile_dpbf16ps(1, 4, 7); }
                    if (two_r) {
                        _tile_loadd(5, a + 16 * lda + k, lda * 2);
                        _tile_dpbf16ps(2, 5, 6);
                        if (nr > 16) _tile_dpbf16ps(3, 5, 7);
                    }
                }
            }
            _tile_stored(0, t, 128);
            _tile_stored(1, t + 16, 128);
            _tile_stored(2, t + 16 * 32, 128);
            _tile_stored(3, t + 16 * 32 + 16, 128);
            rlx_bf_store(t, 32, mr, nr, C + i * ldc + j, ldc);
        }
    }
    _tile_release();
}
#else
#define RLX_BF_AMX 0
#endif

/* 8 rows x 32 columns per step: sixteen f32 accumulators, one (k, k+1) pair of A broadcast per
   row and step (vdpbf16ps); a plain loop where the compiler has no AVX512-BF16 */
static void rlx_bf_dp(int64_t M, int64_t K, const uint16_t *A, int64_t rm, int64_t rk,
                      const uint16_t *P, int64_t jbase, uint16_t *C, int64_t ldc, int64_t n0,
                      int64_t n1) {
    const int64_t KP = rlx_bf_kp(K);
    float t[8 * 32] __attribute__((aligned(64)));
    const int in_place = rk == 1 && K % 2 == 0;
    for (int64_t i = 0; i < M; i += 8) {
        const int64_t mr = M - i < 8 ? M - i : 8;
        int64_t lda;
        const uint16_t *a = rlx_bf_rows(mr, 8, K, A + i * rm, rm, rk, in_place, &lda);
        const int64_t pairs = (K + 1) / 2;
        for (int64_t j = n0; j < n1; j += 32) {
            const int64_t nr = n1 - j < 32 ? n1 - j : 32;
            const uint16_t *b0 = P + (j - jbase) / 16 * KP * 16;
            const uint16_t *b1 = nr > 16 ? b0 + KP * 16 : b0;  /* one panel: computed twice */
#if defined(__AVX512BF16__)
            __m512 c[8][2];
            for (int r = 0; r < 8; ++r) c[r][0] = c[r][1] = _mm512_setzero_ps();
            for (int64_t p = 0; p < pairs; ++p) {
                const __m512bh v0 = (__m512bh)_mm512_loadu_si512(b0 + p * 32);
                const __m512bh v1 = (__m512bh)_mm512_loadu_si512(b1 + p * 32);
                for (int r = 0; r < 8; ++r) {
                    int32_t pr;
                    memcpy(&pr, a + r * lda + 2 * p, 4);
                    const __m512bh va = (__m512bh)_mm512_set1_epi32(pr);
                    c[r][0] = _mm512_dpbf16_ps(c[r][0], va, v0);
                    c[r][1] = _mm512_dpbf16_ps(c[r][1], va, v1);
                }
            }
            for (int r = 0; r < 8; ++r) {
                _mm512_store_ps(t + r * 32, c[r][0]);
                _mm512_store_ps(t + r * 32 + 16, c[r][1]);
            }
#else
            for (int r = 0; r < 8; ++r)
                for (int64_t cc = 0; cc < 32; ++cc) {
                    const uint16_t *pan = cc < 16 ? b0 : b1;
                    float s = 0.0f;
                    for (int64_t p = 0; p < 2 * pairs; ++p)
                        s += rlx_bf_widen(a[r * lda + p])
                             * rlx_bf_widen(pan[(p >> 1) * 32 + 2 * (cc % 16) + (p & 1)]);
                    t[r * 32 + cc] = s;
                }
#endif
            rlx_bf_store(t, 32, mr, nr, C + i * ldc + j, ldc);
        }
    }
}

/* each element of C[0:M, n0:n1] alone, op(A) and op(B) read where they are (op(B) from P's
   panels when it is prepacked whole): where the packing scratch could not be had (out of
   memory), slow but right */
static void rlx_bf_plain(int64_t M, int64_t K, const uint16_t *A, int64_t rm, int64_t rk,
                         const uint16_t *B, int64_t brk, int64_t brn, const uint16_t *P,
                         uint16_t *C, int64_t ldc, int64_t n0, int64_t n1) {
    const int64_t KP = rlx_bf_kp(K);
    for (int64_t i = 0; i < M; ++i)
        for (int64_t j = n0; j < n1; ++j) {
            float s = 0.0f;
            for (int64_t p = 0; p < K; ++p) {
                const uint16_t b = P ? P[j / 16 * KP * 16 + p / 2 * 32 + 2 * (j % 16) + p % 2]
                                     : B[p * brk + j * brn];
                s += rlx_bf_widen(A[i * rm + p * rk]) * rlx_bf_widen(b);
            }
            C[i * ldc + j] = rlx_bf_round(s);
        }
}

/* C[0:M, n0:n1] = bf16(op(A) op(B)) with f32 sums: op(A)[i, p] = A[i*rm + p*rk], op(B)[p, j] =
   B[p*brk + j*brn], or P: op(B) prepacked whole (rlx_bf16_pack_b from column 0; NULL: the
   call packs columns n0..n1). path 2: AMX tiles where Linux grants them, else vdpbf16ps */
static void rlx_bf16gemm(int64_t M, int64_t N, int64_t K, const uint16_t *A, int64_t rm,
                         int64_t rk, const uint16_t *B, int64_t brk, int64_t brn,
                         const uint16_t *P, uint16_t *C, int64_t ldc, int64_t n0, int64_t n1,
                         int path) {
    if (M <= 0 || n1 <= n0) return;
    int64_t jbase = 0;
    /* the scratch for A's rows (32 at most) reserved first, so the kernels' rlx_bf_rows
       never fails; out of memory for it or for B's columns: each element alone */
    uint16_t *buf = 0;
    if (!rlx_bf_scratch(1, 32 * rlx_bf_kp(K))
        || (!P && !(buf = rlx_bf_scratch(0, (n1 - (n0 & ~(int64_t)15) + 15) / 16 * 16
                                                * rlx_bf_kp(K))))) {
        rlx_bf_plain(M, K, A, rm, rk, B, brk, brn, P, C, ldc, n0, n1);
        return;
    }
    if (!P) {
        jbase = n0 & ~(int64_t)15;
        rlx_bf16_pack_b(N, K, B, brk, brn, buf, jbase, n1);
        P = buf;
    }
#if RLX_BF_AMX
    if (path == 2 && rlx_amx_ready()) {
        rlx_bf_amx(M, K, A, rm, rk, P, jbase, C, ldc, n0, n1);
        return;
    }
#endif
    (void)path;
    rlx_bf_dp(M, K, A, rm, rk, P, jbase, C, ldc, n0, n1);
}
#endif
"""


def foldable_casts(g: Graph) -> dict[str, str]:
    """The bf16 casts of f32 parameters the GEMMs can take over: {cast output: parameter}.

    ``autocast`` casts a linear's f32 weight to bf16 in the graph, an elementwise kernel
    that reads and writes the whole weight on every call (MiniLM: 42 MB read, 21 MB written).
    Where every reader of the cast is a bf16 GEMM taking it as op(B) in place (one batch,
    strides it can read), the GEMMs pack the weight from the f32 parameter once per binding,
    rounding as the cast does, and the cast kernel is not run (renderer: ``folded-cast``)."""
    from rlx_core.targets.c_common.matmul import operand_strides

    params = {v.name: v.type for v in g.params}
    readers: dict[str, list] = {}
    for k in g.kernels:
        for v in k.inputs:
            readers.setdefault(v, []).append(k)

    def reads_packed(k, value: str) -> bool:
        dots = [n for n in k.nodes if n.op == "dot_general"]
        if k.kind != "matmul" or len(dots) != 1 or dots[0].type.dtype != dt.bf16:
            return False
        (_, rc), (_, rb) = dots[0].attr("contract"), dots[0].attr("batch")
        rhs = g.type_of(value)
        return (dots[0].inputs[1] == value and dots[0].inputs[0] != value and not rb
                and sum(1 for n in k.nodes for i in n.inputs if i == value) == 1
                and operand_strides(rhs.shape, (), tuple(rc), False) is not None)

    out: dict[str, str] = {}
    for k in g.kernels:
        if k.kind != "elementwise" or len(k.nodes) != 1:
            continue
        node = k.nodes[0]
        src = node.inputs[0] if node.inputs else ""
        if (node.op == "cast" and node.type.dtype == dt.bf16 and src in params
                and params[src].dtype == dt.f32 and k.outputs == (node.name,)
                and node.name not in g.outputs and readers.get(node.name)
                and all(reads_packed(r, node.name) for r in readers[node.name])):
            out[node.name] = src
    # (the path last: a graph without bf16 GEMMs never reads RLX_BF16_GEMM)
    return out if out and path() != "float" else {}


def emit(w: Writer, env: KernelEnv, spec: GemmSpec, epilogue: BlockEpilogue | None,
         packed: str | None, counter: str) -> str | None:
    """The GEMM's calls (team mode: claimed chunks as blas's, each chunk's epilogue after it;
    else one call per batch on this thread). None when no native path runs here."""
    if not takes(spec):
        return None
    from rlx_core.targets.cpu.blas import _team_gemm

    which = path()
    code = 2 if which == "amx" else 1
    m, n, k = spec.m, spec.n, spec.k
    a_b, b_b = spec.a_at("bb"), spec.b_at("bb")
    c_b = f"{spec.c} + bb * {m * n}"
    rm, rk = spec.sa.row, spec.sa.col
    brk, brn = spec.sb.row, spec.sb.col

    def call(rows: str, a: str, c: str, cols: tuple[str, str] = ("0", str(n)),
             tile_at: tuple[str, str] | None = None) -> None:
        del tile_at  # no tile epilogue: a block's epilogue follows its call
        w.line(f"rlx_bf16gemm({rows}, {n}, {k}, {a}, {rm}, {rk}, {b_b}, {brk}, {brn}, "
               f"{packed or '0'}, {c}, {n}, {cols[0]}, {cols[1]}, {code});")

    if env.sync:
        if epilogue and not epilogue.fits("batch", "rows"):
            epilogue = None  # the kernel writes it after a barrier
        from rlx_core.targets.cpu.team import CLAIM

        if counter:
            env.extra_args.append((CLAIM, counter))
        # the split of rlx's own f32 kernel: column chunks for few rows (each packs only its
        # columns when B is not prepacked), blocks or rows for more
        _team_gemm(w, spec, call, a_b, c_b, epilogue, tiles=(True, bool(packed)))
    else:
        w.open(f"for (int64_t bb = 0; bb < {spec.batch}; ++bb)")
        call(str(m), a_b, c_b)
        w.close()
    return IMPLS[which]


__all__ = ["FOLDED", "IMPLS", "PATHS", "SOURCE", "Bf16PathError", "emit", "foldable_casts",
           "native_paths",
           "packed_bytes", "path", "takes"]
