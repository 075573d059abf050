"""rlx's own f32 GEMM for AVX-512 and AVX2 machines: packed B panels, a register tile of
8 x 32 (AVX-512) or 6 x 16 (AVX2 + FMA).

Why not OpenBLAS everywhere: on MiniLM's and the MLP's shapes (128-1024 rows, K 128-1536)
one thread of this kernel ran 81-103 GFLOP/s on a 2-core AVX-512 EPYC VM against 83-98 for
scipy-openblas32 and 96-109 for ONNX Runtime's MLAS, and its AVX2 tile 86-93 on a Zen 3 VM
against 85-91 and 92-94 (``python benchmarks/bench_gemm.py``, results/gemm.md holds the
latest run): alone, every library sits at the FMA ceiling. Inside a program it is clearer:
on the AVX-512 VM the MLP training step at 2 threads, both builds timed side by side in one
process, ran 13% faster with it than with OpenBLAS at 784-128-10/128 (0.57 vs 0.66 ms) and 8%
at 784-512-512-10/128 (on the Zen 3 VM: 0.445 vs 0.459 ms and 2.875 vs 2.901 ms), and
prepacked weights (prepack.py) exist only here. The differences that matter at these sizes:

- A is not packed. The micro-kernel broadcasts A's elements straight from the operand (eight
  rows, or eight columns of a transposed A), so small-M GEMMs skip a pass over A.
- B is packed once per call into panels of NR = 32 columns, K deep, each contiguous (a graph
  parameter is packed once per binding instead: ``rlx_sgemm_pack_b`` + ``rlx_sgemm_packed``,
  see prepack.py); a transposed B (``x @ W.T``, the common linear layer) is packed with
  8 x 8 register transposes, so packing costs a few percent of the multiply. With AVX-512
  each full panel of a W^T is packed by the first tile of its slice as that tile runs
  (``rlx_sgemm_acc_wt``), so the pack's loads overlap FMAs, except on a core at one FMA port
  where W's rows crowd the L1's sets (``wt_set_rows``: a pass packs it first). A B with
  contiguous rows in a call of at most DIRECT_ROWS rows is not packed at all: row p of a
  panel is then 32 contiguous floats of B's row p, read in place
  (``reads_b_in_place``; a partial last panel is still packed, since a full-width load would
  run past B, unless it is exactly one vector wide and every tile has MR rows). In the MLP
  step the weight gradient g^T x (128 x 128 x 784) took 207 instead of 224 us per call that
  way (RLX_CPU_PROFILE, both builds in one process), and at batch
  1024 (K = 1024, three KC slices) a C harness ran it in 1420 instead of 1554 us. With
  AVX-512 only a B one KC slice deep is read in place (``direct_depth``): on Emerald Rapids
  packing the deeper one made the 784-128-10/1024 step 2593 -> 2301 us on one thread and
  1412 -> 1305 on two, 784-512-512-10/1024 19.4 -> 18.7 and 9.36 -> 8.87 ms (both builds
  in one process, alternating turns, SCHED_FIFO).
- The tile is MR x NR = 8 x 32: sixteen zmm accumulators, two B loads and eight broadcasts
  per k step. 8 rows divide the row blocks the team hands out (multiples of 16). On an
  Emerald Rapids VM (two 512-bit FMA ports, 48 KB L1d, 2 MB L2) it ran warm at 227-240
  GFLOP/s of the 248 peak on MiniLM's and the MLP's shapes (C harness, one thread, prepacked
  B), and 12 x 32 / 14 x 32 tiles (24 / 28 accumulators) no faster (209-227 / 199-227): it
  is not latency-bound with sixteen accumulators on two ports (a port model of its loops:
  benchmarks/README.md, "portsim"; ``asm8``). Its k loop is unrolled by four
  (rlx_sgemm_acc: MiniLM's GEMMs 3-4.5% faster on one thread, b8/b32 3%/2% on two). With AVX2
  (16 ymm registers) it is 6 x 16: twelve accumulators, two B loads and a broadcast (the
  same C, other vector macros); on the 2-core Zen 3 VM (no AVX-512) MiniLM at batch 1 ran
  22.8 ms with it against 25.5 ms on OpenBLAS, separate processes alternated twice. The
  full AVX2 tile's k steps are inline asm (RLX_SG_ASM6_STEP; same FMAs, same order, same
  bits): GCC 12 spilled the C form's registers. On a Zen 4 built with RLX_CPU_ISA=avx2's
  flags (C harness, one thread, warm, FIFO; 118 GFLOP/s peak) the MLP step's weight gradient
  went from 73.5 to 104 GFLOP/s, its forward GEMM 102 -> 107, a prepacked 128 x 128 x 784
  110 -> 115; the 784-128-10/128 step on 2 threads 263-278K -> 320-346K img/s. A four-row
  edge tile's k steps are asm too (RLX_SG_ASM4_STEP, the same first twelve lines: the weight
  gradient's 64 rows a thread are ten tiles and four rows, 125 -> 119 us).
- Blocking: KC = 384, MC = 64 (60 with AVX2: whole 6-row tiles), NC = 256: a KC-deep slice
  of one panel (48 KB) is reused by the row tiles of MC, A's MC x KC block (96 KB) and the
  KC x NC block of packed B stay in L2 (a B read in place has no such block: its columns are
  one block, so A is packed once per KC slice). K is cut into even slices of at most 9/8 KC
  (``rlx_sgemm_kc``: 784 = 2 x 392, not 384 + 384 + 16; a prepacked B deeper than that,
  each panel read in order, in slices of at most 9/4 KC, ``rlx_sgemm_deep``), rows into
  even blocks as large as A's and B's blocks together allow (``rlx_sgemm_mc``: a narrow
  column chunk or a shallow K takes more rows per block, so B is streamed fewer times), and
  edge tiles of fewer than MR rows run a loop of their own row count, their accumulators in
  registers. On the Zen 1
  VM (one thread, C harness, caches flushed before each call) that took the MLP's GEMMs
  from 80-85% to 84-88% of the FMA peak.
- Software prefetches where the hardware's miss: each tile's rows of C before its k loop (a
  cold C stalled the stores at the tile's end), and, with B read in place, the next panel's
  rows a share per tile (they lie a row of B apart, a stride the prefetchers do not follow).
  A prepacked B has the next panel fetched into L2 during the current one's first block of
  rows (``rlx_sgemm_core_pf``): a model's weights stream from L3 or memory at every call, and
  each panel's first tile read them from there (MiniLM 2.3-5% faster on 2 threads, Emerald
  Rapids). With AVX-512 only where that block has NR / 4 row tiles or more (64 rows), whose
  k loops, a line every four steps, cover the next panel: MiniLM at batch 2 x 8 tokens (16
  rows, two tiles a panel, so a quarter of each panel fetched) ran its GEMMs on 2 threads of a
  Zen 4 in 1.82 instead of 2.01 ms a call without it (thread 0's CPU time, both builds in one
  process, FIFO; the call's p50 2.21 -> 2.01 ms), and fetching the whole panel (four lines a
  step) was slower than a quarter; the hardware prefetchers follow a panel's contiguous lines
  by themselves there. With AVX2 every first block fetches the next panel, each tile its share
  spread over its k loop (``RLX_SG_PF_LINES``: a line every four steps from four tiles up, as
  before; two at 16 rows' three tiles of 6, 6 and 4 rows; four for one tile): a 16-column
  panel is a line a k step, one every 6 cycles of a full tile at two FMAs a cycle, and the
  first tile of each panel waited on those lines as demand misses. MiniLM b2 s8 under
  ``RLX_CPU_ISA=avx2`` on the Zen 4 (2 threads, both builds in one process in alternating
  turns of 200 calls, FIFO, load 5-6): 3.07 -> 1.92 ms a call (p50 of the turns; 3.00-3.29
  against 1.88-1.97), b1 s128 level (15.13 / 15.11 ms); b1 s8 (8 rows, on one thread)
  4.57-4.63 -> 2.18-2.19 ms (load 5.5). With
  AVX-512, rows of A read in place along K under a B packed in the call have each tile
  fetch the next tile's rows into L2 (``rlx_sgemm_next_a``; ``RLX_SG_APF=0``: none, for
  A/B): the MLP 784-128-10/128 step's forward GEMM reads a new batch of X from L3 at every
  step, and the L2 streamer starts each row's stream afresh at every row tile. TSC marks in
  the step's C (2 threads, both builds in one process in turns of 20 calls, SCHED_FIFO, load
  3-7, host at 0.75-0.87 of its stored FMA peak): each thread's k0 70.0 -> 68.5, 70.4 ->
  68.8, 82.2 -> 80.7, 83.3 -> 82.0, 85.3 -> 83.6 us, all of it in each thread's first column
  chunk (35.8 -> 34.3 us); the plain step (bench_mnist_mlp's, in place), 6 rounds of 4,000
  calls, both orders of building: p50 0.986-0.993 of the time in 5 rounds (1.015 in one),
  p10 0.992-0.995 in all 6. Same bits. The prepacked path (MiniLM) keeps its loop.
- B is read in place only where its rows spread over the L1's sets (``spreads``): an even
  number of cache lines apart (a 512 x 512 weight: 2 KB rows), a panel's rows share a
  few sets, and the 784-512-512-10 step's input gradient ran at 61-70% instead of 80-83%.

``rlx_sgemm(m, n, k, A, rm, rk, B, brk, brn, C, ldc, n0, n1)`` computes columns ``[n0, n1)``
of ``C = op(A) op(B)``, where element (i, p) of op(A) is ``A[i*rm + p*rk]`` and element (p, j)
of op(B) is ``B[p*brk + j*brn]``; ``n0`` is a multiple of the panel width (RLX_SG_NR: 32
with AVX-512, 16 with AVX2). The team splits GEMMs by rows and passes ``[0, n)``, except
that a small GEMM packing B in the call is split by whole panels, so each thread packs only
its own (blas._splits_columns), and one on prepacked B by claimed column chunks. Each thread
packs into its own buffer (``_Thread_local``, grown on demand).

``rlx_sgemm_epi`` and ``rlx_sgemm_packed_epi`` take two more arguments, a tile epilogue
``epi(ctx, i0, i1, j0, j1)`` and its context: the kernel calls it on every tile once the tile's
last KC slice is stored, while the tile is in L1 (tile_epilogue.py writes these functions).
``rlx_sgemm_upd`` and ``rlx_sgemm_packed_upd`` take ``D`` (laid out as C) and ``alpha``
instead, and store ``fma(alpha, tile, D)`` at the last slice: an SGD update after its weight
gradient (update_store.py). ``rlx_sgemm_bias`` and ``rlx_sgemm_packed_bias`` take ``bias``,
``mask`` and ``relu``: the tile's registers get the bias (and the max with 0, and the >= 0
mask written beside C) before its one store at the last slice (bias_store.py); they have
their own copy of the kernel (``rlx_sgemm_core_body`` inlined there), since in the MLP step's
translation unit the copy shared with the tile-epilogue GEMMs made the forward GEMM 3.3-3.6%
slower (RLX_CPU_PROFILE=thread, both builds in one process, FIFO) where its own copy is
3-4.5% faster than the tile epilogue.

The source compiles everywhere; without either ISA the tile is plain C (correct, not fast),
but the renderer only routes GEMMs here when the compiler targets AVX-512 or AVX2 with FMA
(``available``), so other machines keep OpenBLAS. ``RLX_NO_OWN_SGEMM=1`` turns it off.
"""

from __future__ import annotations

from rlx_core.ir import dtypes as dt
from rlx_core.ir.dtypes import DType

from . import scratch
from .env import env_count, env_flag
from .toolchain import Compiler

NR = 32  # columns per packed panel with AVX-512 (two zmm); AVX2's are 16 (two ymm), so sizes
# computed with 32 bound both (packed_bytes); C code uses RLX_SG_NR
MIN_N = 32  # narrower GEMMs (a 10-class head) stay on OpenBLAS, whose edge kernels fit them

IMPL = "rlx-sgemm"


def takes(dtype: DType, n: int) -> bool:
    """Does a GEMM of ``dtype`` with ``n`` columns run here (when the kernel is available)?"""
    return dtype == dt.f32 and n >= MIN_N


DIRECT_ROWS = 256  # RLX_SG_DIRECT_ROWS


def spreads(row_stride: int) -> bool:
    """Do rows of B ``row_stride`` floats apart spread over the L1's sets? Not when the stride
    is an even number of 64-byte lines: a panel's rows then share half the sets or fewer (the
    C side, rlx_sgemm_spread, says what that cost)."""
    return row_stride % 16 != 0 or (row_stride // 16) % 2 == 1


def direct_depth() -> int | None:
    """The deepest K read in place on this ISA path (RLX_SG_DIRECT_DEPTH), None: any. With
    AVX-512, one KC slice (rlx_sgemm_kc's 9/8 KC): a deeper B's panel slices are KC rows a
    row of B apart, most of a 48 KB L1, and the rows of one streamed from L2 at that stride;
    packed, they are contiguous. 128 x 784 x 1024 (the MLP's weight gradient at batch 1024),
    one thread, C harness, Emerald Rapids: packed 188 GFLOP/s, in place 178; at K = 128 in
    place stays ahead (213 against 197-208)."""
    from rlx_core.targets.cpu.isa import blocking

    b = blocking()
    return b.kc + b.kc // 8 if b.nr == 32 else None


def reads_b_in_place(sb, m: int, k: int) -> bool:
    """Does a call of ``m`` rows and depth ``k`` read op(B) (strides ``sb``, a matmul.Strides)
    in place instead of packing it? The Python side of rlx_sgemm_core's ``direct`` (the
    splits depend on it)."""
    depth = direct_depth()
    return (sb.col == 1 and m <= DIRECT_ROWS and spreads(sb.row)
            and (depth is None or k <= depth))


def packed_bytes(n: int, k: int) -> int:
    """Bytes of op(B) (k x n) in rlx_sgemm_pack_b's panel layout (with 32-column panels: at
    least the size with AVX2's 16-column ones; panel j / NR starts at float j * k either way)."""
    return -(-n // NR) * NR * k * 4

SOURCE = scratch.SOURCE + r"""
#ifndef RLX_SGEMM_H
#define RLX_SGEMM_H
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#if defined(__AVX512F__) || defined(__AVX__)
#include <immintrin.h>
#endif
/* the register tile: MR rows x NR = 2 vectors of columns. AVX-512 (32 zmm): 8 x 32, sixteen
   accumulators; AVX2 + FMA (16 ymm): 6 x 16, twelve accumulators, two B loads and a
   broadcast, the largest tile that leaves registers for them (BLIS's Haswell shape) */
#if defined(__AVX512F__)
#define RLX_SG_VEC 1
#define RLX_SG_MR 8
#define RLX_SG_VW 16
typedef __m512 rlx_sg_v;
#define RLX_SG_LOAD _mm512_loadu_ps
#define RLX_SG_STORE _mm512_storeu_ps
#define RLX_SG_SET1 _mm512_set1_ps
#define RLX_SG_ZERO _mm512_setzero_ps
#define RLX_SG_FMA _mm512_fmadd_ps
#define RLX_SG_ADD _mm512_add_ps
#elif defined(__AVX2__) && defined(__FMA__)
#define RLX_SG_VEC 1
#define RLX_SG_MR 6
#define RLX_SG_VW 8
typedef __m256 rlx_sg_v;
#define RLX_SG_LOAD _mm256_loadu_ps
#define RLX_SG_STORE _mm256_storeu_ps
#define RLX_SG_SET1 _mm256_set1_ps
#define RLX_SG_ZERO _mm256_setzero_ps
#define RLX_SG_FMA _mm256_fmadd_ps
#define RLX_SG_ADD _mm256_add_ps
#else
#define RLX_SG_VEC 0
#define RLX_SG_MR 8
#define RLX_SG_VW 16
#endif
#define RLX_SG_NR (2 * RLX_SG_VW)
#ifndef RLX_SG_KC  /* the renderer sets the blocking from the caches (isa.gemm_blocking) */
#define RLX_SG_KC 384
#endif
#ifndef RLX_SG_MC
#define RLX_SG_MC (64 / RLX_SG_MR * RLX_SG_MR)
#endif
#ifndef RLX_SG_NC
#define RLX_SG_NC 256
#endif
#define RLX_SG_DIRECT_ROWS 256  /* sgemm.DIRECT_ROWS; see rlx_sgemm_core's direct */
#ifndef RLX_SG_WT_SET_ROWS  /* see rlx_sgemm_wt_crowded; sgemm.defines (RLX_SG_NR: never) */
#define RLX_SG_WT_SET_ROWS RLX_SG_NR
#endif
#ifndef RLX_SG_PPF  /* fetch a prepacked B's next panel ahead (rlx_sgemm_core_pf); sgemm.defines */
#define RLX_SG_PPF 1
#endif
/* a prepacked B's next panel is fetched ahead by the first block of rows where it has
   RLX_SG_PPF_TILES row tiles or more (rlx_sgemm_core_body); a tile fetching npf lines of it
   fetches RLX_SG_PF_LINES(npf, kc) every four k steps (RLX_SG_FETCH_B, rlx_sgemm_acc). AVX-512:
   blocks of NR / 4 tiles or more, a line every four steps (as tuned on Emerald Rapids); AVX2:
   every block, each tile's share spread over its k loop (see the module's docstring) */
#if defined(__AVX512F__)
#define RLX_SG_PPF_TILES (RLX_SG_NR / 4)
#define RLX_SG_PF_LINES(npf, kc) 1
#define RLX_SG_FETCH_B(pfl)                                                                 \
    if (npf > 0) {                                                                          \
        __builtin_prefetch(pf, 0, 2);                                                       \
        pf += 16;                                                                           \
        --npf;                                                                              \
    }
#else
#define RLX_SG_PPF_TILES 1
#define RLX_SG_PF_LINES(npf, kc) (1 + 4 * ((npf) - 1) / (kc))
#define RLX_SG_FETCH_B(pfl)                                                                 \
    for (int64_t l = 0; l < (pfl) && npf > 0; ++l) {                                        \
        __builtin_prefetch(pf, 0, 2);                                                       \
        pf += 16;                                                                           \
        --npf;                                                                              \
    }
#endif
#ifndef RLX_SG_APF  /* fetch the next tile's rows of A (rlx_sgemm_next_a); sgemm.defines */
#define RLX_SG_APF 1
#endif
#ifndef RLX_SG_ASM8  /* the full AVX-512 tile's k steps in asm (RLX_SG_ASM8_STEP); sgemm.defines */
#define RLX_SG_ASM8 0
#endif
#if RLX_SG_VW == 16  /* sgemm.direct_depth: with AVX-512, B is read in place one slice deep */
#define RLX_SG_DIRECT_DEPTH (RLX_SG_KC + RLX_SG_KC / 8)
#else
#define RLX_SG_DIRECT_DEPTH INT64_MAX
#endif

#if defined(__AVX512F__)
/* four k steps of 16 columns of op(B) = W^T (W's rows rn floats apart, s at row j, step k):
   o[q] = W[j:j+16, k+q]. A zmm takes 4 k steps of 16 columns from four 128-bit loads (W's
   rows j, j+4, j+8, j+12), so two in-lane shuffle stages finish the transpose and each
   result is 64 bytes, half a panel row (AVX2's 8 x 8 transposes store 32) */
static inline __attribute__((always_inline)) void rlx_sgemm_wt4(const float *s, int64_t rn,
                                                                 __m512 o[4]) {
    __m512 r[4];
    for (int q = 0; q < 4; ++q)
        r[q] = _mm512_insertf32x4(
            _mm512_insertf32x4(
                _mm512_insertf32x4(_mm512_castps128_ps512(_mm_loadu_ps(s + q * rn)),
                                   _mm_loadu_ps(s + (q + 4) * rn), 1),
                _mm_loadu_ps(s + (q + 8) * rn), 2),
            _mm_loadu_ps(s + (q + 12) * rn), 3);
    const __m512 t0 = _mm512_unpacklo_ps(r[0], r[1]), t1 = _mm512_unpackhi_ps(r[0], r[1]),
                 t2 = _mm512_unpacklo_ps(r[2], r[3]), t3 = _mm512_unpackhi_ps(r[2], r[3]);
    o[0] = _mm512_shuffle_ps(t0, t2, 0x44);
    o[1] = _mm512_shuffle_ps(t0, t2, 0xEE);
    o[2] = _mm512_shuffle_ps(t1, t3, 0x44);
    o[3] = _mm512_shuffle_ps(t1, t3, 0xEE);
}
#endif

/* op(B) columns [j0, j0 + nr) into one panel: K rows of 32 floats, zero padded on the right */
static void rlx_sgemm_pack_panel(int64_t K, int64_t nr, const float *B, int64_t rk, int64_t rn,
                                 float *dst) {
    const int64_t NR = RLX_SG_NR;
    int64_t k0 = 0;
    if (rn == 1 && nr == NR) {  /* rows of B are contiguous: copy them */
        for (int64_t k = 0; k < K; ++k) memcpy(dst + k * NR, B + k * rk, NR * sizeof(float));
        return;
    }
#if defined(__AVX512F__)
    /* B = W^T with AVX-512: rlx_sgemm_wt4 below. Two panels of the MLP's W1^T (784 x 64 of
       a 128 x 784 W1), C harness, Emerald Rapids, one thread, FIFO: 6.25 -> 4.66 us; 16 x 16
       transposes of whole-line loads took 5.8 */
    if (rk == 1 && nr == NR) {
        for (; k0 + 4 <= K; k0 += 4)
            for (int64_t jb = 0; jb < NR; jb += 16) {
                __m512 o[4];
                rlx_sgemm_wt4(B + jb * rn + k0, rn, o);
                for (int q = 0; q < 4; ++q) _mm512_storeu_ps(dst + (k0 + q) * NR + jb, o[q]);
            }
    }
#endif
#if defined(__AVX__)
    if (rk == 1 && nr == NR) {  /* B = W^T: 8 x 8 register transposes of W's rows */
        for (; k0 + 8 <= K; k0 += 8) {
            for (int64_t jb = 0; jb < NR; jb += 8) {
                const float *s = B + jb * rn + k0;
                __m256 r0 = _mm256_loadu_ps(s), r1 = _mm256_loadu_ps(s + rn),
                       r2 = _mm256_loadu_ps(s + 2 * rn), r3 = _mm256_loadu_ps(s + 3 * rn),
                       r4 = _mm256_loadu_ps(s + 4 * rn), r5 = _mm256_loadu_ps(s + 5 * rn),
                       r6 = _mm256_loadu_ps(s + 6 * rn), r7 = _mm256_loadu_ps(s + 7 * rn);
                __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1),
                       t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3),
                       t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5),
                       t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
                __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE),
                       u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE),
                       u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE),
                       u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
                float *d = dst + k0 * NR + jb;
                _mm256_storeu_ps(d + 0 * NR, _mm256_permute2f128_ps(u0, u4, 0x20));
                _mm256_storeu_ps(d + 1 * NR, _mm256_permute2f128_ps(u1, u5, 0x20));
                _mm256_storeu_ps(d + 2 * NR, _mm256_permute2f128_ps(u2, u6, 0x20));
                _mm256_storeu_ps(d + 3 * NR, _mm256_permute2f128_ps(u3, u7, 0x20));
                _mm256_storeu_ps(d + 4 * NR, _mm256_permute2f128_ps(u0, u4, 0x31));
                _mm256_storeu_ps(d + 5 * NR, _mm256_permute2f128_ps(u1, u5, 0x31));
                _mm256_storeu_ps(d + 6 * NR, _mm256_permute2f128_ps(u2, u6, 0x31));
                _mm256_storeu_ps(d + 7 * NR, _mm256_permute2f128_ps(u3, u7, 0x31));
            }
        }
    }
#endif
    for (int64_t k = k0; k < K; ++k) {
        for (int64_t j = 0; j < nr; ++j) dst[k * NR + j] = B[k * rk + j * rn];
        for (int64_t j = nr; j < NR; ++j) dst[k * NR + j] = 0.0f;
    }
}

/* op(A) rows [0, mr) x columns [0, kc) into a tile of kc steps of 8 floats (zero padded) */
static void rlx_sgemm_pack_rows(int64_t kc, int64_t mr, const float *A, int64_t rm, int64_t rk,
                                float *dst) {
    enum { MR = RLX_SG_MR };
    if (rm == 1 && mr == MR) {  /* a transposed A: eight contiguous floats per step */
        for (int64_t p = 0; p < kc; ++p) memcpy(dst + p * MR, A + p * rk, MR * sizeof(float));
        return;
    }
    for (int64_t p = 0; p < kc; ++p) {
        for (int64_t i = 0; i < mr; ++i) dst[p * MR + i] = A[i * rm + p * rk];
        for (int64_t i = mr; i < MR; ++i) dst[p * MR + i] = 0.0f;
    }
}

/* op(A) rows [0, rows) x columns [0, kc) of a transposed A (op(A)[i, p] = A[i + p*rk]) into
   tiles of MR rows, each as rlx_sgemm_pack_rows lays it out (tile t at dst + t*MR*kc), in
   blocks of PS steps: the PS rows of A a block reads (op(A)'s columns, whole cache lines)
   stay in L1 while every tile takes its MR floats of them, and each tile's PS steps are
   written contiguously. Tile by tile over all kc steps, each step read MR floats of a line
   and the next tile the rest a pass later, with A's rows 2 KB apart on two L1 sets: the
   512 x 784 x 1024 weight gradient g^T x of the 784-512-512-10 step ran at 180-189 GFLOP/s
   on one thread (C harness, warm, Emerald Rapids) against 212 with A not transposed; now
   201 (512 x 512 x 1024: 198 -> 202), and in the step at batch 1024 on 2 threads that GEMM
   took 2762 instead of 2839 us. (One step at a time for all tiles wrote MR floats to tiles
   kc * MR floats apart: at kc = 128 all in one set, and 128 x 784 x 128 lost 15%) */
static void rlx_sgemm_pack_cols(int64_t kc, int64_t rows, const float *A, int64_t rk,
                                float *dst) {
    enum { MR = RLX_SG_MR, PS = 16 };
    const int64_t full = rows / MR * MR;
    for (int64_t p0 = 0; p0 < kc; p0 += PS) {
        const int64_t p1 = kc - p0 < PS ? kc : p0 + PS;
        for (int64_t i = 0; i < full; i += MR)
            for (int64_t p = p0; p < p1; ++p)
                memcpy(dst + i * kc + p * MR, A + p * rk + i, MR * sizeof(float));
    }
    if (full < rows)
        rlx_sgemm_pack_rows(kc, rows - full, A + full, 1, rk, dst + full * kc);
}

#if RLX_SG_VEC
/* the accumulation of R rows (a constant at every call, so the 2 R accumulators unroll into
   registers): c0/c1[i] += op(A)[i, 0:kc] . b[0:kc, 0:NR] */
static inline __attribute__((always_inline)) void rlx_sgemm_step(
        const int R, int64_t p, const float *restrict a, int64_t ra, int64_t rp,
        const float *restrict b, int64_t ldb, rlx_sg_v *c0, rlx_sg_v *c1) {
    enum { VW = RLX_SG_VW };
    const rlx_sg_v b0 = RLX_SG_LOAD(b + p * ldb), b1 = RLX_SG_LOAD(b + p * ldb + VW);
    for (int i = 0; i < R; ++i) {
        const rlx_sg_v ai = RLX_SG_SET1(a[i * ra + p * rp]);
        c0[i] = RLX_SG_FMA(ai, b0, c0[i]);
        c1[i] = RLX_SG_FMA(ai, b1, c1[i]);
    }
}

/* at k step p (a multiple of 4) of a tile, two cache lines of the next tile's rows of A
   (8 rows pas floats apart from pa, each read along k) into L2: row p / 4 % 8, lines
   2 (p / 32) and the one after. Over a slice of kc steps every row gets kc / 16 + 2 lines,
   its kc floats at any alignment (rlx_sgemm_next_a says why) */
static inline __attribute__((always_inline)) void rlx_sgemm_fetch_a(int64_t p, const float *pa,
                                                                    int64_t pas) {
    const float *q = pa + (p / 4 % 8) * pas + p / 32 * 32;
    __builtin_prefetch(q, 0, 2);
    __builtin_prefetch(q + 16, 0, 2);
}

#if !defined(__AVX512F__) && defined(__AVX2__) && defined(__FMA__) && defined(__x86_64__)
#define RLX_SG_ASM6 1
/* one k step of the full AVX2 tile (6 x 16) in asm: b's two vectors, then each row's
   broadcast and its two FMAs (rows a0, a0 + ra, a0 + 2 ra, a3, a3 + ra, a3 + 2 ra; ra in
   bytes). The same FMAs in the same order as rlx_sgemm_step's (same bits), with every
   accumulator in a register of its own: GCC 12 compiled the C form's four-step loop with
   register copies and each B vector loaded again as a memory operand of up to six FMAs (16
   ymm registers: 12 accumulators, 2 B vectors, a broadcast), and the MLP step's weight
   gradient (64 x 784 x 128, one thread, C harness, Zen 4 built with RLX_CPU_ISA=avx2's
   flags) ran at 84 GFLOP/s of the 118 peak. One statement per step (four, with the
   pointers' updates, would need more than GCC's 30 operands); the accumulators are the
   caller's locals x0..x5, y0..y5, not c0/c1: with the array elements as operands GCC
   stored all twelve to the stack after every step in one of the kernel's copies.
   RLX_SG_ASM_HEAD is its first twelve lines, shared with RLX_SG_ASM4_STEP: b's two vectors,
   rows 0-2's FMAs, row 3's broadcast (in ymm13) */
#define RLX_SG_ASM_HEAD                                                                     \
    "vmovups (%[b]), %%ymm14\n\t"                                                           \
    "vmovups 32(%[b]), %%ymm15\n\t"                                                         \
    "vbroadcastss (%[a0]), %%ymm12\n\t"                                                     \
    "vbroadcastss (%[a0],%[ra]), %%ymm13\n\t"                                               \
    "vfmadd231ps %%ymm14, %%ymm12, %[x0]\n\t"                                               \
    "vfmadd231ps %%ymm15, %%ymm12, %[y0]\n\t"                                               \
    "vbroadcastss (%[a0],%[ra],2), %%ymm12\n\t"                                             \
    "vfmadd231ps %%ymm14, %%ymm13, %[x1]\n\t"                                               \
    "vfmadd231ps %%ymm15, %%ymm13, %[y1]\n\t"                                               \
    "vbroadcastss (%[a3]), %%ymm13\n\t"                                                     \
    "vfmadd231ps %%ymm14, %%ymm12, %[x2]\n\t"                                               \
    "vfmadd231ps %%ymm15, %%ymm12, %[y2]\n\t"
#define RLX_SG_ASM_IN(A0, A3, B, RA4) [a0] "r"(A0), [a3] "r"(A3), [b] "r"(B), [ra] "r"(RA4)
#define RLX_SG_ASM_CLOBBERS "xmm12", "xmm13", "xmm14", "xmm15", "memory"
#define RLX_SG_ASM6_STEP(A0, A3, B, RA4)                                                    \
    __asm__ volatile(RLX_SG_ASM_HEAD                                                        \
                     "vbroadcastss (%[a3],%[ra]), %%ymm12\n\t"                              \
                     "vfmadd231ps %%ymm14, %%ymm13, %[x3]\n\t"                              \
                     "vfmadd231ps %%ymm15, %%ymm13, %[y3]\n\t"                              \
                     "vbroadcastss (%[a3],%[ra],2), %%ymm13\n\t"                            \
                     "vfmadd231ps %%ymm14, %%ymm12, %[x4]\n\t"                              \
                     "vfmadd231ps %%ymm15, %%ymm12, %[y4]\n\t"                              \
                     "vfmadd231ps %%ymm14, %%ymm13, %[x5]\n\t"                              \
                     "vfmadd231ps %%ymm15, %%ymm13, %[y5]\n\t"                              \
                     : [x0] "+x"(x0), [x1] "+x"(x1), [x2] "+x"(x2), [x3] "+x"(x3),          \
                       [x4] "+x"(x4), [x5] "+x"(x5), [y0] "+x"(y0), [y1] "+x"(y1),          \
                       [y2] "+x"(y2), [y3] "+x"(y3), [y4] "+x"(y4), [y5] "+x"(y5)           \
                     : RLX_SG_ASM_IN(A0, A3, B, RA4)                                        \
                     : RLX_SG_ASM_CLOBBERS)
/* the same for an edge tile of four rows (a0 .. a0 + 3 ra): eight accumulators. The MLP
   step's weight gradient gives each thread 64 rows, ten tiles and this one; in C it took
   longer than a full tile (C harness as above: 4 x 784 x 128 14.8 -> 10.9 us, 64 rows 125
   -> 119 us; in the 784-128-10/128 step, RLX_CPU_PROFILE, main / this alternating in
   separate processes, FIFO, load 4.3-5.7: k14 151-153 -> 143-144 us) */
#define RLX_SG_ASM4_STEP(A0, A3, B, RA4)                                                    \
    __asm__ volatile(RLX_SG_ASM_HEAD                                                        \
                     "vfmadd231ps %%ymm14, %%ymm13, %[x3]\n\t"                              \
                     "vfmadd231ps %%ymm15, %%ymm13, %[y3]\n\t"                              \
                     : [x0] "+x"(x0), [x1] "+x"(x1), [x2] "+x"(x2), [x3] "+x"(x3),          \
                       [y0] "+x"(y0), [y1] "+x"(y1), [y2] "+x"(y2), [y3] "+x"(y3)           \
                     : RLX_SG_ASM_IN(A0, A3, B, RA4)                                        \
                     : RLX_SG_ASM_CLOBBERS)
/* rlx_sgemm_acc's k loop around STEP, an asm k step on the caller's x0.., y0..: four steps
   an iteration, RLX_SG_FETCH_B an iteration (as the C loop below);
   leaves p at the first step not done, for rlx_sgemm_step */
#define RLX_SG_ASM_LOOP(STEP)                                                               \
    const float *a0 = a, *bq = b;                                                           \
    const int64_t pfl = RLX_SG_PF_LINES(npf, kc);                                           \
    int64_t p = 0;                                                                          \
    for (; p + 4 <= kc; p += 4) {                                                           \
        RLX_SG_FETCH_B(pfl)                                                                 \
        for (int q = 0; q < 4; ++q) {                                                       \
            STEP(a0, a0 + 3 * ra, bq, ra * 4);                                              \
            a0 += rp;                                                                       \
            bq += ldb;                                                                      \
        }                                                                                   \
    }
#else
#define RLX_SG_ASM6 0
#endif

#if RLX_SG_ASM8 && defined(__AVX512F__) && defined(__x86_64__)
/* one k step of the full AVX-512 tile (8 x 32) in asm, for cores with two 512-bit FMA ports
   (sgemm.asm8 says why it is opt-in): each row's broadcast and its two FMAs, the same FMAs
   in the same order as rlx_sgemm_step's (same bits). GCC 12 compiles the C form's four-step
   loop with 3-5 register copies (vmovaps) per 64 FMAs, alternating
   vfmadd132ps and vfmadd231ps; llvm-mca 15 (Skylake-server model, the one -mcpu=
   sapphirerapids gets) puts them on the FMA ports: 33.5-34.5 cycles per four steps against
   32 (benchmarks/README.md, "portsim"). The operands are memory references ("m"), so the
   compiler still folds the row and step offsets into the addressing; the accumulators are
   the caller's x0..x7, y0..y7, b's vectors loaded in C; zmm30-31 hold the broadcasts */
/* four rows (R0 .. R0 + 3, row r's element at A[r * RA]) of a k step: each row's broadcast and
   its FMAs with b's two vectors b0, b1 (zmm operands); a step is two of these (GCC allows 30
   operands, each accumulator counts twice) */
#define RLX_SG_ASM8_ROW(N, BR)                                                              \
    "vbroadcastss %[a" #N "], %%" BR "\n\t"                                                 \
    "vfmadd231ps %[b0], %%" BR ", %[x" #N "]\n\t"                                           \
    "vfmadd231ps %[b1], %%" BR ", %[y" #N "]\n\t"
#define RLX_SG_ASM8_HALF(A, RA, R0, X0, X1, X2, X3, Y0, Y1, Y2, Y3)                        \
    __asm__("# rlx_sg_asm8\n\t" /* (a mark for tests in the compiler's assembly) */          \
            RLX_SG_ASM8_ROW(0, "zmm30") RLX_SG_ASM8_ROW(1, "zmm31")                         \
            RLX_SG_ASM8_ROW(2, "zmm30") RLX_SG_ASM8_ROW(3, "zmm31")                         \
            : [x0] "+v"(X0), [x1] "+v"(X1), [x2] "+v"(X2), [x3] "+v"(X3), [y0] "+v"(Y0),    \
              [y1] "+v"(Y1), [y2] "+v"(Y2), [y3] "+v"(Y3)                                   \
            : [b0] "v"(b0), [b1] "v"(b1), [a0] "m"((A)[(R0) * (RA)]),                       \
              [a1] "m"((A)[((R0) + 1) * (RA)]), [a2] "m"((A)[((R0) + 2) * (RA)]),           \
              [a3] "m"((A)[((R0) + 3) * (RA)])                                              \
            : "xmm30", "xmm31")
#define RLX_SG_ASM8_STEP(A, RA, B)                                                          \
    do {                                                                                    \
        register __m512 b0 __asm__("zmm16") = _mm512_loadu_ps(B);                         \
        register __m512 b1 __asm__("zmm17") = _mm512_loadu_ps((B) + 16);                  \
        RLX_SG_ASM8_HALF(A, RA, 0, x0, x1, x2, x3, y0, y1, y2, y3);                         \
        RLX_SG_ASM8_HALF(A, RA, 4, x4, x5, x6, x7, y4, y5, y6, y7);                         \
    } while (0)
#define RLX_SG_ASM8_ON 1
#else
#define RLX_SG_ASM8_ON 0
#endif

static inline __attribute__((always_inline)) void rlx_sgemm_acc(
        const int R, int64_t kc, const float *restrict a, int64_t ra, int64_t rp,
        const float *restrict b, int64_t ldb, rlx_sg_v *c0, rlx_sg_v *c1, const float *pf,
        int64_t npf, const float *pa, int64_t pas) {
#if RLX_SG_ASM6
    if (R == 6) {  /* the full AVX2 tile: RLX_SG_ASM6_STEP (no pa: AVX-512 only) */
        rlx_sg_v x0 = c0[0], x1 = c0[1], x2 = c0[2], x3 = c0[3], x4 = c0[4], x5 = c0[5];
        rlx_sg_v y0 = c1[0], y1 = c1[1], y2 = c1[2], y3 = c1[3], y4 = c1[4], y5 = c1[5];
        RLX_SG_ASM_LOOP(RLX_SG_ASM6_STEP)
        c0[0] = x0; c0[1] = x1; c0[2] = x2; c0[3] = x3; c0[4] = x4; c0[5] = x5;
        c1[0] = y0; c1[1] = y1; c1[2] = y2; c1[3] = y3; c1[4] = y4; c1[5] = y5;
        for (; p < kc; ++p) rlx_sgemm_step(R, p, a, ra, rp, b, ldb, c0, c1);
        return;
    }
    if (R == 4) {  /* an AVX2 edge tile of four rows: RLX_SG_ASM4_STEP */
        rlx_sg_v x0 = c0[0], x1 = c0[1], x2 = c0[2], x3 = c0[3];
        rlx_sg_v y0 = c1[0], y1 = c1[1], y2 = c1[2], y3 = c1[3];
        RLX_SG_ASM_LOOP(RLX_SG_ASM4_STEP)
        c0[0] = x0; c0[1] = x1; c0[2] = x2; c0[3] = x3;
        c1[0] = y0; c1[1] = y1; c1[2] = y2; c1[3] = y3;
        for (; p < kc; ++p) rlx_sgemm_step(R, p, a, ra, rp, b, ldb, c0, c1);
        return;
    }
#endif
#if RLX_SG_ASM8_ON
    if (R == RLX_SG_MR) {  /* the full AVX-512 tile: RLX_SG_ASM8_STEP, the loop as below */
        /* pinned: with free registers GCC moved the accumulators between the steps' asm
           statements (11 copies per four steps in the -march=native build on a Zen 4) */
        register __m512 x0 __asm__("zmm0") = c0[0], x1 __asm__("zmm1") = c0[1],
                        x2 __asm__("zmm2") = c0[2], x3 __asm__("zmm3") = c0[3],
                        x4 __asm__("zmm4") = c0[4], x5 __asm__("zmm5") = c0[5],
                        x6 __asm__("zmm6") = c0[6], x7 __asm__("zmm7") = c0[7];
        register __m512 y0 __asm__("zmm8") = c1[0], y1 __asm__("zmm9") = c1[1],
                        y2 __asm__("zmm10") = c1[2], y3 __asm__("zmm11") = c1[3],
                        y4 __asm__("zmm12") = c1[4], y5 __asm__("zmm13") = c1[5],
                        y6 __asm__("zmm14") = c1[6], y7 __asm__("zmm15") = c1[7];
        const int64_t pfl = RLX_SG_PF_LINES(npf, kc);
        (void)pfl;
        int64_t p = 0;
        for (; p + 4 <= kc; p += 4) {
            RLX_SG_FETCH_B(pfl)
            if (pa) rlx_sgemm_fetch_a(p, pa, pas);
            for (int64_t q = p; q < p + 4; ++q) RLX_SG_ASM8_STEP(a + q * rp, ra, b + q * ldb);
        }
        c0[0] = x0; c0[1] = x1; c0[2] = x2; c0[3] = x3; c0[4] = x4; c0[5] = x5; c0[6] = x6;
        c0[7] = x7;
        c1[0] = y0; c1[1] = y1; c1[2] = y2; c1[3] = y3; c1[4] = y4; c1[5] = y5; c1[6] = y6;
        c1[7] = y7;
        for (; p < kc; ++p) rlx_sgemm_step(R, p, a, ra, rp, b, ldb, c0, c1);
        return;
    }
#endif
    /* four k steps per iteration: one loop count, compare and branch for 64 FMAs instead of
       16, so the loads run further ahead. Emerald Rapids, one thread, MiniLM's b8 GEMMs in
       the team's 128 x 256 chunks (C harness, both builds in one process, turns alternating,
       SCHED_FIFO): +2.9-4.5% (AVX2 tile: +3.6-5%), 128-row chunks +0.7-2.7%; 8 steps were no
       faster than 4. Same k order, same bits. Each iteration also fetches RLX_SG_PF_LINES
       cache lines of pf into L2 while npf lasts (rlx_sgemm_core: the next panel of a
       prepacked B), and, with pa, two lines of the next tile's rows of A (rlx_sgemm_next_a) */
    const int64_t pfl = RLX_SG_PF_LINES(npf, kc);
    (void)pfl;
    int64_t p = 0;
    for (; p + 4 <= kc; p += 4) {
        RLX_SG_FETCH_B(pfl)
        if (pa) rlx_sgemm_fetch_a(p, pa, pas);
        rlx_sgemm_step(R, p, a, ra, rp, b, ldb, c0, c1);
        rlx_sgemm_step(R, p + 1, a, ra, rp, b, ldb, c0, c1);
        rlx_sgemm_step(R, p + 2, a, ra, rp, b, ldb, c0, c1);
        rlx_sgemm_step(R, p + 3, a, ra, rp, b, ldb, c0, c1);
    }
    for (; p < kc; ++p) rlx_sgemm_step(R, p, a, ra, rp, b, ldb, c0, c1);
}

/* rlx_sgemm_acc for a panel of at most one vector of columns (the partial last panel, e.g.
   784 = 24 x 32 + 16): half the FMAs, same k order per element, so the same bits. The MLP
   step's weight gradient (64 x 784 x 128 per thread) 84.2 -> 82.9 and 84.5 -> 83.5 us (the
   step's C in a harness, Emerald Rapids, 2 threads, both forms in one process, FIFO) */
static inline __attribute__((always_inline)) void rlx_sgemm_acc_half(
        const int R, int64_t kc, const float *restrict a, int64_t ra, int64_t rp,
        const float *restrict b, int64_t ldb, rlx_sg_v *c0) {
    int64_t p = 0;
    for (; p + 4 <= kc; p += 4)
        for (int64_t q = p; q < p + 4; ++q) {
            const rlx_sg_v b0 = RLX_SG_LOAD(b + q * ldb);
            for (int i = 0; i < R; ++i)
                c0[i] = RLX_SG_FMA(RLX_SG_SET1(a[i * ra + q * rp]), b0, c0[i]);
        }
    for (; p < kc; ++p) {
        const rlx_sg_v b0 = RLX_SG_LOAD(b + p * ldb);
        for (int i = 0; i < R; ++i) c0[i] = RLX_SG_FMA(RLX_SG_SET1(a[i * ra + p * rp]), b0, c0[i]);
    }
}

#if defined(__AVX512F__)
/* rlx_sgemm_acc for a full tile whose panel of op(B) = W^T is packed as it goes (W's rows wn
   floats apart from w): each four k steps are transposed from W (rlx_sgemm_wt4), stored into
   the panel b for the tiles after it, and multiplied from the registers. The pack's loads
   from W (32 rows, from L2) and its stores then overlap the tile's FMAs instead of running
   as a pass of their own before the panel's tiles. Same k order, same bits. The MLP step's
   forward GEMM (128 x 128 x 784, W1^T packed per call: one thread's two 32-column chunks,
   the step's C in a harness, Emerald Rapids, both forms in one process in turns of 20
   calls, FIFO, slowed host): 0.987 of the time in six rounds of six (the pack alone took
   ~7% of it: 12K of ~180K TSC ticks; its shuffles share the FMA ports, so ~3.5% remains) */
static inline __attribute__((always_inline)) void rlx_sgemm_acc_wt(
        int64_t kc, const float *restrict a, int64_t ra, int64_t rp, const float *w,
        int64_t wn, float *b, rlx_sg_v *c0, rlx_sg_v *c1, const float *pa, int64_t pas) {
    enum { MR = RLX_SG_MR, NR = RLX_SG_NR };
    int64_t p = 0;
    for (; p + 4 <= kc; p += 4) {
        __m512 lo[4], hi[4];
        if (pa) rlx_sgemm_fetch_a(p, pa, pas);
        /* W's 32 rows two lines ahead, eight rows per step (a row's line lasts four): the
           FMAs wait on these loads, and a W in L3 (784-512-512-10 at batch 1024) kept too
           few of them in flight */
        for (int r = (int)(p / 4 % 4) * 8; r < (int)(p / 4 % 4) * 8 + 8; ++r)
            __builtin_prefetch(w + r * wn + p + 32, 0, 3);
        rlx_sgemm_wt4(w + p, wn, lo);
        rlx_sgemm_wt4(w + 16 * wn + p, wn, hi);
        for (int q = 0; q < 4; ++q) {
            _mm512_storeu_ps(b + (p + q) * NR, lo[q]);
            _mm512_storeu_ps(b + (p + q) * NR + 16, hi[q]);
            for (int i = 0; i < MR; ++i) {
                const __m512 ai = _mm512_set1_ps(a[i * ra + (p + q) * rp]);
                c0[i] = _mm512_fmadd_ps(ai, lo[q], c0[i]);
                c1[i] = _mm512_fmadd_ps(ai, hi[q], c1[i]);
            }
        }
    }
    for (; p < kc; ++p) {  /* the last k % 4 steps: a row of the panel at a time */
        for (int j = 0; j < NR; ++j) b[p * NR + j] = w[j * wn + p];
        rlx_sgemm_step(MR, p, a, ra, rp, b, NR, c0, c1);
    }
}
#endif
#endif

/* a bias store's finish of one element (bias_store.py): t = v + bias; mask = t >= 0 (when
   mask); relu: t where t > 0 or NaN, else +0 (rlx_max_f(t, 0): NaN kept, -0 to +0) */
static inline float rlx_sgemm_fin1(float v, float bias, uint8_t *mask, int relu) {
    const float t = v + bias;
    if (mask) *mask = (uint8_t)(t >= 0.0f);
    return relu && !(t != t || t > 0.0f) ? 0.0f : t;
}

#if RLX_SG_VEC
/* the same for a vector of a tile's row: bias and mask at its first column */
static inline __attribute__((always_inline)) rlx_sg_v rlx_sgemm_fin(rlx_sg_v v, const float *bias,
                                                                    uint8_t *mask, int relu) {
    const rlx_sg_v t = RLX_SG_ADD(v, RLX_SG_LOAD(bias)), z = RLX_SG_ZERO();
#if defined(__AVX512F__)
    if (mask) {
        const __mmask16 ge = _mm512_cmp_ps_mask(t, z, _CMP_GE_OQ);
#if defined(__AVX512BW__) && defined(__AVX512VL__)
        _mm_storeu_si128((__m128i *)mask, _mm_maskz_set1_epi8(ge, 1));
#else
        for (int q = 0; q < 16; ++q) mask[q] = (uint8_t)((ge >> q) & 1);
#endif
    }
    return relu ? _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(t, z, _CMP_NLE_UQ), t) : t;
#else
    if (mask) {
        const int ge = _mm256_movemask_ps(_mm256_cmp_ps(t, z, _CMP_GE_OQ));
        for (int q = 0; q < 8; ++q) mask[q] = (uint8_t)((ge >> q) & 1);
    }
    return relu ? _mm256_and_ps(_mm256_cmp_ps(t, z, _CMP_NLE_UQ), t) : t;
#endif
}
#endif

/* C[0:mr, 0:nr] (+)= op(A)[0:8, 0:kc] . b[0:kc, 0:32]: element (i, p) of op(A) at
   a[i*ra + p*rp], row p of b at b + p*ldb (a packed panel: ldb = NR); acc: add to C. Rows past mr are read only when A is packed
   (zero padded): a direct A is read for its mr rows alone. w (or 0): the panel b is packed
   here from W^T, W's rows wn floats apart (a full tile, AVX-512: rlx_sgemm_acc_wt). d (or
   0): store fma(alpha, tile, d) (update_store.py); bias (or 0, at column 0 of the tile):
   store the tile plus bias, its >= 0 mask at mask (laid out as C, or 0), relu: max(., 0)
   (bias_store.py). */
static inline __attribute__((always_inline)) void rlx_sgemm_tile_pf(
        int64_t kc, const float *restrict a, int64_t ra, int64_t rp, const float *restrict b,
        int64_t ldb, float *restrict c, int64_t ldc, int acc, int64_t mr, int64_t nr,
        int padded, const float *pf, int64_t npf, const float *d, float alpha, const float *w,
        int64_t wn, const float *bias, uint8_t *mask, int relu, const float *pa, int64_t pas) {
    enum { MR = RLX_SG_MR, NR = RLX_SG_NR };
    enum { VW = RLX_SG_VW };
    float t[MR * NR];
    /* the tile's rows of C into L1 while the k loop runs: a C that is not in cache (every
       output of a one-slice GEMM) otherwise stalls the stores at the tile's end on a miss
       per row; with the C harness's caches flushed before each call, 128 x 384 x 1536 on
       prepacked B ran 37 instead of 35 GFLOP/s and the MLP's weight gradient (128 x 128 x
       784, B read in place) 30-31 instead of 27-28 on the Zen 1 VM. Fetched for writing
       (PREFETCHW): the tile always stores C, and a C last written on the other core (the MLP
       step's dH, k11, lands where the serial head's kernels wrote) came in shared and then
       waited on a second transfer to own it at the stores. The MLP 784-128-10/128 step on 2
       threads, Emerald Rapids, both builds in one process in turns (FIFO, slowed host): k11
       (dH = dlogits W2, K = 10) 21.8 -> 18.5 and 15.4 -> 13.9 thousand TSC ticks per thread,
       16.2 -> 13.4 and 14.6 -> 12.5 in a second run; the step 0.4-0.8% faster. Every line
       the row spans: NR floats not 64-byte aligned (a numpy array's rows, 16-48 bytes off)
       span NR / 16 + 1 lines, and the middle one of a 32-float row was missed. The in-place
       MLP step's weight gradient k14 writes its update over W1 (48 bytes off): its second
       thread 65-69 -> 62-65 us, the call 2.3% faster (both forms in one process, FIFO) */
    for (int64_t i = 0; i < mr; ++i) {
        for (int o = 0; o < NR; o += 16) __builtin_prefetch(c + i * ldc + o, 1, 3);
        __builtin_prefetch(c + i * ldc + NR - 1, 1, 3);
    }
#if RLX_SG_VEC
    rlx_sg_v c0[MR], c1[MR];
    for (int i = 0; i < MR; ++i) { c0[i] = RLX_SG_ZERO(); c1[i] = RLX_SG_ZERO(); }
    /* one copy of the loop per row count: with a constant trip count the compiler unrolls
       the rows and keeps every accumulator in a register. An edge tile of a direct A (the
       rows left below a multiple of MR) took 2-3x a full tile's time per row with one copy
       for every row count, its accumulators on the stack */
#if defined(__AVX512F__)
    if (w && pa)
        rlx_sgemm_acc_wt(kc, a, ra, rp, w, wn, (float *)b, c0, c1, pa, pas);
    else if (w)
        rlx_sgemm_acc_wt(kc, a, ra, rp, w, wn, (float *)b, c0, c1, 0, 0);
    else
#else
    (void)w;
    (void)wn;
#endif
    if (nr <= VW && npf == 0 && (padded || mr == MR))
        rlx_sgemm_acc_half(MR, kc, a, ra, rp, b, ldb, c0);
    else
    switch (padded ? MR : mr) {
    case 1: rlx_sgemm_acc(1, kc, a, ra, rp, b, ldb, c0, c1, pf, npf, 0, 0); break;
    case 2: rlx_sgemm_acc(2, kc, a, ra, rp, b, ldb, c0, c1, pf, npf, 0, 0); break;
    case 3: rlx_sgemm_acc(3, kc, a, ra, rp, b, ldb, c0, c1, pf, npf, 0, 0); break;
    case 4: rlx_sgemm_acc(4, kc, a, ra, rp, b, ldb, c0, c1, pf, npf, 0, 0); break;
    case 5: rlx_sgemm_acc(5, kc, a, ra, rp, b, ldb, c0, c1, pf, npf, 0, 0); break;
#if RLX_SG_MR > 6
    case 6: rlx_sgemm_acc(6, kc, a, ra, rp, b, ldb, c0, c1, pf, npf, 0, 0); break;
    case 7: rlx_sgemm_acc(7, kc, a, ra, rp, b, ldb, c0, c1, pf, npf, 0, 0); break;
#endif
    default:  /* pa a constant 0 in the second copy: the loop other GEMMs run is unchanged */
        if (pa) rlx_sgemm_acc(MR, kc, a, ra, rp, b, ldb, c0, c1, pf, npf, pa, pas);
        else rlx_sgemm_acc(MR, kc, a, ra, rp, b, ldb, c0, c1, pf, npf, 0, 0);
        break;
    }
    if (nr == NR) {  /* a full tile, or an edge tile of whole columns: its mr rows to C */
        for (int i = 0; i < MR; ++i) {
            if (i >= mr) break;
            float *ci = c + i * ldc;
            if (acc) {
                c0[i] = RLX_SG_ADD(c0[i], RLX_SG_LOAD(ci));
                c1[i] = RLX_SG_ADD(c1[i], RLX_SG_LOAD(ci + VW));
            }
            if (d) {  /* an update store: d + alpha * C in one rounding (update_store.py) */
                const rlx_sg_v al = RLX_SG_SET1(alpha);
                c0[i] = RLX_SG_FMA(al, c0[i], RLX_SG_LOAD(d + i * ldc));
                c1[i] = RLX_SG_FMA(al, c1[i], RLX_SG_LOAD(d + i * ldc + VW));
            }
            if (bias) {  /* a bias store, on the registers (bias_store.py) */
                c0[i] = rlx_sgemm_fin(c0[i], bias, mask ? mask + i * ldc : 0, relu);
                c1[i] = rlx_sgemm_fin(c1[i], bias + VW, mask ? mask + i * ldc + VW : 0, relu);
            }
            RLX_SG_STORE(ci, c0[i]);
            RLX_SG_STORE(ci + VW, c1[i]);
        }
        return;
    }
    if (nr == VW) {  /* a panel of one vector of columns (784 = 24 x 32 + 16): the same, c0
                        alone, instead of a pass through t and a scalar loop per element */
        for (int i = 0; i < MR; ++i) {
            if (i >= mr) break;
            float *ci = c + i * ldc;
            if (acc) c0[i] = RLX_SG_ADD(c0[i], RLX_SG_LOAD(ci));
            if (d) c0[i] = RLX_SG_FMA(RLX_SG_SET1(alpha), c0[i], RLX_SG_LOAD(d + i * ldc));
            if (bias) c0[i] = rlx_sgemm_fin(c0[i], bias, mask ? mask + i * ldc : 0, relu);
            RLX_SG_STORE(ci, c0[i]);
        }
        return;
    }
    for (int i = 0; i < MR; ++i) {
        RLX_SG_STORE(t + i * NR, c0[i]);
        RLX_SG_STORE(t + i * NR + VW, c1[i]);
    }
#else
    (void)pf;
    (void)npf;
    (void)w;
    (void)wn;
    for (int i = 0; i < MR * NR; ++i) t[i] = 0.0f;
    for (int64_t p = 0; p < kc; ++p)
        for (int64_t i = 0; i < (padded ? MR : mr); ++i) {
            const float ai = a[i * ra + p * rp];
            for (int j = 0; j < NR; ++j) t[i * NR + j] += ai * b[p * ldb + j];
        }
#endif
    for (int64_t i = 0; i < mr; ++i)
        for (int64_t j = 0; j < nr; ++j) {
            const float v = acc ? c[i * ldc + j] + t[i * NR + j] : t[i * NR + j];
            c[i * ldc + j] = d ? __builtin_fmaf(alpha, v, d[i * ldc + j])
                             : bias ? rlx_sgemm_fin1(v, bias[j], mask ? mask + i * ldc + j : 0, relu)
                             : v;
        }
}

/* the tile without prefetching (conv.py's callers) */
static inline __attribute__((always_inline)) void rlx_sgemm_tile(
        int64_t kc, const float *restrict a, int64_t ra, int64_t rp, const float *restrict b,
        int64_t ldb, float *restrict c, int64_t ldc, int acc, int64_t mr, int64_t nr,
        int padded) {
    rlx_sgemm_tile_pf(kc, a, ra, rp, b, ldb, c, ldc, acc, mr, nr, padded, 0, 0, 0, 0.0f, 0,
                      0, 0, 0, 0, 0, 0);
}

/* this thread's packing buffer (cpu/scratch.py; one per thread, never shared) */
RLX_SCRATCH(rlx_sgemm_scratch, float)

/* do rows of B brk floats apart spread over the L1's sets (sgemm.spreads)? A row stride of
   an even number of cache lines maps a panel's KC rows onto half the sets or fewer: read in
   place, the 512 x 512 weight of 784-512-512-10 (2 KB rows, two sets of a 32 KB 8-way L1)
   ran its input gradient at 70% of the FMA peak, packed at 85% */
static inline int rlx_sgemm_spread(int64_t brk) {
    return (brk % 16) != 0 || ((brk / 16) & 1) != 0;
}

/* do more than RLX_SG_WT_SET_ROWS of a panel's NR rows of W (wn floats apart, a 4 KB way of
   the L1 or more: K >= 1024) fall on one set of the L1 (64 sets of 64-byte lines)? Then W^T
   is packed in a pass before the panel's tiles, not by its first tile as it runs
   (rlx_sgemm_acc_wt; sgemm.wt_set_rows says what was measured) */
static inline int rlx_sgemm_wt_crowded(int64_t wn) {
    if (wn < 1024) return 0;
    int count[64] = {0}, most = 0;
    for (int64_t r = 0; r < RLX_SG_NR; ++r) {
        const int set = (int)((uint64_t)r * (uint64_t)wn / 16u % 64u);
        if (++count[set] > most) most = count[set];
    }
    return most > RLX_SG_WT_SET_ROWS;
}

/* the nominal slice depth: RLX_SG_KC, or twice it for a deep prepacked B (rlx_sgemm_deep) */
static inline int64_t rlx_sgemm_slice(int deep) {
    return deep ? 2 * RLX_SG_KC : RLX_SG_KC;
}

/* the depth of k's KC slices: k split evenly into as few slices as keep each within 9/8 of
   the nominal depth (rlx_sgemm_slice: a panel's slice still fits L1). K = 784 (MNIST's images) ran as 384 + 384 + 16,
   the last slice a whole extra pass that loads and stores every tile of C for 16 steps;
   it runs as 2 x 392 */
static inline int64_t rlx_sgemm_kc(int64_t k, int deep) {
    const int64_t kc = rlx_sgemm_slice(deep);
    const int64_t most = kc + kc / 8, slices = (k + most - 1) / most;
    return slices <= 1 ? k : (k + slices - 1) / slices;
}

/* slice a prepacked B (each panel k contiguous rows of 32 floats, read in order, so the
   tile streams it from L2 at the prefetchers' pace) twice as deep once k needs more than one
   slice: fewer passes that load and store every tile of C. C harness, Emerald Rapids, KC
   768: MiniLM's FFN2 (K = 1536: 2 x 768 instead of 4 x 384) 0.7-1.7% faster, the MLP's
   prepacked K = 784 (one slice instead of 2 x 392) 1-3%; MiniLM b8 on 2 threads, both
   builds alternating in one process: 0.4-0.6% off the call.
   B packed per call or read in place keeps its KC (its slice must stay in L1 / L2 packed) */
static inline int rlx_sgemm_deep(int64_t k, const float *P) {
    return P != 0 && k > RLX_SG_KC + RLX_SG_KC / 8;
}

/* rows per block of A (whole tiles) for slices kcap deep and a column block of nc columns:
   A's block and B's kcap x nc block share what MC x KC and KC x NC floats take of L2 (a
   narrow column block, a claimed chunk of a few panels, leaves room for more rows: each
   block of rows streams the panels once more), split evenly. A 64-row call of the MLP's
   weight gradient (K = 128) ran as 60 + 4 rows, reading all of B twice */
static inline int64_t rlx_sgemm_mc(int64_t m, int64_t kcap, int64_t nc, int deep) {
    enum { MR = RLX_SG_MR, MOST = 4 * RLX_SG_MC / RLX_SG_MR * RLX_SG_MR };
    const int64_t kc = rlx_sgemm_slice(deep);
    const int64_t room = (int64_t)RLX_SG_MC * kc + (int64_t)(RLX_SG_NC - nc) * kc;
    int64_t most = kcap > 0 ? room / kcap / MR * MR : MOST;
    most = most > MOST ? MOST : most < MR ? MR : most;
    const int64_t blocks = (m + most - 1) / most;
    return ((m + blocks - 1) / blocks + MR - 1) / MR * MR;
}

/* the rows of the next row tile with `left` rows of the block to go: MR, or the rest. On the
   AVX2 path (6-row tiles) a block that ends 1 or 2 rows past a whole tile (128 = 21 x 6 + 2)
   ends in a tile of 4 rows and one of 3-4 instead of a full tile and one of 1-2, when A is
   read in place (split: a packed A is laid out in whole MR-row tiles). A tile of one or two
   rows keeps two or four accumulators, fewer than the FMA latency times two ports needs:
   128 x 1536 x 384 on prepacked B (C harness, Zen 4 built with RLX_CPU_ISA=avx2's flags,
   one thread) took 1373 us a call where 126 rows took 1303: the two rows cost a full tile;
   now 1326-1340 (64-column chunks as the program calls it: 109.9-111.2 -> 110.8-113.5 GFLOP/s,
   caches flushed before each call 100.7-101.4 -> 104.6-105.7), and MiniLM b1 s8's 8-row GEMMs
   (8 x 384 x 1536: 90.2-90.6 -> 104.1-104.3 GFLOP/s; the model 2.09-2.15 -> 1.82-1.88 ms on
   2 threads, benchmarks/README.md).
   Each element of C sums its k products in the same order whatever tile holds its row, so
   the bits are unchanged. The AVX-512 path keeps its loop (its object code is unchanged) */
#if RLX_SG_ASM6
static inline int64_t rlx_sgemm_rows(int64_t left, int split) {
    if (split && (left == RLX_SG_MR + 1 || left == RLX_SG_MR + 2)) return 4;
    return left < RLX_SG_MR ? left : RLX_SG_MR;
}
#endif

/* the rows of A (read in place, rm floats apart, k contiguous) of the tile after tile row
   i, in the order rlx_sgemm_core_body runs them (row tiles of block [ic, ie), then the next
   panel, block, slice), or 0 when those are the rows this tile reads (the next panel's):
   the tile fetches them into L2 while it runs (rlx_sgemm_fetch_a). A GEMM whose A comes
   from L3 (the MLP step's forward x @ W1^T reads a new batch at each step) otherwise waits
   on it at every new row tile: the L2 streamer starts each row's stream afresh. */
static inline const float *rlx_sgemm_next_a(const float *A, int64_t rm, int64_t m, int64_t pc,
                                            int64_t kc, int64_t k, int64_t ic, int64_t ie,
                                            int64_t i, int last_panel) {
    if (i + RLX_SG_MR < ie) return A + (i + RLX_SG_MR) * rm + pc;
    if (!last_panel) return 0;
    if (ie < m) return A + ie * rm + pc;
    return pc + kc < k ? A + pc + kc : 0;
}

/* a tile epilogue: called with rows [i0, i1) (counted from the call's C) and columns
   [j0, j1) of C once they hold their final values, while they are in L1 (sgemm.py) */
typedef void (*rlx_sg_epi)(const void *ctx, int64_t i0, int64_t i1, int64_t j0, int64_t j1);

/* columns [n0, n1) of C = op(A) op(B), m x n x k; n0 a multiple of 32 (see sgemm.py).
   P: op(B) prepacked by rlx_sgemm_pack_b (panel j / 32 at P + (j / 32) * k * 32), or 0 to pack
   each KC x NC block of op(B) here. epi (or 0): run on every finished tile, with ectx.
   pf_n: P's columns, whose next panel each panel's first block of rows fetches into L2 (a
   line per four k steps of its tiles), or 0. A weight of a model streams from L3 or memory
   at every call, and the hardware prefetchers stop at each 4 KB page, so each panel's first
   tile waited on it. Emerald Rapids, all three builds in one process in turns (FIFO, load
   9-14): MiniLM on 2 threads b1 7.46-8.10 ms -> 7.09-7.52 (fetched ahead only past half of
   L2: 7.20-7.74), b8 57.6 -> 56.2, b32 236.3 -> 230.3; b1 on one thread 14.50 -> 13.05.
   bench_gemm, one thread, thread clock, in one process with MLAS: 128 x 384 x 1536 (B past
   L2) 0.97x -> 1.08x MLAS, 128 x 1536 x 384 1.01x -> 1.08x; where B stays in L2 between
   the benchmark's calls (128 x 384 x 384, 128 x 784 x 128) within noise.
   Not on a core that runs the tile's vectors at one FMA a cycle (RLX_SG_PPF 0, see
   sgemm.panel_prefetch: 512-bit vectors on Zen 4's 256-bit datapaths): each panel line lasts
   twice the cycles, the L2 streamer keeps up with the panel by itself, and the prefetches
   only take load slots. Zen 4, 2 threads, bench_gemm's protocol with both builds twice in one
   process (FIFO, load 2.4-2.8): 128 x 1536 x 384 225.9-228.6 -> 228.2-229.9 GFLOP/s (MLAS
   207.9-226.4); MiniLM b1 12.93-13.02 -> 12.85-12.94 ms, b8 105.8-111.0 -> 104.9-109.3, b1 on
   one thread 25.39-25.63 -> 25.22-25.77 */
static inline __attribute__((always_inline)) void rlx_sgemm_core_body(
        int64_t m, int64_t k, const float *A, int64_t rm, int64_t rk,
                              const float *B, int64_t brk, int64_t brn, const float *P,
                              float *C, int64_t ldc, int64_t n0, int64_t n1, rlx_sg_epi epi,
                              const void *ectx, int64_t pf_n, const float *D, float alpha,
                              const float *bias, uint8_t *mask, int relu) {
    enum { MR = RLX_SG_MR, NR = RLX_SG_NR, NC = RLX_SG_NC, VW = RLX_SG_VW };
    const int deep = rlx_sgemm_deep(k, P);
    const int64_t KC = rlx_sgemm_kc(k, deep);
    const int pack_a = rm < rk;
    /* op(B) with contiguous rows, for a few row tiles: the full panels of each KC slice
       are read in place (row p of a panel is 32 contiguous floats of B's row p), so nothing
       is copied; only a partial last panel is packed (a full-width load would run past B;
       one of exactly VW columns is not, see half_direct) */
    const int direct = !P && brn == 1 && m <= RLX_SG_DIRECT_ROWS && rlx_sgemm_spread(brk)
                       && k <= RLX_SG_DIRECT_DEPTH;
    /* B read in place has no KC x NC block to keep in L2, so its columns are one block: A's
       block is packed once per KC slice, not once more per NC columns, and only the last
       panel (the one partial panel) is packed, at bp. The MLP's weight gradient g^T x
       (64 x 784 x 128 per thread, A transposed) packed A four times (784 = 3 x 256 + 16):
       C harness, Emerald Rapids, one thread, FIFO: 75.5 -> 73.3 us */
    const int64_t NCB = direct ? n1 - n0 : NC;
    /* a last panel of exactly one vector of columns is read in place too, where every tile
       of it takes rlx_sgemm_acc_half (whole MR-row tiles: it loads VW floats a row, which
       stay within B; an edge tile's rlx_sgemm_acc would load two). The MLP's weight gradient
       (784 = 24 x 32 + 16) packed those 16 columns of its 128 rows of x on every call; the
       plain C tile reads NR columns, so only the vector tiles do this */
    const int half_direct = RLX_SG_VEC && direct && m % MR == 0;
    /* B = W^T packed in the call (AVX-512): each full panel's slice is packed by the first
       tile of its first block of rows (rlx_sgemm_acc_wt), not in a pass before its tiles,
       unless W's rows crowd the L1's sets (rlx_sgemm_wt_crowded, sgemm.wt_set_rows) */
#if defined(__AVX512F__)
    const int wt_tile = !P && !direct && brk == 1 && m >= MR && !rlx_sgemm_wt_crowded(brn);
#else
    const int wt_tile = 0;
#endif
    /* rows of A read in place along k (x @ W^T, x @ W) with B packed in the call: each tile
       fetches the next tile's rows into L2 as it runs (rlx_sgemm_next_a) */
#if defined(__AVX512F__)
    const int apf = RLX_SG_APF && !P && !pack_a && rk == 1;
#else
    const int apf = 0;
#endif
    for (int64_t jc = n0; jc < n1; jc += NCB) {
        const int64_t nc = n1 - jc < NCB ? n1 - jc : NCB;
        const int64_t panels = (nc + NR - 1) / NR;
        const int64_t kcap = k < KC ? k : KC;
        const int64_t bfloats = P ? 0 : direct ? NR * kcap : panels * NR * kcap;
        const int64_t mc = rlx_sgemm_mc(m, kcap, panels * NR < NC ? panels * NR : NC, deep);
        float *bp = rlx_sgemm_scratch(bfloats + mc * kcap);
        if (bp == 0) {  /* out of memory for the panels: the plain loop, slow but right */
            for (int64_t i = 0; i < m; ++i)
                for (int64_t j = jc; j < jc + nc; ++j) {
                    float s = 0.0f;
                    for (int64_t p = 0; p < k; ++p)
                        s += A[i * rm + p * rk] *
                             (P ? P[(j / NR) * k * NR + p * NR + j % NR] : B[p * brk + j * brn]);
                    C[i * ldc + j] = D ? __builtin_fmaf(alpha, s, D[i * ldc + j])
                                     : bias ? rlx_sgemm_fin1(s, bias[j], mask ? mask + i * ldc + j
                                                                             : 0, relu)
                                     : s;
                }
            if (epi) epi(ectx, 0, m, jc, jc + nc);
            continue;
        }
        for (int64_t pc = 0; pc < k; pc += KC) {
            const int64_t kc = k - pc < KC ? k - pc : KC;
            const int last = pc + kc >= k;  /* the tiles of this slice are final */
            /* this KC x NC block of op(B), as panels kc deep (384 KB at most: it stays in L2) */
            if (!P)
                for (int64_t q = 0; q < panels; ++q) {
                    const int64_t j = jc + q * NR, nr = jc + nc - j < NR ? jc + nc - j : NR;
                    if ((direct || wt_tile) && nr == NR) continue;
                    if (direct && nr == VW && half_direct) continue;
                    rlx_sgemm_pack_panel(kc, nr, B + pc * brk + j * brn, brk, brn,
                                         bp + (direct ? 0 : q * NR * kc));
                }
            for (int64_t ic = 0; ic < m; ic += mc) {  /* A's mc x kc block stays in L2 */
                const int64_t ie = m - ic < mc ? m : ic + mc;
                /* a transposed A is packed: its eight columns per step lie a row apart,
                   a cache line per step the tile would otherwise miss in L1 */
                float *ap = bp + bfloats;
                if (pack_a && rm == 1)
                    rlx_sgemm_pack_cols(kc, ie - ic, A + ic + pc * rk, rk, ap);
                else if (pack_a)
                    for (int64_t i = ic; i < ie; i += MR)
                        rlx_sgemm_pack_rows(kc, ie - i < MR ? ie - i : MR, A + i * rm + pc * rk,
                                            rm, rk, ap + (i - ic) * kc);
                for (int64_t q = 0; q < panels; ++q) {  /* the panel's KC slice stays in L1 */
                    const int64_t j = jc + q * NR, nr = jc + nc - j < NR ? jc + nc - j : NR;
                    const int in_place = direct && (nr == NR || (nr == VW && half_direct));
                    const float *pq = P ? P + (j / NR) * k * NR + pc * NR
                                      : in_place ? B + pc * brk + j
                                      : bp + (direct ? 0 : q * NR * kc);
                    const int64_t ldb = in_place ? brk : NR;
                    /* B read in place: the next panel's kc rows (a cache line each, a row of
                       B apart) are fetched a share per tile while this panel's tiles run; the
                       hardware prefetchers do not follow that stride, and the first tile of
                       each panel waited on kc misses. The MLP's weight gradient g^T x (C
                       harness, Zen 1, caches flushed): 128 x 128 x 784 27-28 -> 31.7 GFLOP/s,
                       at batch 1024 (K = 1024) 28-29 -> 30-31, warm 30 -> 32-33 */
                    const int next = in_place && q + 1 < panels
                                     && jc + nc - (j + NR) >= (half_direct ? VW : NR);
                    /* a prepacked B (pf_n > 0: its columns), first block of rows: the next
                       panel's slice, on into the next claimed chunk's, is fetched into L2
                       while this panel's tiles run (see rlx_sgemm_core_pf), where the block
                       has RLX_SG_PPF_TILES tiles or more: with AVX-512 NR / 4, so that a line
                       every four k steps of each tile covers the slice (a GEMM of fewer rows
                       streams its panels without); with AVX2 any block, RLX_SG_PF_LINES a
                       tile's four steps */
                    const float *pnext = RLX_SG_PPF && pf_n && ic == 0
                                         && (ie - ic + MR - 1) / MR >= RLX_SG_PPF_TILES
                                         && j + NR < pf_n ? pq + k * NR : 0;
                    const int64_t ptiles = (ie - ic + MR - 1) / MR, plines = kc * NR / 16;
                    const int64_t pper = (plines + ptiles - 1) / ptiles;
                    const int64_t per = (kc + ptiles - 1) / ptiles;
#if RLX_SG_ASM6  /* RLX_SG_TILE: the tile's index in the block */
                    int64_t mr = 0;
                    for (int64_t i = ic, t = 0; i < ie; i += mr, ++t) {
                        mr = rlx_sgemm_rows(ie - i, !pack_a);
#define RLX_SG_TILE t
#else
                    for (int64_t i = ic; i < ie; i += MR) {
                        const int64_t mr = ie - i < MR ? ie - i : MR;
#define RLX_SG_TILE ((i - ic) / MR)
#endif
                        if (next) {
                            const int64_t r0 = RLX_SG_TILE * per;
                            const int64_t r1 = r0 + per < kc ? r0 + per : kc;
                            for (int64_t r = r0; r < r1; ++r)
                                __builtin_prefetch(pq + r * ldb + NR, 0, 3);
                        }
                        const int64_t l0 = RLX_SG_TILE * pper;
                        const float *pf = pnext ? pnext + l0 * 16 : 0;
                        const int64_t npf = !pnext ? 0 : l0 + pper < plines ? pper : plines - l0;
                        /* an update store finishes the tile at its last slice */
                        const float *d = D && last ? D + i * ldc + j : 0;
                        const float *w = wt_tile && nr == NR && i == 0 ? B + pc * brk + j * brn
                                                                      : 0;
                        /* a bias store finishes the tile at its last slice */
                        const float *bj = bias && last ? bias + j : 0;
                        uint8_t *mj = bj && mask ? mask + i * ldc + j : 0;
                        const float *pa = apf ? rlx_sgemm_next_a(A, rm, m, pc, kc, k, ic, ie,
                                                                 i, q + 1 == panels) : 0;
                        if (pack_a)  /* an edge tile multiplies its mr rows alone */
                            rlx_sgemm_tile_pf(kc, ap + (i - ic) * kc, 1, MR, pq, ldb,
                                              C + i * ldc + j, ldc, pc > 0, mr, nr, mr == MR, pf,
                                              npf, d, alpha, w, brn, bj, mj, relu, 0, 0);
                        else
                            rlx_sgemm_tile_pf(kc, A + i * rm + pc * rk, rm, rk, pq, ldb,
                                              C + i * ldc + j, ldc, pc > 0, mr, nr, 0, pf, npf,
                                              d, alpha, w, brn, bj, mj, relu, pa, rm);
                        if (epi && last) epi(ectx, i, i + mr, j, j + nr);
                    }
#undef RLX_SG_TILE
                }
            }
        }
    }
}

/* the kernel: one copy shared by the kernel's entry points (the bias store has its own) */
static void rlx_sgemm_core_pf(int64_t m, int64_t k, const float *A, int64_t rm, int64_t rk,
                              const float *B, int64_t brk, int64_t brn, const float *P,
                              float *C, int64_t ldc, int64_t n0, int64_t n1, rlx_sg_epi epi,
                              const void *ectx, int64_t pf_n, const float *D, float alpha) {
    rlx_sgemm_core_body(m, k, A, rm, rk, B, brk, brn, P, C, ldc, n0, n1, epi, ectx, pf_n, D,
                        alpha, 0, 0, 0);
}

/* rlx_sgemm_core_pf without fetching panels ahead (B packed in the call, conv, gemv) */
static void rlx_sgemm_core(int64_t m, int64_t k, const float *A, int64_t rm, int64_t rk,
                           const float *B, int64_t brk, int64_t brn, const float *P,
                           float *C, int64_t ldc, int64_t n0, int64_t n1, rlx_sg_epi epi,
                           const void *ectx) {
    rlx_sgemm_core_pf(m, k, A, rm, rk, B, brk, brn, P, C, ldc, n0, n1, epi, ectx, 0, 0, 0.0f);
}

/* columns [n0, n1) of C = op(A) op(B), op(B) packed here (see sgemm.py) */
static void rlx_sgemm(int64_t m, int64_t n, int64_t k, const float *A, int64_t rm, int64_t rk,
                      const float *B, int64_t brk, int64_t brn, float *C, int64_t ldc,
                      int64_t n0, int64_t n1) {
    (void)n;
    rlx_sgemm_core(m, k, A, rm, rk, B, brk, brn, 0, C, ldc, n0, n1, 0, 0);
}

/* the same with op(B) prepacked at P by rlx_sgemm_pack_b */
static void rlx_sgemm_packed(int64_t m, int64_t n, int64_t k, const float *A, int64_t rm,
                             int64_t rk, const float *P, float *C, int64_t ldc, int64_t n0,
                             int64_t n1) {
    rlx_sgemm_core_pf(m, k, A, rm, rk, 0, 0, 0, P, C, ldc, n0, n1, 0, 0, n, 0, 0.0f);
}

/* rlx_sgemm and rlx_sgemm_packed with a tile epilogue: epi(ectx, ...) finishes each tile */
static void rlx_sgemm_epi(int64_t m, int64_t n, int64_t k, const float *A, int64_t rm,
                          int64_t rk, const float *B, int64_t brk, int64_t brn, float *C,
                          int64_t ldc, int64_t n0, int64_t n1, rlx_sg_epi epi, const void *ectx) {
    (void)n;
    rlx_sgemm_core(m, k, A, rm, rk, B, brk, brn, 0, C, ldc, n0, n1, epi, ectx);
}

static void rlx_sgemm_packed_epi(int64_t m, int64_t n, int64_t k, const float *A, int64_t rm,
                                 int64_t rk, const float *P, float *C, int64_t ldc, int64_t n0,
                                 int64_t n1, rlx_sg_epi epi, const void *ectx) {
    rlx_sgemm_core_pf(m, k, A, rm, rk, 0, 0, 0, P, C, ldc, n0, n1, epi, ectx, n, 0, 0.0f);
}

/* rlx_sgemm and rlx_sgemm_packed with an update store: C = D + alpha * op(A) op(B), D laid
   out as C (ldc), written as each tile finishes (update_store.py: an SGD step's W - lr * dW) */
static void rlx_sgemm_upd(int64_t m, int64_t n, int64_t k, const float *A, int64_t rm,
                          int64_t rk, const float *B, int64_t brk, int64_t brn, float *C,
                          int64_t ldc, int64_t n0, int64_t n1, const float *D, float alpha) {
    (void)n;
    rlx_sgemm_core_pf(m, k, A, rm, rk, B, brk, brn, 0, C, ldc, n0, n1, 0, 0, 0, D, alpha);
}

static void rlx_sgemm_packed_upd(int64_t m, int64_t n, int64_t k, const float *A, int64_t rm,
                                 int64_t rk, const float *P, float *C, int64_t ldc, int64_t n0,
                                 int64_t n1, const float *D, float alpha) {
    rlx_sgemm_core_pf(m, k, A, rm, rk, 0, 0, 0, P, C, ldc, n0, n1, 0, 0, n, D, alpha);
}

/* rlx_sgemm and rlx_sgemm_packed with a bias store: C = op(A) op(B) + bias (bias[j] for column
   j), with relu max(., 0), and its >= 0 mask at mask (laid out as C) when mask is not 0,
   written from the registers as each tile finishes (bias_store.py: a linear layer's bias,
   ReLU and the ReLU's gradient mask) */
static __attribute__((noinline)) void rlx_sgemm_bias(int64_t m, int64_t n, int64_t k, const float *A, int64_t rm,
                           int64_t rk, const float *B, int64_t brk, int64_t brn, float *C,
                           int64_t ldc, int64_t n0, int64_t n1, const float *bias, uint8_t *mask,
                           int relu) {
    (void)n;
    rlx_sgemm_core_body(m, k, A, rm, rk, B, brk, brn, 0, C, ldc, n0, n1, 0, 0, 0, 0, 0.0f, bias,
                        mask, relu);
}

static __attribute__((noinline)) void rlx_sgemm_packed_bias(int64_t m, int64_t n, int64_t k, const float *A, int64_t rm,
                                  int64_t rk, const float *P, float *C, int64_t ldc, int64_t n0,
                                  int64_t n1, const float *bias, uint8_t *mask, int relu) {
    rlx_sgemm_core_body(m, k, A, rm, rk, 0, 0, 0, P, C, ldc, n0, n1, 0, 0, n, 0, 0.0f, bias, mask,
                        relu);
}

/* all of op(B) (k x n) as panels of 32 columns, each k deep: rlx_sgemm_packed's layout,
   ceil(n / 32) * 32 * k floats */
static void rlx_sgemm_pack_b(int64_t n, int64_t k, const float *B, int64_t brk, int64_t brn,
                             float *P) {
    for (int64_t j = 0; j < n; j += RLX_SG_NR)
        rlx_sgemm_pack_panel(k, n - j < RLX_SG_NR ? n - j : RLX_SG_NR, B + j * brn, brk, brn,
                             P + j * k);
}
#endif
"""


def panel_prefetch() -> bool:
    """Does a prepacked B's first block of rows fetch each next panel into L2 as its tiles run
    (RLX_SG_PPF, rlx_sgemm_core_pf)? Not on a core measured at one FMA port for this ISA
    family's vectors (peaks.measured_fma_ports: 512-bit vectors on Zen 4's 256-bit datapaths,
    256-bit on Zen 1's 128-bit ones), as gemv.prefetch: a tile there takes twice the cycles per
    panel line, the L2 streamer keeps up with the panel's contiguous lines by itself, and the
    prefetches take load slots. Zen 4, 2 threads, C harness (claimed 64-column chunks, FIFO,
    load 2.6-4.1): 128 x 1536 x 384 656.9-667.5 -> 653.4-659.4 us a call, 128 x 784 x 128 and
    128 x 384 x 384 1-2% faster, 128 x 384 x 1536 level; in one process with MLAS see
    rlx_sgemm_core_body. Two ports (Emerald Rapids, where it was tuned: MiniLM 2.3-5% faster on
    2 threads) or never measured: on. ``RLX_SG_PPF`` (0 or 1) overrides it, for A/B timing."""
    from rlx_core.targets.cpu.peaks import measured_fma_ports

    return env_flag("RLX_SG_PPF", measured_fma_ports() != 1)


# a panel of W^T packed in the call is packed by its first tile as it runs (rlx_sgemm_acc_wt)
# unless more than this many of its 32 rows of W share an L1 set, W's rows a 4 KB way apart
# or more (on a core measured at one FMA port for the path's vectors; see wt_set_rows)
WT_SET_ROWS = 8


def wt_set_rows() -> int:
    """RLX_SG_WT_SET_ROWS: the most rows of W (of a panel's 32) that may share an L1 set for a
    panel of W^T packed in the call to be packed by its first tile as that tile runs
    (rlx_sgemm_acc_wt); where more do, W's rows 4 KB (a way of the L1) apart or more (K =
    1024, 3072: all 32 on one set; 1536: 16), it is packed in a pass before the panel's tiles
    (rlx_sgemm_wt_crowded). On a core measured at one FMA port for the path's vectors (Zen 4's
    AVX-512) WT_SET_ROWS, else 32 (always by the tile, as tuned on Emerald Rapids' two ports).
    The tile's k loop then waits on W's lines, evicted from their crowded set before their
    four uses; the pass keeps more misses in flight. Zen 4, x @ W^T with W per call, 2 threads,
    both forms twice in one process in bench_gemm's turns (FIFO, load 3.3-4.9), GFLOP/s, pass
    against tile: 128 x 1536 x 384 211.0-211.6 against 199.6-200.4, 128 x 1024 x 384
    182.6-184.1 against 165.5-167.0, 128 x 3072 x 768 188.0-191.0 against 172.0-173.5,
    128 x 1024 x 128 168.7-178.2 against 157.4-178.6. Where the rows are closer, the tile stays
    ahead though 16 share a set (K = 512, 2 KB apart: 128 x 512 x 512 206.0-206.6 against
    208.7-209.8, 128 x 512 x 1536 205.9-210.8 against 208.7-211.3; K = 768, 8 a set, C harness:
    128 x 768 x 3072 207.9-210.5 against 190.3-202.9), and rows spread over the sets run level
    either way (K = 1552 ~214, 784). The pass packs the same panel: same bits.
    ``RLX_SG_WT_SET_ROWS`` (0 to 32) overrides it, for A/B timing."""
    from rlx_core.targets.cpu.peaks import measured_fma_ports

    env = env_count("RLX_SG_WT_SET_ROWS", "rows of a panel's 32 (32: always by the tile)", NR)
    if env is not None:
        return env
    return WT_SET_ROWS if measured_fma_ports() == 1 else NR


# whether the full AVX-512 tile's asm k step (RLX_SG_ASM8) is on by default on a core measured
# at two FMA ports for 512-bit vectors; off: asm8 says why
ASM8_ON_TWO_PORTS = False


def asm8() -> bool:
    """RLX_SG_ASM8: does the full AVX-512 tile (8 x 32) run its k steps as inline asm
    (RLX_SG_ASM8_STEP: the same FMAs in the same order, same bits) instead of the C form?

    For cores with two 512-bit FMA ports (Emerald Rapids), where the tile's loop is FMA-bound:
    GCC 12 compiles the C form's four k steps (64 FMAs) with 3-5 register copies (vmovaps zmm),
    which llvm-mca 15 (its Skylake-server model) puts on the two FMA ports, 33.5-34.5 cycles
    against 32 (benchmarks/README.md, "portsim": predicted, not measured). Golden Cove may
    eliminate such copies at rename, and the asm's fixed order gives the scheduler no freedom
    the C form has, so it is opt-in (``RLX_SG_ASM8=1``) until an A/B on such a core says more
    (ASM8_ON_TWO_PORTS). A core at one 512-bit FMA port (Zen 4) is limited by that port first
    (64 FMAs, 64 cycles): never on by default there."""
    from rlx_core.targets.cpu.peaks import measured_fma_ports

    return env_flag("RLX_SG_ASM8", ASM8_ON_TWO_PORTS and measured_fma_ports() == 2)


def defines() -> str:
    """C macros set before SOURCE: ``RLX_SG_APF=0`` in the environment turns off fetching the
    next tile's rows of A (rlx_sgemm_next_a), for A/B timing; ``RLX_SG_PPF 0`` where a
    prepacked B's next panel is not fetched ahead (panel_prefetch); ``RLX_SG_WT_SET_ROWS``
    where a W^T is packed in a pass when its rows crowd the L1's sets (wt_set_rows);
    ``RLX_SG_ASM8 1`` where the full AVX-512 tile's k steps are asm (asm8)."""
    off = not env_flag("RLX_SG_APF", True)
    rows = wt_set_rows()
    return ("#define RLX_SG_APF 0\n" if off else "") + \
        ("" if panel_prefetch() else "#define RLX_SG_PPF 0\n") + \
        (f"#define RLX_SG_WT_SET_ROWS {rows}\n" if rows != NR else "") + \
        ("#define RLX_SG_ASM8 1\n" if asm8() else "")


def available(compiler: Compiler, blas_found: bool = True) -> tuple[bool, str]:
    """(True, "") when f32 GEMMs should use this kernel, else (False, why not).

    The renderer reaches native GEMMs through the BLAS hook, so without a BLAS every GEMM is
    a generated loop nest and this kernel is not used either."""
    if not blas_found:
        return False, "no BLAS: matmuls are generated loop nests"
    if env_flag("RLX_NO_OWN_SGEMM", False):
        return False, "disabled by RLX_NO_OWN_SGEMM"
    if not (compiler.avx512 or compiler.avx2_fma):
        return False, "the compiler targets neither AVX-512 nor AVX2 with FMA on this machine"
    return True, ""


def isa(compiler: Compiler) -> str:
    """The tile the kernel compiles to with ``compiler``: "avx512" (8 x 32), "avx2" (6 x 16)
    or "c" (plain C, 8 x 32)."""
    return "avx512" if compiler.avx512 else "avx2" if compiler.avx2_fma else "c"
