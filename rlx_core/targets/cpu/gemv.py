"""rlx's one-row GEMM (GEMV) over prepacked weight panels: token-by-token decoding's linears.

A decoding step multiplies one row (batch 1) by every weight of the model: GPT-2 small streams
its ~0.5 GB of f32 weights once per token, and 90% of the step was rlx's own GEMM
(sgemm.py), run on the same panels prepack.py writes. That kernel's tile is MR rows x two
vectors; with one row it keeps two accumulators, so each FMA waits for the one before it in
the same register (latency 4-5 cycles against a throughput of 1-2 per cycle), and it reads
one panel at a time: it read weights more slowly than OpenBLAS's sgemv.

Here a call of at most MAX_ROWS rows walks the panels of its column range. Panel ``j / NR``
is K rows of NR floats at ``P + j * k`` (sgemm.packed_bytes), so a column range is one
contiguous block of memory, read once. STREAMS[m] panels are read side by side, each with an
accumulator pair per row (one row: four panels, eight independent accumulators, each FMA
taking its weights straight from memory), and the weights of a step are loaded once for
every row. Four streams instead of one panel at a time unrolled four k steps deep took the
LM head (1 x 768 x 50,257) from 14 to 19-21 GB/s of weights on the Zen 1 VM (C harness, one
thread), where OpenBLAS's sgemv read 13-15 and the tiled kernel 12-13; a software prefetch
gained nothing on top there.

On Emerald Rapids each stream of a prepacked weight over PREFETCH_MIN_BYTES (4 MB) is
prefetched PREFETCH bytes (4 KB) ahead into L1 (``RLX_GV_PF`` / ``RLX_GV_PF_MIN`` /
``RLX_GV_PFH`` in the C source; ``RLX_GV_PF 0``: none, for A/B). Bits are unchanged. Measured
on a host slowed to ~half speed (both builds in one process, alternating turns, SCHED_FIFO,
load 7-14), the effect is within the run-to-run spread of +-4%, ~1-2% on average where the
weights come from memory: GPT-2 small decoding per token 0.985 / 0.971 of the time without it
on one thread, 0.955 / 1.017 on two; the LM head 1 x 768 x 50,257 0.959 / 1.001 / 1.039 (one
thread), 0.979 / 0.959 (two); ResNet-50's FC (1 x 2048 x 1000) in the network 0.985 / 0.993;
the L3-resident 1 x 768 x 3072 / 1 x 3072 x 768 0.99-1.01. The pure-read harness's ~25%
(hardware prefetchers alone: 7.6 GB/s of one core, with 2-8 KB ahead 10.5) does not carry
over: this kernel already reads 14-16 GB/s from memory without it. Smaller weights are read
without it: on the small decoder (weights of 0.25-4 MB, in L3) it cost 1-2.7% per token.
2 KB ahead measured level with none, NTA (locality 0) 2-4.6x slower, L2 (locality 2) 4-9%
slower on L3-resident weights. A core with one FMA port for its vectors (Zen 4) reads without
it (``prefetch``): there it cost 4-25%; so does the AVX2 family (on the Zen 4 forced to AVX2 it
cost 10%). The dot products of a per-call W (``rlx_gemv``) take none:
4 KB ahead made 1 x 3072 x 768 16% slower there (1 x 768 x 50,257 8% faster).

``rlx_gemv_packed(m, n, k, A, rm, rk, P, C, ldc, n0, n1)`` has rlx_sgemm_packed's arguments
and meaning (columns ``[n0, n1)``, ``n0`` a multiple of the panel width); ``_epi`` calls a
tile epilogue (tile_epilogue.py) on each finished group of panels, while it is in L1. A call with more
rows than MAX_ROWS goes to rlx_sgemm_core. The sum over K runs in one pass (the tiled
kernel adds its KC slices), so a row's result may differ from it in the last bits; every
column is computed the same way whichever thread, chunk or group of panels runs it.

``rlx_gemv(m, n, k, A, rm, rk, B, brk, brn, C, ldc, n0, n1)`` (and ``_epi``) is the form for an
op(B) passed in each call (rlx_sgemm's arguments): the tiled kernel packs all of W^T for the
one row, reading and writing every weight once more than it multiplies them (2.6-3.2 GFLOP/s on
GPT-2's decoding shapes, Zen 1 VM, C harness). Here x @ W^T (W's rows contiguous, the linear
layer) runs as dot products along k, and a B with contiguous rows as groups of whole panels
read in place; any other op(B) goes to the tiled kernel.

The dot products read W row after row (``rlx_gemv_dot_row``: W is one sequential stream, the
bandwidth probe's own pattern) while the M rows of x fit in a quarter of L1d (``row_floats``),
each row of x with RLX_GV_ROW_U accumulators (two zmm or four ymm for one row: 128 bytes of
W a step; two zmm against four, and four ymm against two, were the faster in each family). A
longer x is read once per J rows of W side by side (eight for one row; 5-7.5 GFLOP/s, 10-15
GB/s of W on the Zen 1 VM). On a Zen 4 VM (AVX-512, one 512-bit FMA a cycle, 32 KB L1d) eight
rows side by side read the LM head 1 x 768 x 50,257 at 18-19 GB/s where a plain streaming
read of W took 29-30; row after row 26-27 (C harness, one thread, both builds alternating,
FIFO, load 2.8 from another session), and 1 x 768 x 3072 (in L3) 79-84 instead of 69-80;
built for AVX2 (-mno-avx512f) 26-28 instead of 16-19 and 73-88 instead of 63-64. In
bench_gemm's setting (both forms and MLAS with W per call in one process, FIFO, load 2.4-2.7):
one thread 13.4-13.9 GFLOP/s instead of 7.2-7.7 (MLAS 11.6-12.7), 1 x 768 x 3072 25.9-26.5
instead of 21.8-22.9 (MLAS 17.6-18.1); two threads 16.5-17.3 instead of 11.1-12.9 (MLAS
15.1-15.2) and 59.7-61.8 instead of 54.2-56.0 (MLAS 44-45). With x = 12 KB (k = 3072) row
after row was ~7% slower in the program on Zen 4 (x and a 12 KB row of W share the 32 KB
L1d), hence the quarter. Emerald Rapids (48 KB L1d) was not measured: there the form reads
W with the same loads and FMAs per weight, in one sequential stream instead of eight rows
3 KB apart, and its per-call LM head was 0.98-0.99x MLAS (results/gemm-intel-*threadcpu*).

blas.emit_gemm calls them for a GEMM (one batch) of at most MAX_ROWS rows (``takes``);
blas._team_gemm splits such a GEMM over the team by claimed column chunks (``chunk_width``).
``RLX_NO_GEMV=1`` keeps those GEMMs on the tiled kernel (A/B timing).
"""

from __future__ import annotations

from rlx_core.targets.cpu.env import env_count, env_flag

IMPL = "rlx-gemv"
MAX_ROWS = 4  # RLX_GV_MAX_ROWS: above it the tiled kernel reuses each weight more often
STREAMS = {1: 4, 2: 2, 3: 1, 4: 1}  # panels read side by side per row count (RLX_GV_STREAMS)
CHUNK = 256  # columns per claimed chunk in the team: 768 KB of a 768-deep weight, whole panels
# of either ISA; a thread claims about 200 chunks of the 50,257-wide LM head
# a narrower GEMV is cut into about MIN_CHUNKS chunks (never under CHUNK_UNIT columns), so
# both threads get work: with 256-column chunks the small decoder's 1 x 1024 x 256 (MLP out)
# and 1 x 256 x 256 were one chunk, run by one thread, and its 1 x 256 x 768 three (two on one
# thread). Emerald Rapids, 2 threads, RLX_CPU_PROFILE, FIFO: those took 30.0 / 7.4 / 14.9 us,
# now 15.4 / 4.2 / 11.2; the step's kernels 377 -> 293 us. CHUNK_UNIT is one row's group of
# STREAMS[1] AVX-512 panels (8 AVX2 ones): 32-column units left GPT-2 small's 768-wide GEMVs
# in 96-column chunks read one panel at a time, and its step on one thread took 30.0-30.3 ms
# against 28.8-29.3 with 128 (A/B in turns, FIFO); the small decoder measured level.
MIN_CHUNKS = 8
PREFETCH = 4096  # RLX_GV_PF: bytes ahead in each weight stream (see the docstring)
PREFETCH_LOCALITY = 3  # RLX_GV_PFH
PREFETCH_MIN_BYTES = 4 << 20  # RLX_GV_PF_MIN: smaller weights are read without it
CHUNK_UNIT = 128
ROW_FLOATS = 2048  # RLX_GV_ROW_FLOATS where the OS reports no L1d: a quarter of a 32 KB one
# the largest RLX_GV_ROW_FLOATS / RLX_GV_PF accepted (env.env_count): 1 << 30 floats of x (4
# GB) already means "always row after row"; 1 MB ahead is past every L2 (4 KB was tuned)
ROW_FLOATS_MAX = 1 << 30
PREFETCH_MAX = 1 << 20
IN_PLACE_MAX = 1 << 50  # the largest RLX_GV_IN_PLACE_MIN accepted (bytes)


def chunk_width(n: int) -> int:
    """Columns per claimed chunk of an ``n``-wide GEMV in the team: CHUNK, or fewer (a
    multiple of CHUNK_UNIT, whole panels of either ISA) so that it has about MIN_CHUNKS."""
    per = -(-n // MIN_CHUNKS)
    return min(CHUNK, max(CHUNK_UNIT, -(-per // CHUNK_UNIT) * CHUNK_UNIT))


def enabled() -> bool:
    """False when ``RLX_NO_GEMV=1``."""
    return not env_flag("RLX_NO_GEMV", False)


def takes(m: int, batch: int, packed: bool) -> bool:
    """Does a GEMM of ``m`` rows (``batch`` batches, op(B) prepacked or not) run here?
    Prepacked: ``rlx_gemv_packed``; op(B) as passed: ``rlx_gemv`` (``packed`` only picks
    which, both take the GEMM)."""
    del packed
    return batch == 1 and 1 <= m <= MAX_ROWS and enabled()


def in_place_min() -> int:
    """The size in bytes above which a GEMV's weight is read in place rather than prepacked
    (reads_in_place): the L3 size, or 0 (never) where the OS reports none.
    ``RLX_GV_IN_PLACE_MIN`` overrides it (0: prepack every weight, for A/B timing; not a whole
    number from 0 to IN_PLACE_MAX: ArgumentError)."""
    from rlx_core.targets.cpu.isa import detect

    env = env_count("RLX_GV_IN_PLACE_MIN", "a byte count such as 33554432, or 0 for never",
                    IN_PLACE_MAX)
    return env if env is not None else detect().caches.l3


def reads_in_place(m: int, n: int, k: int, batch: int, rk: int, brk: int) -> bool:
    """Does a GEMV whose op(B) is a graph parameter read W where it lies (``rlx_gemv``, row
    after row: ``rlx_gemv_dot_row``) instead of a prepacked copy (``rlx_gemv_packed``)?

    Yes for x @ W^T (W's rows contiguous: ``brk`` 1, a row-contiguous x: ``rk`` 1) with x in
    a quarter of L1d (row_floats) and W larger than L3 (in_place_min): each call then streams
    W from memory, and one sequential stream of W's rows reads it faster than the panels'
    STREAMS streams. Zen 4, 2 threads, the LM head 1 x 768 x 50,257 (154 MB; L3 32 MB), two
    copies of each form in one process in alternating turns of varied order (FIFO, load
    3.0-6.0 from other sessions), GFLOP/s per run: in place 18.0 / 18.3, 19.9 / 20.0, 20.0 /
    20.1, 19.8 / 20.1; prepacked 16.3 / 16.0, 17.7 / 17.7, 17.5 / 17.3, 17.4 / 17.7. One
    thread level (15.5 / 15.4 against 14.9 / 15.0, 14.9 / 15.0 against 15.0 / 15.2). The
    panels' four streams were not the only cause: one panel at a time read 17.3 / 18.0 / 17.3
    where the prepacked four read 16.7 / 19.7 / 16.7 and the per-call row form 18.5 / 21.7 /
    18.9 (4 KB of software prefetch 17.6 / 19.1 / 17.7). A weight in L3 keeps its panels
    (its program is unchanged): the row form read 1 x 768 x 3072 at 36 GFLOP/s against the
    panels' 48 (one unFIFO run)."""
    lim = in_place_min()
    return (takes(m, batch, True) and rk == 1 and brk == 1 and lim > 0
            and 4 * n * k > lim and m * k <= row_floats())


def row_floats() -> int:
    """The longest x (M rows of k floats) for which a per-call W^T is read row after row
    (``rlx_gemv_dot_row``): a quarter of L1d, so x and one row of W take at most half of it
    between two reads of a line of x.
    ``RLX_GV_ROW_FLOATS=0`` turns that off (A/B timing); a value that is not a whole number
    from 0 to ROW_FLOATS_MAX is an ArgumentError."""
    from rlx_core.targets.cpu.isa import detect

    env = env_count("RLX_GV_ROW_FLOATS", "a float count such as 2048, or 0 for never",
                    ROW_FLOATS_MAX)
    if env is not None:
        return env
    l1d = detect().caches.l1d
    return l1d // 16 if l1d else ROW_FLOATS


def prefetch() -> int:
    """RLX_GV_PF for this machine: PREFETCH bytes ahead, or 0 (none) on a core that runs its
    vectors at one FMA a cycle (peaks.fma_ports, measured: 512-bit vectors over 256-bit
    datapaths on Zen 4, 256-bit over 128-bit on Zen 1), where the prefetches take load slots
    the kernel's own loads need. Zen 4, 2 threads, prepacked 1 x 768 x 3072 and 1 x 3072 x 768
    (in L3), both builds and MLAS in one process (FIFO, load 2.3-3.9): none 78-85 GFLOP/s, 4 KB
    ahead 58-68, 2 KB 67-70, 1 KB 64-69 (MLAS 62-70); one thread 32.5-37.9 against 30-34, the
    LM head (from memory) 12.4-13.1 against 11.0-12.0; on two threads the LM head level (none
    16.2-25.7, 4 KB 16.5-25.2 in six rounds, MLAS 15.8-19.7). The Zen 1 VM gained nothing from
    it either (see the module docstring). Two FMA ports, or peaks never measured here (no
    store, or one unreadable): PREFETCH, as tuned on Emerald Rapids. The count read is the one
    measured for this process's ISA family (peaks._key): it is per vector width, not per core
    (a Zen 4 issues one 16-float FMA a cycle but two 8-float ones), so under
    ``RLX_CPU_ISA=avx2`` the AVX2 row decides, and the AVX-512 row's 1 does not.

    The AVX2 family reads without it, whatever its port count: it gained nothing on the Zen 1
    VM, and under ``RLX_CPU_ISA=avx2`` on the Zen 4 (two 8-float FMA ports: the gate above
    said PREFETCH) it cost 10%. bench_gemm's rows with MLAS in one process, RLX_GV_PF 0 and
    4096 alternating in separate processes (FIFO, load 4.5-4.9): prepacked 1 x 768 x 3072 one
    thread 36.9 / 37.3 GFLOP/s against 32.8 / 33.5 (MLAS 33.2-34.7), 1 x 3072 x 768 37.0 /
    37.3 against 33.1 / 33.2 (MLAS 33.7-34.1); two threads 70.2 / 72.1 against 63.8 / 65.1
    (MLAS 63.6-68.1) and 70.8 / 71.7 against 65.9 / 66.0 (MLAS 66.5-67.8). ``RLX_GV_PF`` in
    the environment overrides all of this (A/B timing; not a whole number >= 0, or above
    PREFETCH_MAX: ArgumentError)."""
    from rlx_core.targets.cpu.isa import detect
    from rlx_core.targets.cpu.peaks import measured_fma_ports

    env = env_count("RLX_GV_PF", "bytes ahead such as 4096, or 0 for none", PREFETCH_MAX)
    if env is not None:
        return env
    if detect().family == "avx2":
        return 0
    # the port count is one core's at this family's width, measured on one thread whatever
    # the row's thread count (both rows read from the store once per version of the file,
    # peaks._rows)
    return 0 if measured_fma_ports() == 1 else PREFETCH


def defines() -> str:
    """C macros gemv.SOURCE reads that follow this machine (row_floats, prefetch)."""
    return f"#define RLX_GV_ROW_FLOATS {row_floats()}\n#define RLX_GV_PF {prefetch()}\n"


SOURCE = r"""
#ifndef RLX_GEMV_H
#define RLX_GEMV_H
/* after sgemm.SOURCE: its vector macros (RLX_SG_*), panel layout and rlx_sgemm_core */
#define RLX_GV_MAX_ROWS @MAX_ROWS@
/* panels read side by side for M rows (gemv.STREAMS): M x S x 2 accumulators, M broadcasts
   and two weight vectors fit the 16 ymm registers */
#define RLX_GV_STREAMS(M) ((M) == 1 ? @S1@ : (M) == 2 ? @S2@ : 1)
/* RLX_GV_PF: software prefetch this many bytes ahead in each stream of a prepacked weight of
   more than RLX_GV_PF_MIN bytes (0: none; A/B); RLX_GV_PFH: its __builtin_prefetch locality
   (3: into L1). See gemv.py's PREFETCH. */
#ifndef RLX_GV_PF
#define RLX_GV_PF @PF@
#endif
#ifndef RLX_GV_PF_MIN
#define RLX_GV_PF_MIN @PFMIN@
#endif
#ifndef RLX_GV_PFH
#define RLX_GV_PFH @PFH@
#endif
/* RLX_GV_ROW_FLOATS: x @ W^T passed per call reads W row after row while the M rows of x
   (M k floats) fit in this many floats (L1d / 4, gemv.row_floats); a longer x, W's rows
   side by side (gemv.py says why) */
#ifndef RLX_GV_ROW_FLOATS
#define RLX_GV_ROW_FLOATS @ROWF@
#endif

/* C[0:M, 0:(S - 1) NR + nlast) = op(A)[0:M, 0:k] . S packed panels from b (panel q at
   b + q k NR, k rows of NR floats each); nlast <= NR columns of the last panel are stored.
   M, S and PF (prefetch RLX_GV_PF bytes ahead) are constants at every call, so the
   accumulators unroll into registers. */
static inline __attribute__((always_inline)) void rlx_gemv_block(
        const int M, const int S, const int PF, int64_t k, const float *restrict A, int64_t rm,
        int64_t rk, const float *restrict b, int64_t qs, int64_t ldb, float *restrict c,
        int64_t ldc, int64_t nlast) {
    enum { NR = RLX_SG_NR, VW = RLX_SG_VW, MAXS = 4 };
    float t[RLX_GV_MAX_ROWS * NR];
#if RLX_SG_VEC
    rlx_sg_v s0[MAXS][RLX_GV_MAX_ROWS], s1[MAXS][RLX_GV_MAX_ROWS];
    for (int q = 0; q < S; ++q)
        for (int i = 0; i < M; ++i) { s0[q][i] = RLX_SG_ZERO(); s1[q][i] = RLX_SG_ZERO(); }
    for (int64_t p = 0; p < k; ++p) {
        rlx_sg_v a[RLX_GV_MAX_ROWS];
        for (int i = 0; i < M; ++i) a[i] = RLX_SG_SET1(A[i * rm + p * rk]);
        for (int q = 0; q < S; ++q) {
            const float *bq = b + q * qs + p * ldb;
            if (PF) {  /* the row RLX_GV_PF bytes of this panel ahead (NR floats, ldb apart) */
                const float *f = bq + (RLX_GV_PF / (NR * 4)) * ldb;
                __builtin_prefetch(f, 0, RLX_GV_PFH);
                if (NR * 4 > 64) __builtin_prefetch(f + 16, 0, RLX_GV_PFH);
            }
            const rlx_sg_v b0 = RLX_SG_LOAD(bq), b1 = RLX_SG_LOAD(bq + VW);
            for (int i = 0; i < M; ++i) {
                s0[q][i] = RLX_SG_FMA(a[i], b0, s0[q][i]);
                s1[q][i] = RLX_SG_FMA(a[i], b1, s1[q][i]);
            }
        }
    }
    for (int q = 0; q < S; ++q)
        for (int i = 0; i < M; ++i) {
            const int whole = q < S - 1 || nlast == NR;
            float *d = whole ? c + i * ldc + q * NR : t + i * NR;
            RLX_SG_STORE(d, s0[q][i]);
            RLX_SG_STORE(d + VW, s1[q][i]);
        }
    if (nlast == NR) return;
#else
    for (int q = 0; q < S - 1; ++q)  /* whole panels straight into C */
        for (int i = 0; i < M; ++i)
            for (int j = 0; j < NR; ++j) {
                float acc = 0.0f;
                for (int64_t p = 0; p < k; ++p) acc += A[i * rm + p * rk] * b[q * qs + p * ldb + j];
                c[i * ldc + q * NR + j] = acc;
            }
    for (int i = 0; i < M; ++i)
        for (int j = 0; j < NR; ++j) {
            float acc = 0.0f;
            for (int64_t p = 0; p < k; ++p) acc += A[i * rm + p * rk] * b[(S - 1) * qs + p * ldb + j];
            t[i * NR + j] = acc;
        }
#endif
    for (int i = 0; i < M; ++i)  /* the last panel, through the buffer */
        for (int64_t j = 0; j < nlast; ++j) c[i * ldc + (S - 1) * NR + j] = t[i * NR + j];
}

/* columns [j, n1) for M rows: groups of S panels, then the rest one panel at a time; epi
   (or 0) finishes each group's columns while they are in L1 */
static inline __attribute__((always_inline)) void rlx_gemv_rows(
        const int M, const int PF, int64_t k, const float *A, int64_t rm, int64_t rk,
        const float *P, float *C, int64_t ldc, int64_t j, int64_t n1, rlx_sg_epi epi, const void *ectx) {
    enum { NR = RLX_SG_NR };
    const int S = RLX_GV_STREAMS(M);
    for (; j < n1;) {
        const int64_t panels = (n1 - j + NR - 1) / NR;
        const int s = panels >= S ? S : 1;
        const int64_t end = j + s * NR < n1 ? j + s * NR : n1;
        const float *b = P + (j / NR) * k * NR;
        if (s == S)
            rlx_gemv_block(M, S, PF, k, A, rm, rk, b, k * NR, NR, C + j, ldc,
                           end - j - (S - 1) * NR);
        else
            rlx_gemv_block(M, 1, PF, k, A, rm, rk, b, k * NR, NR, C + j, ldc, end - j);
        if (epi) epi(ectx, 0, M, j, end);
        j = end;
    }
}

/* columns [n0, n1) of C = op(A) P for m <= RLX_GV_MAX_ROWS rows, P prepacked by
   rlx_sgemm_pack_b (see gemv.py); epi (or 0) finishes the columns, with ectx */
static void rlx_gemv_packed_epi(int64_t m, int64_t n, int64_t k, const float *A, int64_t rm,
                                int64_t rk, const float *P, float *C, int64_t ldc, int64_t n0,
                                int64_t n1, rlx_sg_epi epi, const void *ectx) {
    const int pf = RLX_GV_PF > 0 && (double)n * k * 4 > RLX_GV_PF_MIN;
#define RLX_GV_ROWS(M) \
    if (pf) rlx_gemv_rows(M, 1, k, A, rm, rk, P, C, ldc, n0, n1, epi, ectx); \
    else rlx_gemv_rows(M, 0, k, A, rm, rk, P, C, ldc, n0, n1, epi, ectx); \
    break;
    switch (m) {
    case 1: RLX_GV_ROWS(1)
    case 2: RLX_GV_ROWS(2)
    case 3: RLX_GV_ROWS(3)
    case 4: RLX_GV_ROWS(4)
#undef RLX_GV_ROWS
    default:
        if (m > 0) rlx_sgemm_core(m, k, A, rm, rk, 0, 0, 0, P, C, ldc, n0, n1, epi, ectx);
    }
}

static void rlx_gemv_packed(int64_t m, int64_t n, int64_t k, const float *A, int64_t rm,
                            int64_t rk, const float *P, float *C, int64_t ldc, int64_t n0,
                            int64_t n1) {
    rlx_gemv_packed_epi(m, n, k, A, rm, rk, P, C, ldc, n0, n1, 0, 0);
}

/* C[0:M, j:j + J) = op(A)[0:M, 0:k] . W[j:j + J, 0:k]^T with W's rows w + j*ldw contiguous:
   M x J dot products along k, each a vector accumulator (M and J constants at every call) */
static inline __attribute__((always_inline)) void rlx_gemv_dots(
        const int M, const int J, int64_t k, const float *restrict A, int64_t rm,
        const float *restrict w, int64_t ldw, float *restrict c, int64_t ldc) {
    float s[RLX_GV_MAX_ROWS][8];
    int64_t p = 0;
#if RLX_SG_VEC
    enum { VW = RLX_SG_VW };
    rlx_sg_v acc[RLX_GV_MAX_ROWS][8];
    for (int i = 0; i < M; ++i)
        for (int q = 0; q < J; ++q) acc[i][q] = RLX_SG_ZERO();
    for (; p + VW <= k; p += VW) {
        rlx_sg_v a[RLX_GV_MAX_ROWS];
        for (int i = 0; i < M; ++i) a[i] = RLX_SG_LOAD(A + i * rm + p);
        for (int q = 0; q < J; ++q) {
            const rlx_sg_v wq = RLX_SG_LOAD(w + q * ldw + p);
            for (int i = 0; i < M; ++i) acc[i][q] = RLX_SG_FMA(a[i], wq, acc[i][q]);
        }
    }
    for (int i = 0; i < M; ++i)
        for (int q = 0; q < J; ++q) {
            float v[VW];
            RLX_SG_STORE(v, acc[i][q]);
            float t = 0.0f;
            for (int l = 0; l < VW; ++l) t += v[l];
            s[i][q] = t;
        }
#else
    for (int i = 0; i < M; ++i)
        for (int q = 0; q < J; ++q) s[i][q] = 0.0f;
#endif
    for (; p < k; ++p)
        for (int i = 0; i < M; ++i)
            for (int q = 0; q < J; ++q) s[i][q] += A[i * rm + p] * w[q * ldw + p];
    for (int i = 0; i < M; ++i)
        for (int q = 0; q < J; ++q) c[i * ldc + q] = s[i][q];
}

#if RLX_SG_VEC
/* the sum of a vector's floats */
static inline __attribute__((always_inline)) float rlx_gemv_hsum(rlx_sg_v v) {
#if defined(__AVX512F__)
    return _mm512_reduce_add_ps(v);
#else
    __m128 h = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    return _mm_cvtss_f32(_mm_add_ss(h, _mm_movehdup_ps(h)));
#endif
}
#endif

/* accumulators per row of A in rlx_gemv_dot_row: a step of 128 bytes of W for one row of
   A, 64 for several (gemv.py) */
#ifndef RLX_GV_ROW_U
#define RLX_GV_ROW_U(M) (((M) == 1 ? 32 : 16) / RLX_SG_VW)
#endif

/* C[0:M, 0] = op(A)[0:M, 0:k] . w[0:k], w one contiguous row of W (M a constant at every
   call): RLX_GV_ROW_U(M) accumulators per row of A (vector v of k into v % U), summed
   pairwise, then the k % VW tail. Called row after row, W is read as one sequential stream */
static inline __attribute__((always_inline)) void rlx_gemv_dot_row(
        const int M, int64_t k, const float *restrict A, int64_t rm, const float *restrict w,
        float *restrict c, int64_t ldc) {
    int64_t p = 0;
    float s[RLX_GV_MAX_ROWS];
#if RLX_SG_VEC
    enum { VW = RLX_SG_VW, MAXU = 4 };
    const int U = RLX_GV_ROW_U(M);
    rlx_sg_v acc[MAXU][RLX_GV_MAX_ROWS];
    for (int u = 0; u < U; ++u)
        for (int i = 0; i < M; ++i) acc[u][i] = RLX_SG_ZERO();
    for (; p + U * VW <= k; p += U * VW)
        for (int u = 0; u < U; ++u) {
            const rlx_sg_v wv = RLX_SG_LOAD(w + p + u * VW);
            for (int i = 0; i < M; ++i)
                acc[u][i] = RLX_SG_FMA(RLX_SG_LOAD(A + i * rm + p + u * VW), wv, acc[u][i]);
        }
    for (int u = 0; p + VW <= k; ++u, p += VW) {  /* the last k / VW % U vectors */
        const rlx_sg_v wv = RLX_SG_LOAD(w + p);
        for (int i = 0; i < M; ++i)
            acc[u][i] = RLX_SG_FMA(RLX_SG_LOAD(A + i * rm + p), wv, acc[u][i]);
    }
    for (int i = 0; i < M; ++i) {
        rlx_sg_v t = acc[0][i];
        if (U == 4)
            t = RLX_SG_ADD(RLX_SG_ADD(acc[0][i], acc[1][i]), RLX_SG_ADD(acc[2][i], acc[3][i]));
        else if (U == 2)
            t = RLX_SG_ADD(acc[0][i], acc[1][i]);
        s[i] = rlx_gemv_hsum(t);
    }
#else
    for (int i = 0; i < M; ++i) s[i] = 0.0f;
#endif
    for (; p < k; ++p)
        for (int i = 0; i < M; ++i) s[i] += A[i * rm + p] * w[p];
    for (int i = 0; i < M; ++i) c[i * ldc] = s[i];
}

/* columns [j, n1) for M rows of C = op(A) op(B), op(B) as the caller passes it (not packed):
   W^T with W's rows contiguous (x @ W.T, the linear layer: dot products along k), or B with
   contiguous rows (groups of S whole panels read in place, as rlx_gemv_rows reads packed
   ones; the columns past the last whole panel one at a time). A row-contiguous op(A) is
   needed for the dot products; anything else goes to the tiled kernel, which packs. */
static inline __attribute__((always_inline)) void rlx_gemv_rows_direct(
        const int M, int64_t k, const float *A, int64_t rm, int64_t rk, const float *B,
        int64_t brk, int64_t brn, float *C, int64_t ldc, int64_t j, int64_t n1,
        rlx_sg_epi epi, const void *ectx) {
    enum { NR = RLX_SG_NR };
    if (brk == 1 && rk == 1) {
        /* x in L1: W row after row (rlx_gemv_dot_row), one stream. Else M x J accumulators
           within the 16 ymm registers; one row reads 8 rows of W side by side (the C
           harness, Zen 1: 1 x 3072 x 768 at 14-15 GB/s of W against 12-13 with 4) */
        const int rows = (int64_t)M * k <= RLX_GV_ROW_FLOATS;
        const int J = M == 1 ? 8 : M == 2 ? 4 : 2;
        for (; j < n1;) {
            const int64_t end = j + 64 < n1 ? j + 64 : n1;
            int64_t q = j;
            if (rows)
                for (; q < end; ++q) rlx_gemv_dot_row(M, k, A, rm, B + q * brn, C + q, ldc);
            for (; q + J <= end; q += J)
                rlx_gemv_dots(M, J, k, A, rm, B + q * brn, brn, C + q, ldc);
            for (; q < end; ++q) rlx_gemv_dots(M, 1, k, A, rm, B + q * brn, brn, C + q, ldc);
            if (epi) epi(ectx, 0, M, j, end);
            j = end;
        }
        return;
    }
    if (brn == 1) {
        const int S = RLX_GV_STREAMS(M);
        for (; j < n1;) {
            const int64_t whole = (n1 - j) / NR;
            const int s = whole >= S ? S : 1;
            if (whole == 0) {  /* the last partial panel: a full-width load would run past B */
                for (int i = 0; i < M; ++i)
                    for (int64_t q = j; q < n1; ++q) {
                        float t = 0.0f;
                        for (int64_t p = 0; p < k; ++p) t += A[i * rm + p * rk] * B[p * brk + q];
                        C[i * ldc + q] = t;
                    }
                if (epi) epi(ectx, 0, M, j, n1);
                return;
            }
            if (s == S)
                rlx_gemv_block(M, S, 0, k, A, rm, rk, B + j, NR, brk, C + j, ldc, NR);
            else
                rlx_gemv_block(M, 1, 0, k, A, rm, rk, B + j, NR, brk, C + j, ldc, NR);
            if (epi) epi(ectx, 0, M, j, j + s * NR);
            j += s * NR;
        }
        return;
    }
    rlx_sgemm_core(M, k, A, rm, rk, B, brk, brn, 0, C, ldc, j, n1, epi, ectx);
}

/* columns [n0, n1) of C = op(A) op(B) for m <= RLX_GV_MAX_ROWS rows, op(B) not packed:
   rlx_sgemm's arguments and meaning (see gemv.py); epi (or 0) finishes the columns */
static void rlx_gemv_epi(int64_t m, int64_t n, int64_t k, const float *A, int64_t rm, int64_t rk,
                         const float *B, int64_t brk, int64_t brn, float *C, int64_t ldc,
                         int64_t n0, int64_t n1, rlx_sg_epi epi, const void *ectx) {
    (void)n;
    switch (m) {
    case 1: rlx_gemv_rows_direct(1, k, A, rm, rk, B, brk, brn, C, ldc, n0, n1, epi, ectx); break;
    case 2: rlx_gemv_rows_direct(2, k, A, rm, rk, B, brk, brn, C, ldc, n0, n1, epi, ectx); break;
    case 3: rlx_gemv_rows_direct(3, k, A, rm, rk, B, brk, brn, C, ldc, n0, n1, epi, ectx); break;
    case 4: rlx_gemv_rows_direct(4, k, A, rm, rk, B, brk, brn, C, ldc, n0, n1, epi, ectx); break;
    default:
        if (m > 0) rlx_sgemm_core(m, k, A, rm, rk, B, brk, brn, 0, C, ldc, n0, n1, epi, ectx);
    }
}

static void rlx_gemv(int64_t m, int64_t n, int64_t k, const float *A, int64_t rm, int64_t rk,
                     const float *B, int64_t brk, int64_t brn, float *C, int64_t ldc, int64_t n0,
                     int64_t n1) {
    rlx_gemv_epi(m, n, k, A, rm, rk, B, brk, brn, C, ldc, n0, n1, 0, 0);
}
#endif
""".replace("@MAX_ROWS@", str(MAX_ROWS)).replace("@PF@", str(PREFETCH)) \
    .replace("@PFH@", str(PREFETCH_LOCALITY)) \
    .replace("@PFMIN@", str(PREFETCH_MIN_BYTES)).replace("@S1@", str(STREAMS[1])) \
    .replace("@S2@", str(STREAMS[2])).replace("@ROWF@", str(ROW_FLOATS))
