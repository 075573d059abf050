"""The CPU's register-tiled int8 GEMM on a prepacked weight (``int_linear`` with a parameter weight).

When ``int_linear``'s weight is a graph parameter (every PTQ graph), the program packs it once
per binding (cpu/prepack.py, kind ``i8``) into panels of 16 columns: for each group of four
inputs ``k..k+3`` a panel holds 64 bytes, the four bytes of column 0, then of column 1, ...
(two 32-byte vectors of 8 columns), zero-padded past ``n`` and ``k``; the column sums ``S_b``
follow the panels. A micro-kernel computes a 4 x 16 tile of ``S_ab = sum_k a b`` in eight
i32 vector accumulators: each step broadcasts four bytes of a row of x and multiplies them
into the two vectors of the panel. The epilogue writes

    C[i, j] = S_ab + corr * S_b[j] - za * S_b[j] - zb * S_a[i] + K * za * zb (+ bias[j])

in wrapping 32-bit arithmetic (``corr`` undoes the byte offset a kernel applies to x).

Micro-kernels, picked at run time from what the CPU reports (cpu/igemm.py's rlx_igemm_isa):

- ``avx512vnni`` (with AVX512-VL) and ``avxvnni``: ``vpdpbusd`` multiplies *unsigned* x
  bytes by the signed weight bytes and adds groups of four into i32, exactly. A signed x is
  offset to unsigned (``a ^ 0x80 = a + 128``); ``corr = -128`` takes ``128 * S_b`` off.
  On AVX-512 the panel walk (every linear here: int, dynamic, static, requantized) takes
  an 8 x 16 tile on zmm instead: one 64-byte panel step per vector, eight accumulators.
  Emerald Rapids, one thread, MiniLM's 128 x 384 x 1536 and 128 x 1536 x 384 (thread CPU
  time, SCHED_FIFO, load ~24): 0.56-0.64 ms on the 4 x 16 ymm tile -> 0.38-0.45 ms
  (1.4-1.7x), 168-197 GMAC/s.
- ``amx`` (AMX-INT8, K a multiple of 64): the panel walk on tiles (``rlx_igp_amx_walk``,
  below); a 16-group slice of a panel is TDPBUSD's B operand as it is packed.
- ``avx2``: ``vpmaddubsw`` + ``vpmaddwd``. ``vpmaddubsw`` adds two u8 x s8 products in a
  *saturating* i16, which 255 * 127 * 2 overflows. The choice here is the **sign trick on
  s8 x s8**: x stays signed (a u8 x is offset to signed, ``corr = +128``), the kernel
  multiplies ``|a|`` (``vpabsb``, at most 128, unsigned) by ``sign(a) * w`` (``vpsignb``), so a
  pair is at most 2 * 128 * 127 = 32512 and never saturates, *provided no weight byte is
  -128* (its negation does not fit). PTQ weights are narrow-range ([-127, 127]); a weight that
  holds -128 (QAT's full-range weights) is flagged when packed and takes cpu/igemm.py's
  row-major AVX2 dot kernel (bytes widened to 16 bits: exact for every byte). The alternative, 7-bit
  activations, would cost every activation a bit of precision; the sign trick costs one
  ``vpsignb`` per product vector and keeps all 8 bits.
- ``avx2`` with 7-bit weights (every byte in [-64, 63], flagged ``w7`` when packed): u8 x
  times such a weight pairs to at most 2 * 255 * 64 = 32640, so ``vpmaddubsw`` runs without
  the sign trick (tiles ``w7_s`` / ``w7_u``); with x also at most 127 (dynamic_int_linear's
  7-bit codes, offset by 64) the ``w77`` tile adds the i16 pair sums of two groups of four
  inputs before one ``vpmaddwd`` (4 * 127 * 64 = 32512 fits): three multiplier instructions per
  64 multiply-adds instead of four. rlx.quant.ptq writes such codes by default on CPUs with
  AVX2 and no VNNI (docs/quantization.md).
- ``avx2`` with 6-bit weights (every byte in [-32, 31], flagged ``w6`` when packed; PTQ's
  ``weight_bits=6``): four products of any u8 x are at most 4 * 255 * 32 = 32640, so static
  PTQ's 8-bit activations take the ``w77`` pairing (1.5 multiplier instructions per 32
  multiply-adds instead of 2), and x in [0, 127] the ``w66`` tile, which adds four groups in
  i16 (8 * 127 * 32 = 32512): 1.25. Measured on the Zen 1 (one 4 x 16 tile over k = 384,
  thread CPU time, load ~20): 18.7 GMAC/s (``w7_u``), 24.8 (``w77``), 27.5 (``w66``). Widening
  the i16 sums with shifts instead of ``vpmaddwd`` (off the multiplier port) was no faster.
- portable C over the same panels, any CPU (``RLX_IGEMM_ISA=c`` forces it).

Every path is exact (integer arithmetic), so all of them equal the numpy reference bit for
bit; tests/quant/test_igemm.py runs the one this CPU picks and the portable one, and compiles
the VNNI ones (``target`` attributes) on any x86-64 machine.
"""

from __future__ import annotations

from rlx_core.targets.cpu import amx, epilogue_erf

IMPL = "rlx-igemm-packed"
DYNAMIC_IMPL = "rlx-igemm-dynamic"  # dynamic_int_linear: rlx_igd_block below
STATIC_IMPL = "rlx-igemm-static"  # static_int_linear: rlx_igs_block below
REQUANT_IMPL = "rlx-igemm-requant"  # requantized_int_linear: rlx_igr_block below
NR = 16  # columns per panel (two vectors of eight i32)
MR = 4  # rows per micro-tile
HEADER = 64


def packed_bytes(n: int, k: int) -> int:
    """Bytes of a packed weight (n, k): header, panels, column sums (as rlx_igp_bytes)."""
    panels = -(-n // NR)
    return HEADER + panels * (-(-k // 4)) * 64 + panels * NR * 4


SOURCE = amx.SOURCE + r"""
#ifndef RLX_IGEMM_PACKED_H
#define RLX_IGEMM_PACKED_H
/* needs RLX_IGEMM_H before it (rlx_igemm_isa, RLX_IG_X86) */
/* has_min: a weight byte is -128; w7: every weight byte is in [-64, 63] (7 bits); w6: every
   weight byte is in [-32, 31] (6 bits) */
typedef struct { int64_t n, k, k4, np; int32_t has_min, w7, w6, pad[5]; } rlx_igp_head; /* 64 B */

/* w (n x k, signed bytes) -> header, np panels of k4 x 64 bytes, np * 16 column sums */
static void rlx_igp_pack(int64_t n, int64_t k, const int8_t *w, void *dst) {
    rlx_igp_head *h = (rlx_igp_head *)dst;
    const int64_t np = (n + 15) / 16, k4 = (k + 3) / 4;
    int8_t *panels = (int8_t *)dst + 64;
    int32_t *colsum = (int32_t *)(panels + np * k4 * 64);
    int has_min = 0, w7 = 1, w6 = 1;
    memset(panels, 0, (size_t)(np * k4 * 64));
    for (int64_t j = 0; j < np * 16; ++j) colsum[j] = 0;
    for (int64_t j = 0; j < n; ++j) {
        const int8_t *wj = w + j * k;
        int8_t *pj = panels + (j / 16) * k4 * 64 + (j % 16) * 4;
        int32_t s = 0;
        for (int64_t p = 0; p < k; ++p) {
            pj[(p / 4) * 64 + (p % 4)] = wj[p];
            s += wj[p];
            has_min |= wj[p] == -128;
            w7 &= wj[p] >= -64 && wj[p] <= 63;
            w6 &= wj[p] >= -32 && wj[p] <= 31;
        }
        colsum[j] = s;
    }
    h->n = n; h->k = k; h->k4 = k4; h->np = np; h->has_min = has_min; h->w7 = w7; h->w6 = w6;
}

/* a 4 x 16 tile of S_ab over all k (8 x 16 for the zmm tile): rows a[0..3] (bytes, XORed
   with FLIP first), one panel */
typedef void (*rlx_igp_tile_fn)(const uint8_t *const *, int, const int8_t *, int64_t,
                                int32_t *);

/* four bytes of row a at p (the last group zero-padded past k) */
static inline int32_t rlx_igp_quad(const uint8_t *a, int64_t p, int64_t k) {
    int32_t v = 0;
    if (p + 4 <= k) memcpy(&v, a + p, 4);
    else { uint8_t t[4] = {0, 0, 0, 0}; memcpy(t, a + p, (size_t)(k - p)); memcpy(&v, t, 4); }
    return v;
}

/* portable: a_u8 says how to read x's bytes */
static void rlx_igp_tile_c(const uint8_t *const *a, int a_u8, const int8_t *bp, int64_t k,
                           int32_t *out) {
    for (int r = 0; r < 4; ++r) {
        int32_t acc[16] = {0};
        for (int64_t p = 0; p < k; ++p) {
            const int32_t x = a_u8 ? (int32_t)a[r][p] : (int32_t)(int8_t)a[r][p];
            const int8_t *b = bp + (p / 4) * 64 + (p % 4);
            for (int c = 0; c < 16; ++c) acc[c] += x * b[c * 4];
        }
        memcpy(out + r * 16, acc, sizeof acc);
    }
}

#ifdef RLX_IG_X86
#define RLX_IGP_ZERO8 __m256i c00 = _mm256_setzero_si256(), c01 = c00, c10 = c00, c11 = c00, \
    c20 = c00, c21 = c00, c30 = c00, c31 = c00
#define RLX_IGP_STORE8                                                                     \
    _mm256_storeu_si256((__m256i *)(out + 0), c00);                                        \
    _mm256_storeu_si256((__m256i *)(out + 8), c01);                                        \
    _mm256_storeu_si256((__m256i *)(out + 16), c10);                                       \
    _mm256_storeu_si256((__m256i *)(out + 24), c11);                                       \
    _mm256_storeu_si256((__m256i *)(out + 32), c20);                                       \
    _mm256_storeu_si256((__m256i *)(out + 40), c21);                                       \
    _mm256_storeu_si256((__m256i *)(out + 48), c30);                                       \
    _mm256_storeu_si256((__m256i *)(out + 56), c31)

/* AVX2, the sign trick: |a| (u8) times sign(a) * w (s8) never saturates vpmaddubsw when no
   w is -128 (checked at pack time) */
#define RLX_IGP_SIGN(R, V)                                                                 \
    { const __m256i va = _mm256_xor_si256(_mm256_set1_epi32(V), fl);                       \
      const __m256i ua = _mm256_abs_epi8(va);  /* the XOR with 0 folds away */                                              \
      c##R##0 = _mm256_add_epi32(c##R##0, _mm256_madd_epi16(                               \
          _mm256_maddubs_epi16(ua, _mm256_sign_epi8(b0, va)), ones));                      \
      c##R##1 = _mm256_add_epi32(c##R##1, _mm256_madd_epi16(                               \
          _mm256_maddubs_epi16(ua, _mm256_sign_epi8(b1, va)), ones)); }

/* the k loop from p (declared by the caller) on, four inputs a step */
#define RLX_IGP_STEPS(STEP)                                                                \
    for (; p + 4 <= k; p += 4, bp += 64) {                                                 \
        const __m256i b0 = _mm256_loadu_si256((const __m256i *)bp);                        \
        const __m256i b1 = _mm256_loadu_si256((const __m256i *)(bp + 32));                 \
        int32_t v0, v1, v2, v3;                                                            \
        memcpy(&v0, a0 + p, 4); memcpy(&v1, a1 + p, 4);                                    \
        memcpy(&v2, a2 + p, 4); memcpy(&v3, a3 + p, 4);                                    \
        STEP(0, v0) STEP(1, v1) STEP(2, v2) STEP(3, v3)                                    \
    }                                                                                      \
    if (p < k) {                                                                           \
        const __m256i b0 = _mm256_loadu_si256((const __m256i *)bp);                        \
        const __m256i b1 = _mm256_loadu_si256((const __m256i *)(bp + 32));                 \
        STEP(0, rlx_igp_quad(a0, p, k)) STEP(1, rlx_igp_quad(a1, p, k))                    \
        STEP(2, rlx_igp_quad(a2, p, k)) STEP(3, rlx_igp_quad(a3, p, k))                    \
    }

/* a 4 x 16 AVX2 tile whose k loop is STEP (the sign trick here, the w7 step below); one
   instantiation per offset, so that x's offset (FLIP) is a constant and takes no register */
#define RLX_IGP_TILE_AVX2(NAME, FLIP, STEP)                                                \
__attribute__((target("avx2")))                                                            \
static void NAME(const uint8_t *const *a, int flip, const int8_t *bp, int64_t k,           \
                 int32_t *out) {                                                           \
    const uint8_t *a0 = a[0], *a1 = a[1], *a2 = a[2], *a3 = a[3];                          \
    const __m256i ones = _mm256_set1_epi16(1), fl = _mm256_set1_epi8((char)FLIP);          \
    (void)flip;                                                                            \
    RLX_IGP_ZERO8;                                                                         \
    int64_t p = 0;                                                                         \
    RLX_IGP_STEPS(STEP)                                                                    \
    RLX_IGP_STORE8;                                                                        \
}
RLX_IGP_TILE_AVX2(rlx_igp_tile_avx2_s, 0, RLX_IGP_SIGN)
RLX_IGP_TILE_AVX2(rlx_igp_tile_avx2_u, 0x80, RLX_IGP_SIGN)

/* AVX2, 7-bit weights (w7): u8 x (w in [-64, 63]) pairs are at most 2 * 255 * 64 = 32640, so
   vpmaddubsw cannot saturate and needs no sign trick (x offset to u8 by FLIP, as for VNNI) */
#define RLX_IGP_W7(R, V)                                                                   \
    { const __m256i va = _mm256_xor_si256(_mm256_set1_epi32(V), fl);                       \
      c##R##0 = _mm256_add_epi32(c##R##0, _mm256_madd_epi16(                               \
          _mm256_maddubs_epi16(va, b0), ones));                                            \
      c##R##1 = _mm256_add_epi32(c##R##1, _mm256_madd_epi16(                               \
          _mm256_maddubs_epi16(va, b1), ones)); }
RLX_IGP_TILE_AVX2(rlx_igp_tile_w7_s, 0x80, RLX_IGP_W7)
RLX_IGP_TILE_AVX2(rlx_igp_tile_w7_u, 0, RLX_IGP_W7)

/* AVX2, 7-bit weights and x in [0, 127] (dynamic_int_linear's 7-bit rows, offset by 64): four
   products are at most 4 * 127 * 64 = 32512, so the i16 pair sums of two groups of four inputs
   (k..k+3 and k+4..k+7, adjacent in the panel) add in i16 exactly before one vpmaddwd widens
   them: three multiplier instructions per 64 multiply-adds instead of four (the multiplier
   port is what bounds these tiles on AVX2 CPUs without VNNI) */
#define RLX_IGP_W77(R, AR)                                                                 \
    { int32_t v, u;                                                                        \
      memcpy(&v, AR + p, 4); memcpy(&u, AR + p + 4, 4);                                    \
      const __m256i va = _mm256_set1_epi32(v), vu = _mm256_set1_epi32(u);                  \
      c##R##0 = _mm256_add_epi32(c##R##0, _mm256_madd_epi16(_mm256_add_epi16(              \
          _mm256_maddubs_epi16(va, b0), _mm256_maddubs_epi16(vu, d0)), ones));             \
      c##R##1 = _mm256_add_epi32(c##R##1, _mm256_madd_epi16(_mm256_add_epi16(              \
          _mm256_maddubs_epi16(va, b1), _mm256_maddubs_epi16(vu, d1)), ones)); }
/* the four panel vectors of a w77 step: two groups of four inputs, 16 columns each */
#define RLX_IGP_W77_LOADS                                                                  \
    const __m256i b0 = _mm256_loadu_si256((const __m256i *)bp);                            \
    const __m256i b1 = _mm256_loadu_si256((const __m256i *)(bp + 32));                     \
    const __m256i d0 = _mm256_loadu_si256((const __m256i *)(bp + 64));                     \
    const __m256i d1 = _mm256_loadu_si256((const __m256i *)(bp + 96));

/* a 4 x 16 AVX2 tile that adds G inputs (G / 4 groups) in i16 per STEP (w77: 8, w66: 16),
   LOADS at the top of each step, then the last (up to G - 1) inputs a group of four at a time
   on the w7 step */
#define RLX_IGP_TILE_GROUPS(NAME, G, LOADS, STEP)                                          \
__attribute__((target("avx2")))                                                            \
static void NAME(const uint8_t *const *a, int flip, const int8_t *bp, int64_t k,           \
                 int32_t *out) {                                                           \
    const uint8_t *a0 = a[0], *a1 = a[1], *a2 = a[2], *a3 = a[3];                          \
    const __m256i ones = _mm256_set1_epi16(1), fl = _mm256_setzero_si256();                \
    (void)flip;                                                                            \
    RLX_IGP_ZERO8;                                                                         \
    int64_t p = 0;                                                                         \
    for (; p + (G) <= k; p += (G), bp += 16 * (G)) {                                       \
        LOADS                                                                              \
        STEP(0, a0) STEP(1, a1) STEP(2, a2) STEP(3, a3)                                    \
    }                                                                                      \
    RLX_IGP_STEPS(RLX_IGP_W7)                                                              \
    RLX_IGP_STORE8;                                                                        \
}
RLX_IGP_TILE_GROUPS(rlx_igp_tile_w77, 8, RLX_IGP_W77_LOADS, RLX_IGP_W77)

/* AVX2, 6-bit weights (w6: every byte in [-32, 31]) and x in [0, 127]: eight products are at
   most 8 * 127 * 32 = 32512, so the i16 pair sums of four groups of four inputs (k..k+15,
   adjacent in the panel) add in i16 exactly before one vpmaddwd: five multiplier
   instructions per 128 multiply-adds (w77: six). The panel is read from memory by each
   row's vpmaddubsw (16 vector registers hold the accumulators and broadcasts, not it). */
#define RLX_IGP_L(O) _mm256_loadu_si256((const __m256i *)(bp + (O)))
#define RLX_IGP_W66(R, AR)                                                                 \
    { int32_t v0, v1, v2, v3;                                                              \
      memcpy(&v0, AR + p, 4); memcpy(&v1, AR + p + 4, 4);                                  \
      memcpy(&v2, AR + p + 8, 4); memcpy(&v3, AR + p + 12, 4);                             \
      const __m256i x0 = _mm256_set1_epi32(v0), x1 = _mm256_set1_epi32(v1);                \
      const __m256i x2 = _mm256_set1_epi32(v2), x3 = _mm256_set1_epi32(v3);                \
      c##R##0 = _mm256_add_epi32(c##R##0, _mm256_madd_epi16(_mm256_add_epi16(              \
          _mm256_add_epi16(_mm256_maddubs_epi16(x0, RLX_IGP_L(0)),                         \
                           _mm256_maddubs_epi16(x1, RLX_IGP_L(64))),                       \
          _mm256_add_epi16(_mm256_maddubs_epi16(x2, RLX_IGP_L(128)),                       \
                           _mm256_maddubs_epi16(x3, RLX_IGP_L(192)))), ones));             \
      c##R##1 = _mm256_add_epi32(c##R##1, _mm256_madd_epi16(_mm256_add_epi16(              \
          _mm256_add_epi16(_mm256_maddubs_epi16(x0, RLX_IGP_L(32)),                        \
                           _mm256_maddubs_epi16(x1, RLX_IGP_L(96))),                       \
          _mm256_add_epi16(_mm256_maddubs_epi16(x2, RLX_IGP_L(160)),                       \
                           _mm256_maddubs_epi16(x3, RLX_IGP_L(224)))), ones)); }
RLX_IGP_TILE_GROUPS(rlx_igp_tile_w66, 16, , RLX_IGP_W66)

/* VNNI: vpdpbusd, unsigned a (a signed x XORed with 0x80) times signed w, exact in i32 */
#define RLX_IGP_TILE_VNNI(NAME, TARGET)                                                    \
__attribute__((target(TARGET)))                                                            \
static void NAME(const uint8_t *const *a, int flip, const int8_t *bp, int64_t k,           \
                 int32_t *out) {                                                           \
    const uint8_t *a0 = a[0], *a1 = a[1], *a2 = a[2], *a3 = a[3];                          \
    const __m256i fl = _mm256_set1_epi8(flip ? (char)0x80 : 0);                            \
    RLX_IGP_ZERO8;                                                                         \
    int64_t p = 0;                                                                         \
    RLX_IGP_STEPS(NAME##_step)                                                             \
    RLX_IGP_STORE8;                                                                        \
}
#define rlx_igp_tile_avxvnni_step(R, V)                                                    \
    { const __m256i va = _mm256_xor_si256(_mm256_set1_epi32(V), fl);                       \
      c##R##0 = _mm256_dpbusd_avx_epi32(c##R##0, va, b0);                                  \
      c##R##1 = _mm256_dpbusd_avx_epi32(c##R##1, va, b1); }
#define rlx_igp_tile_vnni512_step(R, V)                                                    \
    { const __m256i va = _mm256_xor_si256(_mm256_set1_epi32(V), fl);                       \
      c##R##0 = _mm256_dpbusd_epi32(c##R##0, va, b0);                                      \
      c##R##1 = _mm256_dpbusd_epi32(c##R##1, va, b1); }
RLX_IGP_TILE_VNNI(rlx_igp_tile_avxvnni, "avx2,avxvnni")
RLX_IGP_TILE_VNNI(rlx_igp_tile_vnni512, "avx2,avx512f,avx512vl,avx512vnni")

/* AVX512-VNNI on zmm: an 8 x 16 tile, one 64-byte panel step per vector (the 16 columns'
   four bytes), eight accumulators (vpdpbusd's latency hidden by eight independent chains),
   x's four bytes broadcast per row and offset by FLIP (a constant per instantiation): half
   the multiply instructions of the 4 x 16 ymm tile above, which the panel walk of the
   dynamic, static and requantized linears uses no longer on AVX-512 */
#define RLX_IGP_Z(R)                                                                       \
    { int32_t v; memcpy(&v, a[R] + p, 4);                                                  \
      c##R = _mm512_dpbusd_epi32(c##R, _mm512_xor_si512(_mm512_set1_epi32(v), fl), b); }
#define RLX_IGP_ZT(R)                                                                      \
    c##R = _mm512_dpbusd_epi32(c##R, _mm512_xor_si512(                                     \
        _mm512_set1_epi32(rlx_igp_quad(a[R], p, k)), fl), b);
#define RLX_IGP_TILE8_VNNI512(NAME, FLIP)                                                  \
__attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni")))                            \
static void NAME(const uint8_t *const *a, int flip, const int8_t *bp, int64_t k,           \
                 int32_t *out) {                                                           \
    const __m512i fl = _mm512_set1_epi8((char)FLIP);                                       \
    __m512i c0 = _mm512_setzero_si512(), c1 = c0, c2 = c0, c3 = c0, c4 = c0, c5 = c0,      \
            c6 = c0, c7 = c0;                                                              \
    int64_t p = 0;                                                                         \
    (void)flip;                                                                            \
    for (; p + 4 <= k; p += 4, bp += 64) {                                                 \
        const __m512i b = _mm512_loadu_si512(bp);                                          \
        RLX_IGP_Z(0) RLX_IGP_Z(1) RLX_IGP_Z(2) RLX_IGP_Z(3)                                \
        RLX_IGP_Z(4) RLX_IGP_Z(5) RLX_IGP_Z(6) RLX_IGP_Z(7)                                \
    }                                                                                      \
    if (p < k) {                                                                           \
        const __m512i b = _mm512_loadu_si512(bp);                                          \
        RLX_IGP_ZT(0) RLX_IGP_ZT(1) RLX_IGP_ZT(2) RLX_IGP_ZT(3)                            \
        RLX_IGP_ZT(4) RLX_IGP_ZT(5) RLX_IGP_ZT(6) RLX_IGP_ZT(7)                            \
    }                                                                                      \
    _mm512_storeu_si512(out + 0, c0); _mm512_storeu_si512(out + 16, c1);                   \
    _mm512_storeu_si512(out + 32, c2); _mm512_storeu_si512(out + 48, c3);                  \
    _mm512_storeu_si512(out + 64, c4); _mm512_storeu_si512(out + 80, c5);                  \
    _mm512_storeu_si512(out + 96, c6); _mm512_storeu_si512(out + 112, c7);                 \
}
RLX_IGP_TILE8_VNNI512(rlx_igp_tile8_vnni512_u, 0)
RLX_IGP_TILE8_VNNI512(rlx_igp_tile8_vnni512_s, 0x80)
#endif

/* the micro-kernel for this CPU, how it offsets x (flip) and what that adds per S_b (corr);
   a_max: the largest byte of a u8 x (127 lets 7-bit weights take the w77 tile) */
static rlx_igp_tile_fn rlx_igp_pick(const rlx_igp_head *h, int a_u8, int a_max, int *flip,
                                    int *corr) {
    const int isa = rlx_igemm_isa();
    *flip = 0; *corr = 0;
#ifdef RLX_IG_X86
    if (isa == 2 || isa == 1) {
        *flip = !a_u8; *corr = a_u8 ? 0 : -128;
        return isa == 2 ? rlx_igp_tile_vnni512 : rlx_igp_tile_avxvnni;
    }
    if (isa == 3 && a_u8 && h->w6) {
        /* 6-bit weights: four u8 x w products are at most 4 * 255 * 32 = 32640, so w77's
           pairing of two groups holds for any u8 x; eight (w66) for x in [0, 127] */
        return a_max <= 127 ? rlx_igp_tile_w66 : rlx_igp_tile_w77;
    }
    if (isa == 3 && a_u8 && a_max <= 127 && !h->w7) {
        /* x in [0, 127] (7-bit codes) times any signed weight: a pair is at most
           2 * 127 * 128 = 32512, so vpmaddubsw needs no sign trick either */
        return rlx_igp_tile_w7_u;
    }
    if (isa == 3 && h->w7) {
        *corr = a_u8 ? 0 : -128;
        return !a_u8 ? rlx_igp_tile_w7_s : a_max <= 127 ? rlx_igp_tile_w77 : rlx_igp_tile_w7_u;
    }
    if (isa == 3 && !h->has_min) {
        *flip = a_u8; *corr = a_u8 ? 128 : 0;
        return a_u8 ? rlx_igp_tile_avx2_u : rlx_igp_tile_avx2_s;
    }
#endif
    (void)isa; (void)h; (void)a_max;
    *flip = a_u8;  /* the portable tile reads u8 itself: flip carries a_u8 */
    return rlx_igp_tile_c;
}

/* the store's epilogue of dynamic/static_int_linear on an mr x cols block of Y (row stride
   n), in place while it is in L1: act 1 is the exact GELU in the decomposition's order,
   ((y * (1 + erf(y * (1 / sqrt 2)))) * 0.5, on the f32 GEMMs' epilogue erf (epilogue_erf.py,
   defined here), then + the residual R (same layout as Y) */
""" + epilogue_erf.SOURCE + f"#define RLX_IG_ERF(x) {epilogue_erf.NAME}(x)\n" + r"""
static void rlx_ig_epilogue(float *y, const float *R, int mr, int cols, int64_t n, int act) {
    for (int r = 0; r < mr; ++r) {
        float *yr = y + r * n;
        const float *rr = R ? R + r * n : 0;
        if (act) {
#pragma omp simd
            for (int c = 0; c < cols; ++c)
                yr[c] = (yr[c] * (1.0f + RLX_IG_ERF(yr[c] * 0.707106781186547524f))) * 0.5f;
        }
        if (rr) {
#pragma omp simd
            for (int c = 0; c < cols; ++c) yr[c] = yr[c] + rr[c];
        }
    }
}

/* dynamic_int_linear: one row of x (k floats) to codes with its scale s = max(max|x|,
   1e-30f) / qmax (a NaN propagates as the decomposition's max does; its row then quantizes to
   0), the quantize rule clamp(round_half_even(x / s)) with NaN -> 0, stored offset to
   unsigned (code + qmax + 1: [1, 255] for qmax 127, [1, 127] for 63); returns s */
#ifdef RLX_IG_X86
/* the same in AVX2, eight floats at a time (the scalar loop's max and NaN test carry a
   dependency from one element to the next and do not vectorise); the same f32 division,
   rounding (to nearest even) and clamps, so the same bytes */
__attribute__((target("avx2")))
static float rlx_igd_quant_row_avx2(const float *x, int64_t k, float qmax, uint8_t *q) {
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    __m256 vm = _mm256_set1_ps(-INFINITY), vn = _mm256_setzero_ps();
    int64_t p = 0;
    for (; p + 8 <= k; p += 8) {
        const __m256 a = _mm256_and_ps(_mm256_loadu_ps(x + p), absmask);
        vm = _mm256_max_ps(vm, a);
        vn = _mm256_or_ps(vn, _mm256_cmp_ps(a, a, _CMP_UNORD_Q));
    }
    float lanes[8];
    _mm256_storeu_ps(lanes, vm);
    float m = -INFINITY;
    int nan = _mm256_movemask_ps(vn) != 0;
    for (int l = 0; l < 8; ++l) m = lanes[l] > m ? lanes[l] : m;
    for (; p < k; ++p) {
        const float a = fabsf(x[p]);
        m = a > m ? a : m;
        nan |= a != a;
    }
    m = m > 1e-30f ? m : 1e-30f;
    const float s = nan ? NAN : m / qmax, off = qmax + 1.0f;
    const __m256 vs = _mm256_set1_ps(s), lo = _mm256_set1_ps(-128.0f),
                 hi = _mm256_set1_ps(127.0f), vo = _mm256_set1_ps(off);
    for (p = 0; p + 8 <= k; p += 8) {
        __m256 t = _mm256_round_ps(_mm256_div_ps(_mm256_loadu_ps(x + p), vs),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        t = _mm256_and_ps(t, _mm256_cmp_ps(t, t, _CMP_ORD_Q));  /* NaN -> 0 */
        t = _mm256_add_ps(_mm256_min_ps(_mm256_max_ps(t, lo), hi), vo);
        const __m256i v = _mm256_cvtps_epi32(t);  /* exact: whole numbers in [0, 255] */
        const __m128i w = _mm_packs_epi32(_mm256_castsi256_si128(v),
                                          _mm256_extracti128_si256(v, 1));
        _mm_storel_epi64((__m128i *)(q + p), _mm_packus_epi16(w, w));
    }
    for (; p < k; ++p) {
        const float t = rintf(x[p] / s);
        q[p] = (uint8_t)((t != t ? 0.0f : t < -128.0f ? -128.0f : t > 127.0f ? 127.0f : t)
                         + off);
    }
    return s;
}
#endif

static float rlx_igd_quant_row(const float *x, int64_t k, float qmax, uint8_t *q) {
#ifdef RLX_IG_X86
    if (rlx_igemm_isa() != 0) return rlx_igd_quant_row_avx2(x, k, qmax, q);
#endif
    float m = -INFINITY;
    int nan = 0;
    for (int64_t p = 0; p < k; ++p) {
        const float a = fabsf(x[p]);
        m = a > m ? a : m;
        nan |= a != a;
    }
    m = m > 1e-30f ? m : 1e-30f;
    const float s = nan ? NAN : m / qmax, off = qmax + 1.0f;
    for (int64_t p = 0; p < k; ++p) {
        const float t = rintf(x[p] / s);
        q[p] = (uint8_t)((t != t ? 0.0f : t < -128.0f ? -128.0f : t > 127.0f ? 127.0f : t)
                         + off);
    }
    return s;
}

#ifdef RLX_IG_X86
/* the epilogue of a tile with all 16 columns, in AVX2: y = ((float)(t + corr * S_b) * ws) * s
   (+ bias), separate multiplies and add (no fused rounding), as the scalar loop below */
__attribute__((target("avx2")))
static void rlx_igd_store16(const int32_t *t, int mr, int32_t corr, const int32_t *colsum,
                            const float *ws, const float *bias, const float *sx, float *y,
                            int64_t n) {
    const __m256i vc = _mm256_set1_epi32(corr);
    for (int h = 0; h < 2; ++h) {
        const __m256i cs = _mm256_mullo_epi32(
            vc, _mm256_loadu_si256((const __m256i *)(colsum + 8 * h)));
        const __m256 w = _mm256_loadu_ps(ws + 8 * h);
        const __m256 b = bias ? _mm256_loadu_ps(bias + 8 * h) : _mm256_setzero_ps();
        for (int r = 0; r < mr; ++r) {
            const __m256i acc = _mm256_add_epi32(
                _mm256_loadu_si256((const __m256i *)(t + r * 16 + 8 * h)), cs);
            __m256 v = _mm256_mul_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(acc), w),
                                     _mm256_set1_ps(sx[r]));
            if (bias) v = _mm256_add_ps(v, b);
            _mm256_storeu_ps(y + r * n + 8 * h, v);
        }
    }
}
#endif

#ifdef RLX_IG_X86
__attribute__((target("avx2")))
static void rlx_igs_store16(const int32_t *t, int mr, int32_t corr, const int32_t *colsum,
                            const int32_t *bias, const float *scale, float *y, int64_t n);
#endif

/* what a finished tile's store writes: kind 0 dynamic_int_linear (f32, per-row scale), 1
   static_int_linear (f32, acc_scale), 2 requantized_int_linear (int8 codes), 3 int_linear
   (i32, + the row's zero-point term and the bias, wrapping); every kind adds
   corr * S_b[j] (the tile's offset of x, minus its zero point) first */
typedef struct {
    int kind, act;
    int32_t corr;
    int64_t n;                  /* the row stride of Y / Q / R */
    const int32_t *colsum;
    const float *ws, *fbias, *sx;                /* dynamic: w_scale, f32 bias, row scales */
    const int32_t *ibias;                        /* static, requantized: the i32 bias */
    const float *scale;                          /* static: acc_scale */
    const int32_t *mult, *shift;                 /* requantized: one entry, or one a column */
    int per_channel, out_u8;
    int32_t zp, qmin, qmax;
    float *Y;                   /* f32 output (dynamic, static), at the work item's first row */
    void *Q;                    /* int8 output (requantized), likewise */
    const float *R;             /* the residual (dynamic, static), likewise; or 0 */
    int32_t *C;                 /* int_linear's i32 output (kind 3), likewise */
    const int32_t *rowfix;      /* int_linear: K za zb - zb S_a[i] per row of the item */
} rlx_ig_store;

/* requantize's rule on one i32 (TFLite's MultiplyByQuantizedMultiplier, as the decomposition
   and numpy_ref: x * 2^left wraps in i32, trunc((x * m + nudge) / 2^31), then the rounding
   divide by 2^right, ties away from zero) */
static inline int64_t rlx_ig_rq(int32_t x, int32_t m, int32_t s) {
    const int64_t v = s > 0 ? (int64_t)(int32_t)((uint32_t)x << s) : (int64_t)x;
    const int64_t ab = v * (int64_t)m;
    int64_t h = (ab + (ab >= 0 ? ((int64_t)1 << 30) : 1 - ((int64_t)1 << 30))) / ((int64_t)1 << 31);
    if (s < 0) {
        const int64_t mask = ((int64_t)1 << -s) - 1, rem = h & mask;
        h = (h - rem) / ((int64_t)1 << -s) + (rem > (mask >> 1) + (h < 0));
    }
    return h;
}

#ifdef RLX_IG_X86
/* rlx_ig_rq on the 16 columns of a tile, eight lanes at a time, then + zp, the clamp and the
   codes packed to bytes: x * 2^left wraps (vpsllvd); x * m in i64 on the even and the odd
   lanes (vpmuldq); trunc((x * m + nudge) / 2^31) is floor((x * m + 2^30) / 2^31) for either
   sign, whose low 32 bits a logical shift gives; the rounding divide by 2^right in i32 */
__attribute__((target("avx2")))
static void rlx_igr_store16(const int32_t *t, int mr, const rlx_ig_store *st, int64_t i,
                            int64_t j) {
    const __m256i one = _mm256_set1_epi32(1), zero = _mm256_setzero_si256();
    const __m256i half30 = _mm256_set1_epi64x((int64_t)1 << 30);
    const __m256i zp = _mm256_set1_epi32(st->zp), lo = _mm256_set1_epi32(st->qmin),
                  hi = _mm256_set1_epi32(st->qmax), vc = _mm256_set1_epi32(st->corr);
    for (int h = 0; h < 2; ++h) {
        const int64_t j8 = j + 8 * h;
        __m256i add = _mm256_mullo_epi32(vc, _mm256_loadu_si256((const __m256i *)(st->colsum + j8)));
        if (st->ibias) add = _mm256_add_epi32(add, _mm256_loadu_si256((const __m256i *)(st->ibias + j8)));
        const __m256i m = st->per_channel ? _mm256_loadu_si256((const __m256i *)(st->mult + j8))
                                          : _mm256_set1_epi32(st->mult[0]);
        const __m256i s = st->per_channel ? _mm256_loadu_si256((const __m256i *)(st->shift + j8))
                                          : _mm256_set1_epi32(st->shift[0]);
        const __m256i left = _mm256_max_epi32(s, zero), right = _mm256_max_epi32(_mm256_sub_epi32(zero, s), zero);
        const __m256i mask = _mm256_sub_epi32(_mm256_sllv_epi32(one, right), one);
        const __m256i half = _mm256_srli_epi32(mask, 1), m_odd = _mm256_srli_epi64(m, 32);
        for (int r = 0; r < mr; ++r) {
            __m256i x = _mm256_add_epi32(_mm256_loadu_si256((const __m256i *)(t + r * 16 + 8 * h)), add);
            x = _mm256_sllv_epi32(x, left);
            __m256i ev = _mm256_add_epi64(_mm256_mul_epi32(x, m), half30);
            __m256i od = _mm256_add_epi64(_mm256_mul_epi32(_mm256_srli_epi64(x, 32), m_odd), half30);
            ev = _mm256_srli_epi64(ev, 31);
            od = _mm256_slli_epi64(_mm256_srli_epi64(od, 31), 32);
            __m256i q = _mm256_blend_epi32(ev, od, 0xAA);
            const __m256i rem = _mm256_and_si256(q, mask);
            const __m256i thr = _mm256_add_epi32(half, _mm256_srli_epi32(q, 31));
            q = _mm256_sub_epi32(_mm256_srav_epi32(q, right), _mm256_cmpgt_epi32(rem, thr));
            q = _mm256_min_epi32(_mm256_max_epi32(_mm256_add_epi32(q, zp), lo), hi);
            const __m128i w = _mm_packs_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));
            const __m128i b = st->out_u8 ? _mm_packus_epi16(w, w) : _mm_packs_epi16(w, w);
            _mm_storel_epi64((__m128i *)((uint8_t *)st->Q + (i + r) * st->n + j8), b);
        }
    }
}
#endif

/* the store of one finished mr x cols tile t (rows i.. of the work item, columns j..) */
static void rlx_ig_store_tile(const rlx_ig_store *st, const int32_t *t, int64_t i, int64_t j,
                              int mr, int cols) {
    const int64_t n = st->n;
    if (st->kind == 3) {
        for (int r = 0; r < mr; ++r) {
            int32_t *ci = st->C + (i + r) * n + j;
            const uint32_t rf = (uint32_t)st->rowfix[i + r];
            for (int c = 0; c < cols; ++c)
                ci[c] = (int32_t)((uint32_t)t[r * 16 + c] + rf
                                  + (uint32_t)st->corr * (uint32_t)st->colsum[j + c]
                                  + (st->ibias ? (uint32_t)st->ibias[j + c] : 0u));
        }
        return;
    }
    if (st->kind == 2) {
#ifdef RLX_IG_X86
        if (cols == 16 && rlx_igemm_isa() != 0) {
            rlx_igr_store16(t, mr, st, i, j);
            return;
        }
#endif
        for (int r = 0; r < mr; ++r)
            for (int c = 0; c < cols; ++c) {
                const int64_t jc = j + c, p = st->per_channel ? jc : 0;
                const uint32_t u = (uint32_t)t[r * 16 + c]
                                   + (uint32_t)st->corr * (uint32_t)st->colsum[jc]
                                   + (st->ibias ? (uint32_t)st->ibias[jc] : 0u);
                int64_t y = rlx_ig_rq((int32_t)u, st->mult[p], st->shift[p]) + st->zp;
                y = y < st->qmin ? st->qmin : y > st->qmax ? st->qmax : y;
                if (st->out_u8) ((uint8_t *)st->Q)[(i + r) * n + jc] = (uint8_t)y;
                else ((int8_t *)st->Q)[(i + r) * n + jc] = (int8_t)y;
            }
        return;
    }
    float *y = st->Y + i * n + j;
#ifdef RLX_IG_X86
    if (cols == 16 && rlx_igemm_isa() != 0) {  /* a whole panel: eight lanes at a time */
        if (st->kind == 0)
            rlx_igd_store16(t, mr, st->corr, st->colsum + j, st->ws + j,
                            st->fbias ? st->fbias + j : 0, st->sx + i, y, n);
        else
            rlx_igs_store16(t, mr, st->corr, st->colsum + j, st->ibias ? st->ibias + j : 0,
                            st->scale + j, y, n);
    } else
#endif
    for (int r = 0; r < mr; ++r)
        for (int c = 0; c < cols; ++c) {
            const int64_t jc = j + c;
            const uint32_t u = (uint32_t)t[r * 16 + c] + (uint32_t)st->corr * (uint32_t)st->colsum[jc];
            if (st->kind == 0) {
                const float v = ((float)(int32_t)u * st->ws[jc]) * st->sx[i + r];
                y[r * n + c] = st->fbias ? v + st->fbias[jc] : v;
            } else {
                const int32_t acc = (int32_t)(u + (st->ibias ? (uint32_t)st->ibias[jc] : 0u));
                y[r * n + c] = (float)acc * st->scale[jc];
            }
        }
    if (st->act || st->R)
        rlx_ig_epilogue(y, st->R ? st->R + i * n + j : 0, mr, cols, n, st->act);
}

/* AMX-INT8 (Sapphire Rapids and later): 1 when the int8 walk runs on tiles here (the CPU has
   AMX-INT8, RLX_IGEMM_ISA allows amx, and rlx_amx_ready: RLX_NO_AMX is unset and Linux
   granted the tile state) */
static int rlx_igemm_amx(void) {
    static int amx = -1;
    if (amx < 0) {
        int v = 0;
#if RLX_AMX_COMPILED && defined(__AMX_INT8__)
        unsigned int a, b, c, d;
        if (rlx_igemm_cap() >= 4 && rlx_igemm_isa() == 2
            && __get_cpuid_count(7, 0, &a, &b, &c, &d) && (d >> 24 & 1) && (d >> 25 & 1))
            v = rlx_amx_ready();
#endif
        amx = v;
    }
    return amx;
}

#if RLX_AMX_COMPILED && defined(__AMX_INT8__)
/* the panel walk on AMX tiles (k a multiple of 64): 32 x 32 blocks of S_ab in four 16 x 16
   i32 tiles (tmm0-3), x's rows as two 16 x 64-byte tiles (tmm4, 5), two panels in tmm6, 7.
   A panel's 16 groups of four inputs are 16 rows of 64 bytes, the four bytes of each of its
   16 columns: exactly the B operand of TDPBUSD (u8 x) / TDPBSSD (i8 x), so the packed
   weight is read as it is. Each 16 x 16 tile goes to the store (rlx_ig_store_tile) as the
   4 x 16 ones do. Rows past the last are read from zero-padded copies. Returns 0 (nothing
   done) when that copy's buffer cannot be allocated. */
#define RLX_AMX_DP(C, A, B) do { if (a_signed) _tile_dpbssd(C, A, B);                      \
                                  else _tile_dpbusd(C, A, B); } while (0)
__attribute__((target("amx-tile,amx-int8")))
static int rlx_igp_amx_walk(const void *packed, const uint8_t *qa, int64_t lda, int64_t rows,
                            int64_t k, int64_t j0, int64_t j1, int a_signed,
                            const rlx_ig_store *st) {
    const rlx_igp_head *h = (const rlx_igp_head *)packed;
    const int8_t *panels = (const int8_t *)packed + 64;
    const int64_t pstride = h->k4 * 64;
    uint8_t *pad = 0;
    if (rows % 16) {
        pad = (uint8_t *)calloc((size_t)(16 * k), 1);
        if (!pad) return 0;
        memcpy(pad, qa + (rows - rows % 16) * lda, (size_t)(rows % 16 * k));
        if (lda != k)
            for (int64_t r = 0; r < rows % 16; ++r)
                memcpy(pad + r * k, qa + (rows - rows % 16 + r) * lda, (size_t)k);
    }
    rlx_ig_store s2 = *st;
    if (a_signed) s2.corr += 128;  /* TDPBSSD reads x signed: no offset of x to undo */
    rlx_amx_tilecfg cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int t = 0; t < 8; ++t) { cfg.colsb[t] = 64; cfg.rows[t] = 16; }
    _tile_loadconfig(&cfg);
    int32_t c[4][256] __attribute__((aligned(64)));
    for (int64_t i = 0; i < rows; i += 32) {
        const int m0 = rows - i < 16 ? (int)(rows - i) : 16;
        const int m1 = rows - i <= 16 ? 0 : rows - i - 16 < 16 ? (int)(rows - i - 16) : 16;
        const uint8_t *a0 = m0 < 16 ? pad : qa + i * lda;
        const uint8_t *a1 = m1 < 16 ? pad : qa + (i + 16) * lda;
        const int64_t l0 = m0 < 16 ? k : lda, l1 = m1 < 16 ? k : lda;
        for (int64_t j = j0; j < j1; j += 32) {
            const int two = j + 16 < j1;
            const int8_t *b0 = panels + (j / 16) * pstride, *b1 = b0 + pstride;
            _tile_zero(0); _tile_zero(1); _tile_zero(2); _tile_zero(3);
            for (int64_t p = 0; p < k; p += 64) {
                _tile_loadd(4, a0 + p, l0);
                _tile_loadd(6, b0 + p * 16, 64);
                if (two) _tile_loadd(7, b1 + p * 16, 64);
                if (m1) _tile_loadd(5, a1 + p, l1);
                RLX_AMX_DP(0, 4, 6);
                if (two) RLX_AMX_DP(1, 4, 7);
                if (m1) { RLX_AMX_DP(2, 5, 6); if (two) RLX_AMX_DP(3, 5, 7); }
            }
            const int c0 = j1 - j < 16 ? (int)(j1 - j) : 16;
            const int c1 = two ? (j1 - j - 16 < 16 ? (int)(j1 - j - 16) : 16) : 0;
            _tile_stored(0, c[0], 64);
            rlx_ig_store_tile(&s2, c[0], i, j, m0, c0);
            if (two) { _tile_stored(1, c[1], 64); rlx_ig_store_tile(&s2, c[1], i, j + 16, m0, c1); }
            if (m1) {
                _tile_stored(2, c[2], 64);
                rlx_ig_store_tile(&s2, c[2], i + 16, j, m1, c0);
                if (two) {
                    _tile_stored(3, c[3], 64);
                    rlx_ig_store_tile(&s2, c[3], i + 16, j + 16, m1, c1);
                }
            }
        }
    }
    _tile_release();
    free(pad);
    return 1;
}
#endif

/* the panel walk's loop: columns [j0, j1) (j0 a multiple of 16) by rows of mr_max (4 for
   the ymm tiles, 8 for the zmm one), each tile computed by `tile` into t (mr_max x 16 i32),
   then stored while it is in L1; a last short tile repeats its last row (the store drops it) */
static inline void rlx_ig_walk_tiles(const int8_t *panels, int64_t k4, const uint8_t *qa,
                                     int64_t lda, int64_t rows, int64_t k, int64_t j0,
                                     int64_t j1, rlx_igp_tile_fn tile, int mr_max, int flip,
                                     int32_t *t, const rlx_ig_store *st) {
    for (int64_t j = j0; j < j1; j += 16) {
        const int8_t *bp = panels + (j / 16) * k4 * 64;
        const int cols = j1 - j < 16 ? (int)(j1 - j) : 16;
        for (int64_t i = 0; i < rows; i += mr_max) {
            const int mr = rows - i < mr_max ? (int)(rows - i) : mr_max;
            const uint8_t *a[8];
            for (int r = 0; r < mr_max; ++r) a[r] = qa + (i + (r < mr ? r : mr - 1)) * lda;
            tile(a, flip, bp, k, t);
            rlx_ig_store_tile(st, t, i, j, mr, cols);
        }
    }
}

/* the panel walk of every linear on a packed weight: columns [j0, j1) (j0 a multiple of 16)
   of `rows` rows of codes qa (row stride lda), on AMX tiles, the 8 x 16 zmm tile or the
   picked 4 x 16 tile (rlx_ig_walk_tiles) */
static void rlx_ig_walk(const void *packed, const uint8_t *qa, int64_t lda, int64_t rows,
                        int64_t k, int64_t j0, int64_t j1, rlx_igp_tile_fn tile, int flip,
                        const rlx_ig_store *st) {
    const rlx_igp_head *h = (const rlx_igp_head *)packed;
    const int8_t *panels = (const int8_t *)packed + 64;
#if RLX_AMX_COMPILED && defined(__AMX_INT8__)
    /* the AMX pick implies the avx512vnni tile's: flip says x is signed */
    if (k % 64 == 0 && rlx_igemm_amx()
        && rlx_igp_amx_walk(packed, qa, lda, rows, k, j0, j1, flip, st))
        return;
#endif
#ifdef RLX_IG_X86
    if (tile == rlx_igp_tile_vnni512) {  /* AVX512-VNNI: the 8 x 16 zmm tiles */
        int32_t t8[8 * 16];
        rlx_ig_walk_tiles(panels, h->k4, qa, lda, rows, k, j0, j1,
                          flip ? rlx_igp_tile8_vnni512_s : rlx_igp_tile8_vnni512_u, 8, flip,
                          t8, st);
        return;
    }
#endif
    int32_t t[4 * 16];
    rlx_ig_walk_tiles(panels, h->k4, qa, lda, rows, k, j0, j1, tile, 4, flip, t, st);
}

/* the column sums that follow the packed panels */
static const int32_t *rlx_igp_colsum(const void *packed) {
    const rlx_igp_head *h = (const rlx_igp_head *)packed;
    return (const int32_t *)((const int8_t *)packed + 64 + h->np * h->k4 * 64);
}

/* rows [i0, i1) x columns [j0, j1) (j0 a multiple of 16) of C (m x n, i32) =
   (A - za)(W - zb)^T (+ bias), A (m x k) bytes (u8 or i8), W (n x k, i8) packed by
   rlx_igp_pack: the panel walk (so AVX-512's zmm tile and AMX tiles take it too) with the
   zero-point terms and the bias in the store; W itself is read only when the packed tile
   cannot take it */
static void rlx_igp_block(int64_t i0, int64_t i1, int64_t j0, int64_t j1, int64_t n,
                          int64_t k, const void *A, int a_u8, int32_t za, const void *packed,
                          const void *W, int32_t zb, const int32_t *bias, int32_t *C) {
    const rlx_igp_head *h = (const rlx_igp_head *)packed;
    if (h->has_min && rlx_igemm_isa() == 3) {
        /* a -128 weight on AVX2 (QAT's full-range weights): the sign trick cannot negate it,
           and the portable tile is slow; the row-major dot kernels widen to 16 bits, exact */
        rlx_igemm_block(i0, i1, j0, j1, n, k, A, a_u8, za, W, 0, zb, bias, C);
        return;
    }
    const int64_t rows = i1 - i0;
    const uint8_t *a = (const uint8_t *)A + i0 * k;
    int32_t *rowfix = (int32_t *)malloc((size_t)(rows > 0 ? rows : 1) * sizeof(int32_t));
    if (!rowfix) return;
    const uint32_t fixed = (uint32_t)k * (uint32_t)za * (uint32_t)zb;
    for (int64_t r = 0; r < rows; ++r) {
        int32_t sa = 0;
        if (zb) {
            const uint8_t *ar = a + r * k;
            if (a_u8) for (int64_t p = 0; p < k; ++p) sa += ar[p];
            else for (int64_t p = 0; p < k; ++p) sa += (int8_t)ar[p];
        }
        rowfix[r] = (int32_t)(fixed - (uint32_t)zb * (uint32_t)sa);
    }
    int flip, corr;
    const rlx_igp_tile_fn tile = rlx_igp_pick(h, a_u8, 255, &flip, &corr);
    rlx_ig_store st = {0};
    st.kind = 3; st.n = n; st.colsum = rlx_igp_colsum(packed);
    st.corr = corr - za; st.ibias = bias; st.rowfix = rowfix; st.C = C + i0 * n;
    rlx_ig_walk(packed, a, k, rows, k, j0, j1, tile, flip, &st);
    free(rowfix);
}

/* rows [i0, i1) x columns [j0, j1) (j0 a multiple of 16) of Y (m x n, f32) from X (m x k,
   f32) and W packed by rlx_igp_pack: the rows quantized once into a buffer of this work
   item (codes in [-qmax, qmax], offset by qmax + 1 to unsigned), the packed tile, then
   y = ((float)acc * ws[j]) * s_i (+ bias[j]), the order of the decomposition's dequantize,
   mul and add */
static void rlx_igd_block(int64_t i0, int64_t i1, int64_t j0, int64_t j1, int64_t n,
                          int64_t k, const float *X, int qmax, const void *packed,
                          const int8_t *W, const float *ws, const float *bias, float *Y,
                          int act, const float *R) {
    const int epi = act || R;
    const int64_t rows = i1 - i0;
    const int32_t off = qmax + 1;
    uint8_t *qa = (uint8_t *)malloc((size_t)(rows * k + 4));
    float *sx = (float *)malloc((size_t)rows * sizeof(float));
    int32_t *tmp = packed ? 0 : (int32_t *)malloc((size_t)(rows * n) * sizeof(int32_t));
    if (!qa || !sx || (!packed && !tmp)) { free(qa); free(sx); free(tmp); return; }
    for (int64_t r = 0; r < rows; ++r)
        sx[r] = rlx_igd_quant_row(X + (i0 + r) * k, k, (float)qmax, qa + r * k);
    if (!packed) {  /* no packed weight (prepacking off): the row-major dot kernels */
        rlx_igemm_block(0, rows, j0, j1, n, k, qa, 1, off, W, 0, 0, 0, tmp);
        for (int64_t r = 0; r < rows; ++r)
            for (int64_t j = j0; j < j1; ++j) {
                const float v = ((float)tmp[r * n + j] * ws[j]) * sx[r];
                Y[(i0 + r) * n + j] = bias ? v + bias[j] : v;
            }
        if (epi) rlx_ig_epilogue(Y + i0 * n + j0, R ? R + i0 * n + j0 : 0, (int)rows,
                                 (int)(j1 - j0), n, act);
        free(qa); free(sx); free(tmp);
        return;
    }
    int flip, corr;
    /* a -128 weight on AVX2 takes the portable tile (exact; PTQ weights never hold one) */
    const rlx_igp_tile_fn tile = rlx_igp_pick((const rlx_igp_head *)packed, 1, 2 * qmax + 1,
                                              &flip, &corr);
    rlx_ig_store st = {0};
    st.kind = 0; st.act = act; st.n = n; st.colsum = rlx_igp_colsum(packed);
    st.corr = corr - off;  /* the tile's sum is over the offset codes: take off * S_b away */
    st.ws = ws; st.fbias = bias; st.sx = sx; st.Y = Y + i0 * n; st.R = R ? R + i0 * n : 0;
    rlx_ig_walk(packed, qa, k, rows, k, j0, j1, tile, flip, &st);
    free(qa);
    free(sx);
}

/* static_int_linear: one row of x (k floats) to codes with the fixed scale s and zero point
   zp, clamp(round_half_even(x / s) + zp, lo, hi) with NaN -> nanc (clamp(0)), the quantize
   rule in f32 (an f32 division), stored offset to unsigned (code - lo: [0, hi - lo]) */
static inline uint8_t rlx_igs_code(float x, float s, float zp, float lo, float hi, float nanc) {
    float t = rintf(x / s) + zp;
    t = t != t ? nanc : t < lo ? lo : t > hi ? hi : t;
    return (uint8_t)(t - lo);
}

#ifdef RLX_IG_X86
/* the same, eight floats at a time: the same division, rounding and clamps, so the same bytes
   (the NaN test comes first: vmaxps would turn a NaN into the bound) */
__attribute__((target("avx2")))
static void rlx_igs_quant_row_avx2(const float *x, int64_t k, float s, float zp, float lo,
                                   float hi, float nanc, uint8_t *q) {
    const __m256 vs = _mm256_set1_ps(s), vz = _mm256_set1_ps(zp), vlo = _mm256_set1_ps(lo),
                 vhi = _mm256_set1_ps(hi), vn = _mm256_set1_ps(nanc);
    int64_t p = 0;
    for (; p + 8 <= k; p += 8) {
        __m256 t = _mm256_add_ps(_mm256_round_ps(_mm256_div_ps(_mm256_loadu_ps(x + p), vs),
                                                 _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC),
                                 vz);
        const __m256 ord = _mm256_cmp_ps(t, t, _CMP_ORD_Q);
        t = _mm256_blendv_ps(vn, _mm256_min_ps(_mm256_max_ps(t, vlo), vhi), ord);
        const __m256i v = _mm256_cvtps_epi32(_mm256_sub_ps(t, vlo));  /* exact: [0, 255] */
        const __m128i w = _mm_packs_epi32(_mm256_castsi256_si128(v),
                                          _mm256_extracti128_si256(v, 1));
        _mm_storel_epi64((__m128i *)(q + p), _mm_packus_epi16(w, w));
    }
    for (; p < k; ++p) q[p] = rlx_igs_code(x[p], s, zp, lo, hi, nanc);
}

/* the epilogue of a tile with all 16 columns: y = (float)(t + corr * S_b + bias) * scale */
__attribute__((target("avx2")))
static void rlx_igs_store16(const int32_t *t, int mr, int32_t corr, const int32_t *colsum,
                            const int32_t *bias, const float *scale, float *y, int64_t n) {
    const __m256i vc = _mm256_set1_epi32(corr);
    for (int h = 0; h < 2; ++h) {
        __m256i cs = _mm256_mullo_epi32(vc, _mm256_loadu_si256((const __m256i *)(colsum + 8 * h)));
        if (bias) cs = _mm256_add_epi32(cs, _mm256_loadu_si256((const __m256i *)(bias + 8 * h)));
        const __m256 sc = _mm256_loadu_ps(scale + 8 * h);
        for (int r = 0; r < mr; ++r) {
            const __m256i acc = _mm256_add_epi32(
                _mm256_loadu_si256((const __m256i *)(t + r * 16 + 8 * h)), cs);
            _mm256_storeu_ps(y + r * n + 8 * h, _mm256_mul_ps(_mm256_cvtepi32_ps(acc), sc));
        }
    }
}
#endif

/* `rows` rows of x (k floats each) to codes in [lo, hi] stored as code - lo (rlx_igs_code) */
static void rlx_igs_quant_rows(const float *X, int64_t rows, int64_t k, float s, int32_t zp,
                               int32_t lo, int32_t hi, uint8_t *qa) {
    const float nanc = lo > 0 ? (float)lo : hi < 0 ? (float)hi : 0.0f;
    for (int64_t r = 0; r < rows; ++r) {
        const float *x = X + r * k;
        uint8_t *q = qa + r * k;
#ifdef RLX_IG_X86
        if (rlx_igemm_isa() != 0) {
            rlx_igs_quant_row_avx2(x, k, s, (float)zp, (float)lo, (float)hi, nanc, q);
            continue;
        }
#endif
        for (int64_t p = 0; p < k; ++p)
            q[p] = rlx_igs_code(x[p], s, (float)zp, (float)lo, (float)hi, nanc);
    }
}

/* rows [i0, i1) x columns [j0, j1) (j0 a multiple of 16) of Y (m x n, f32) from X (m x k,
   f32) and W packed by rlx_igp_pack: the rows quantized once into a buffer of this work item
   (codes in [lo, hi] with the fixed scale s and zero point zp, stored as code - lo), the
   packed tile, then y = (float)(acc + bias[j]) * scale[j], the decomposition's dequantize */
static void rlx_igs_block(int64_t i0, int64_t i1, int64_t j0, int64_t j1, int64_t n,
                          int64_t k, const float *X, float s, int32_t zp, int32_t lo,
                          int32_t hi, const void *packed, const int8_t *W, const float *scale,
                          const int32_t *bias, float *Y, int act, const float *R) {
    const int epi = act || R;
    const int64_t rows = i1 - i0;
    const int32_t za = zp - lo;  /* the zero point of the stored (offset) codes */
    uint8_t *qa = (uint8_t *)malloc((size_t)(rows * k + 4));
    int32_t *tmp = packed ? 0 : (int32_t *)malloc((size_t)(rows * n) * sizeof(int32_t));
    if (!qa || (!packed && !tmp)) { free(qa); free(tmp); return; }
    rlx_igs_quant_rows(X + i0 * k, rows, k, s, zp, lo, hi, qa);
    if (!packed) {  /* no packed weight (prepacking off): the row-major dot kernels */
        rlx_igemm_block(0, rows, j0, j1, n, k, qa, 1, za, W, 0, 0, bias, tmp);
        for (int64_t r = 0; r < rows; ++r)
            for (int64_t j = j0; j < j1; ++j)
                Y[(i0 + r) * n + j] = (float)tmp[r * n + j] * scale[j];
        if (epi) rlx_ig_epilogue(Y + i0 * n + j0, R ? R + i0 * n + j0 : 0, (int)rows,
                                 (int)(j1 - j0), n, act);
        free(qa); free(tmp);
        return;
    }
    int flip, corr;
    const rlx_igp_tile_fn tile = rlx_igp_pick((const rlx_igp_head *)packed, 1, hi - lo, &flip,
                                              &corr);
    rlx_ig_store st = {0};
    st.kind = 1; st.act = act; st.n = n; st.colsum = rlx_igp_colsum(packed);
    st.corr = corr - za; st.ibias = bias; st.scale = scale;
    st.Y = Y + i0 * n; st.R = R ? R + i0 * n : 0;
    rlx_ig_walk(packed, qa, k, rows, k, j0, j1, tile, flip, &st);
    free(qa);
}

/* requantized_int_linear: rows [i0, i1) x columns [j0, j1) (j0 a multiple of 16) of Q (m x n
   codes) from A (m x k; a_kind 0: i8 codes, 1: u8 codes, read in place; 2: f32, quantized
   into a buffer of this work item as static_int_linear's, scale s, codes [lo, hi]; zero point
   za) and W packed by rlx_igp_pack: the packed tile, then the store adds the bias and
   requantizes (TFLite's rule, one (mult, shift) or one per column), + zp, clamped to
   [qmin, qmax] */
static void rlx_igr_block(int64_t i0, int64_t i1, int64_t j0, int64_t j1, int64_t n,
                          int64_t k, const void *A, int a_kind, int32_t za, float s,
                          int32_t lo, int32_t hi, const void *packed, const int8_t *W,
                          const int32_t *bias, const int32_t *mult, const int32_t *shift,
                          int per_channel, int32_t zp, int32_t qmin, int32_t qmax, int out_u8,
                          void *Q) {
    const int64_t rows = i1 - i0;
    const uint8_t *a = (const uint8_t *)A + i0 * k;
    uint8_t *qa = 0;
    int a_u8 = a_kind == 1, a_max = 255;
    if (a_kind == 2) {
        qa = (uint8_t *)malloc((size_t)(rows * k + 4));
        if (!qa) return;
        rlx_igs_quant_rows((const float *)A + i0 * k, rows, k, s, za, lo, hi, qa);
        a = qa; a_u8 = 1; a_max = hi - lo; za -= lo;  /* codes stored as code - lo */
    }
    rlx_ig_store st = {0};
    st.kind = 2; st.n = n; st.ibias = bias; st.mult = mult; st.shift = shift;
    st.per_channel = per_channel; st.out_u8 = out_u8; st.zp = zp; st.qmin = qmin;
    st.qmax = qmax; st.Q = (uint8_t *)Q + i0 * n;
    const rlx_igp_head *h = (const rlx_igp_head *)packed;
    if (!packed || (h->has_min && rlx_igemm_isa() == 3)) {
        /* no packed weight (prepacking off), or a -128 weight on AVX2: the row-major dot
           kernels (exact for every byte), then the store's rule on their sums */
        int32_t *tmp = (int32_t *)malloc((size_t)(rows * n) * sizeof(int32_t));
        if (!tmp) { free(qa); return; }
        rlx_igemm_block(0, rows, j0, j1, n, k, a, a_u8, za, W, 0, 0, bias, tmp);
        for (int64_t r = 0; r < rows; ++r)
            for (int64_t j = j0; j < j1; ++j) {
                const int64_t p = per_channel ? j : 0;
                int64_t y = rlx_ig_rq(tmp[r * n + j], mult[p], shift[p]) + zp;
                y = y < qmin ? qmin : y > qmax ? qmax : y;
                if (out_u8) ((uint8_t *)st.Q)[r * n + j] = (uint8_t)y;
                else ((int8_t *)st.Q)[r * n + j] = (int8_t)y;
            }
        free(tmp);
        free(qa);
        return;
    }
    int flip, corr;
    const rlx_igp_tile_fn tile = rlx_igp_pick(h, a_u8, a_max, &flip, &corr);
    st.corr = corr - za;
    st.colsum = rlx_igp_colsum(packed);
    rlx_ig_walk(packed, a, k, rows, k, j0, j1, tile, flip, &st);
    free(qa);
}
#endif
"""
