"""The CPU's direct convolution on blocked channels, with the filter prepacked at bind time.

ONNX Runtime's MLAS runs convolutions on an NCHWc layout (channels in blocks of 8 with AVX2,
each pixel's 8 channels contiguous) with direct kernels: a register tile of output channel
vectors for a few output pixels, an input value broadcast per channel and tap. rlx's implicit
GEMM (conv.py) puts the pixels along the vector instead: a 7x7 output (49 pixels) fills 4
tiles of 16 columns, 23% of them padding, and every call reads the filter in OIHW order.

Here a convolution of one group is a GEMM with M = output pixels, N = output channels and
K = (input channel block, tap, channel in the block):

- the filter is packed once per binding (prepack.py, kind ``conv``) into panels of 16 output
  channels, K rows of 16 floats each (``rlx_cb_pack``): the tile reads two vectors per K step,
  one contiguous stream;
- the input rows an item needs are copied once per call into a padded blocked copy
  (``rlx_cb_fill``: c/8 blocks of rows x padded width x 8 floats, zeros for the padding and
  the channels past c), so the tile's K step for pixel i is one broadcast at a fixed offset
  from that pixel's own pointer, whatever the stride, padding or dilation;
- the register tile is 6 pixels x 16 output channels (twelve ymm accumulators, two filter
  vectors, one broadcast), pixels taken in raster order across output rows, so a 7x7 output
  is 8 full tiles and one of 1 pixel (kept exact by a tile copy per pixel count). On whole
  blocks of 8 channels the K loop is one flat list of (channel block, tap) offsets with the 8
  steps of a pair unrolled (``rlx_cb_tile8``), and the full tile is written in x86-64 asm
  (``rlx_cb_tile6``): the accumulators stay in ymm0-11 over the whole K slice. The same loop
  as intrinsics reached 31-36 GFLOP/s on ResNet-50's layers (Zen 1, 1 thread, FMA ceiling
  39.7), the asm 35-38, ONNX Runtime's MLAS 38-39;
- on AVX-512 (``RLX_CB_512``) the flat tile is ``rlx_cb_tilez``: 8 pixels x two panels (32
  output channels, two zmm a pixel, 16 accumulators of the 32 registers), the two panels read
  as two streams of the same packing, so the layout stays NCHW8c and Winograd's GEMMs take it
  too; a zmm's 16 channels are two NCHW8c blocks (two ymm stores). Emerald Rapids, 1 thread,
  single 3x3 layers (NCHW in and out, thread CPU time): 64->64 at 28x28 114 -> 218 GF/s
  (ONNX Runtime 229), 128->128 stride 2 at 28x28 batch 8 111 -> 206 (ORT 194). Its K loop
  on 8 (7) pixels is x86-64 asm (``rlx_cb_loopz``: GCC's intrinsics added a register copy
  per 8 FMAs) that prefetches the filter 2 KB ahead into L1 and, spread over the tiles of
  a K slice, the next slice into L2 (``RLX_CB_PFN``: a batch of 1 streams the 7x7 and 4x4
  layers' filters from memory, and the tiles after a slice's first read it from L1, which
  left the memory idle; ResNet-50 b1 -10%, b8 -5%), and a tile that ends with
  the epilogue prefetches its output and residual lines when it starts (``rlx_cb_pfz``);
- the tiles of 48 pixels are written to NCHW through 8 x 8 register transposes with the
  epilogue (bias, residual, max / min / clip) on the way: ``act((acc + bias) + res)``, the
  decomposition's order, as conv.py's. To NCHW8c (layout.py) the flat tiles apply the same
  epilogue to their accumulators and store them in place on the last K slice
  (``rlx_cb_epi``): MobileNetV2's 1x1 convs of K = 16-24 spent ~19% of their time on a
  separate pass over the chunk (1 thread, Zen 1, batch 8: 16->96 at 56x56 3.92 -> 3.23 ms,
  24->144 at 28x28 1.45 -> 1.32, 144->24 1.40 -> 1.28). The AVX-512 tile, where its one K
  slice is the last (most 1x1 convs), starts its sums at the bias instead (``rlx_cb_biasz``:
  an add less per zmm; the rounding then follows the bias-first order): ResNet-50's 64->256
  at 28x28 with residual and ReLU 2-3% faster on Emerald Rapids.

Where a 1x1 conv of small K loses to ONNX Runtime on AVX-512 (64->256 at 28x28, K = 64, bias +
residual + ReLU, 0.85x in profile_cnn at batch 1; Emerald Rapids, 1 thread, measured with a C
harness around rlx_cb_conv and per kernel in the network, thread CPU time, A/B in turns under
the FIFO lock): the asm K loops hold ~80% of the samples (perf, timer sampling), so they run at
~90% of the FMA peak (248 GFLOP/s), and what is left outside them is writing the output. Left
out entirely, the stores gave the conv 15% (0.141 -> 0.119 ms); the epilogue's arithmetic alone
(residual, ReLU, the half-line stores and inserts, replaced by 16 plain zmm stores) gave
nothing; ``RLX_CB_PF=0`` costs the network's expanding 1x1 convs 64->256 at 28x28 7-27%,
128->512 at 14x14 13-15%, 256->1024 at 7x7 6-10%, and in the harness the prefetch of the output
lines is all of that, the residual's none. Tried and not kept: each pair of pixels shuffled into
one full-line zmm store a block (+1% in the harness, neutral per kernel in the network), the
next tile's output lines prefetched to L2 (neutral), K slices of 128 or balanced (none faster),
chunks of 32, 64 or 96 pixels (same). The output written over a residual that dies there cost
what no residual does in the harness (2-3% less): plan_arena now lets the conv do that.

How far each 28x28 layer is from the FMA peak, alone (slowed host, Dec 6: builds loaded as
shared libraries into one process and run in turns beside 16 independent zmm FMA chains, the
peak in that process; best of 12-30 turns, FIFO): 64->256 ~80% of the peak, in place or not, hot
filter or cold (64 MB of copies in turn); 256->64 ~87%, 256->128 ~83%, 3x3 stride 2 128->128 at
28->14 ~87%; 128->512 at 14x14 ~88%, 1024->256 at 7x7 ~90%. Each tile's K loop run twice costs
64->256 1.85x: ~15% of its time is outside the K loop (the tile's start, its 16 accumulators
through memory before and after the asm, the epilogue) and the loop runs at ~94% of the peak;
256->64 and 256->128 1.9x (~8%). Nothing tried moved that 15% beyond the noise (2-4%): the
epilogue specialised per residual and activation (no branch per pixel), the upper halves stored
by vextractf64x4's memory form, no residual prefetch, ``RLX_CB_PF=0``, the near filter prefetch
at 1 or 4 KB or none, no far prefetch, K slices of 128 or 256. Taken apart (64->256 in place,
same turns): the K loops and the tiles' C alone (accumulators zeroed in the asm, no epilogue, no
output prefetch) 0.84-0.87 of the time, with the accumulators' trip through memory 0.89, the
epilogue without its stores 0.98. So ~9% is the epilogue's arithmetic and output prefetch
(RLX_CB_PF=0 alone ~1%): per zmm 5 micro-ops on the FMA ports (the residual's insert, the add,
compare + blend for the NaN-keeping ReLU, the upper half's extract), where ONNX Runtime's
NCHW16c tile (block 16 on AVX-512) needs about 2 (add, max) and no insert or extract. A one-op
ReLU that keeps NaN and gives +0 for -0 (vrangeps max with the sign cleared, right for lo >= 0)
changed nothing (0.99-1.01 of the time, 30 turns), so the count of those micro-ops alone does
not explain the 9%. A 16-channel block emulated (the epilogue's residual loads and stores as
whole zmm at NCHW16c offsets, no insert or extract) gave 0.96-0.98 in place and 0.98-1.00
without a residual: the layout is worth 2-4% on this layer, not the 9%. Without a residual (bias
+ ReLU) the same split reads 0.85-0.87 / 0.87-0.89 / 0.93-0.96 (no stores) / 1. The accumulators
cannot be register operands of the asm (16 in-out operands count 32 of GCC's 30): the trip
through memory (~4%) goes only with the epilogue inside the asm, as rlx_cb_tile6 does on AVX2.
That is ``rlx_cb_wholez`` (conv_tilez_asm.py; ``RLX_CB_WHOLEZ=0`` the earlier path, A/B): the
8 (7) pixel tiles with a full second panel start, loop and finish in one asm statement whose
operands are pointers, counts and memory slots, bit-identical. Per layer (harness as above,
base and new built from the two trees, 20 turns, FIFO, slowed host, median ratio of the turns'
times): 64->256 at 28x28 in place 0.98-0.99, 64->64 0.965, 3x3 64->64 0.97, 256->64 0.98,
256->128 0.98, 128->512 at 14x14 in place 0.98, 512->128 0.99, 1024->256 at 7x7 0.98, 3x3
256->256 0.985, 256->1024 at 7x7 in place 1.03 (best of the turns 0.995). perf (timer samples
on 64->256 in place): 83% of the conv's samples in the K loops, ~7% in the epilogue, ~2% in
the start and output prefetch, ~7% in the C between tiles (pointers, the far prefetch's
offset, the tile count's division). Since then a chunk's pixel pointers are made once (``ap``,
the same in every K slice: the flat tiles' offsets cover every channel block and slice kb
starts at kb khw) and the far prefetch's start is kept as a quotient and a remainder (no
division a tile): in the harness (base and new in turns, 20 turns, FIFO, load 3.3-3.7, Dec 7)
the median paired ratio new/base was 0.975 on 64->256 at 28x28 in place, 0.952 256->64, 0.979
256->128, 0.982 3x3 stride 2 128->128 at 28->14, 0.982 the 7x7 stem, 0.991 128->512 at 14x14
in place, 0.970 3x3 64->64, 0.984 1024->256 at 7x7; bits identical. With the 7x7 outputs' tiles
of 7 (rlx_cb_conv2's ntt) after it, ResNet-50 at 112x112 (ab_cnn, one worker per build, turns
under FIFO, load 9-10, Dec 7) ran old/new 1.032 at b1 (p50 of 30 rounds of 3 calls; 28 of the
30 rounds' fastest calls faster) and 1.028 at b8 (16 rounds of 2), ORT/new 1.252x and 1.272x.

The 3-channel stem (ResNet-50's 7x7 stride 2, 3->64 at 112x112: 0.79-0.95x ONNX Runtime at b1,
0.90-0.95x at b8 in profile_cnn) runs on rlx_cb_tilez's BW 3 asm loop, 8 pixels x 32 channels,
so each broadcast feeds two FMAs. Tried and not kept (resprof, branch ``resprof-stem4``, slowed
host, FIFO, thread CPU time): a tile of 6 pixels x 64 channels (four panels, 24 accumulators,
intrinsics), each broadcast feeding four FMAs as MLAS's NCHW kernel does. In a harness of stem +
max pool + 1x1 it read 0.966 of the time (20 rounds, 0.93-1.00), VGG's 3x3 stem 0.946, b8 0.955;
the same loop in asm 0.997. But inside ResNet-50 b1, both builds in one process alternating (60
calls each), the stem kernel itself was 1.12x slower (p50 0.441 vs 0.394 ms) and the whole
call 1.005: the harness's gain was not the stem's. What the stem loses to MLAS is still open.

Work items are (image, block of output rows); a thread alone takes every row block of an image
at once (the copy is then made once), and where every input is read in place (NCHW8c, 1x1,
unpadded) and the filter runs unit by unit, several images a call (images_per_call): each
unit of the filter is then read once for them all, not once per image. ResNet-50 at 112x112,
batch 8, 1 thread (per kernel, in turns in one process, FIFO, slowed host): the 4x4 stage's
1x1 convs 0.89-0.95 of the time, its pair 0.91, the whole call 0.988. At 224x224 (the 7x7
stage) the program compiled second in such a process ran 3-7% slower on kernels the fold does
not touch (stem, Winograd), whichever build it was; against that, 512->2048 ~0.92, 2048->512
(2 images a call) ~0.96, the pair ~0.94-0.97, in both orders. The kernel needs AVX2 + FMA
for speed; without them the same source compiles to plain C (correct, slow), but the renderer
only picks it where the own GEMM could (the compiler targets AVX2 + FMA or AVX-512) and the
rule table (use_blocked) says so. ``RLX_CONV_BLOCKED=0`` turns it off (A/B timing), ``=all``
on for every groups-1 conv.
"""

from __future__ import annotations

from dataclasses import dataclass

from rlx_core.targets.c_common.kernels import KernelEnv
from rlx_core.targets.c_common.loops import Writer
from rlx_core.targets.cpu import conv_tilez_asm
from rlx_core.targets.cpu.env import env_choice, env_count, env_flag

CB_C = 8  # input channels per block
CB_O = 16  # output channels per filter panel (two ymm)
IMPL = "rlx-conv-blocked"
IMPL_PAIR = "rlx-conv-pair"  # two convolutions summed (conv_pair.py), on rlx_cb_conv2
IMPLS = (IMPL, IMPL_PAIR)

SOURCE = r"""
#ifndef RLX_CONVB_H
#define RLX_CONVB_H
#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define RLX_CB_VEC 1
#else
#define RLX_CB_VEC 0
#endif
/* AVX-512: the flat tiles take two panels (32 output channels, two zmm) for RLX_CB_MRZ
   pixels (rlx_cb_tilez) instead of one panel for RLX_CB_MR (the ymm tiles) */
#if RLX_CB_VEC && defined(__AVX512F__)
#define RLX_CB_512 1
#else
#define RLX_CB_512 0
#endif
/* pixels per tile; pixels per transposed store; K steps of filter per pass over a chunk (a
   12 KB slice of the panel, read from L1 by every tile of the chunk); (channel block, tap)
   pairs of one pass the flat tiles take (a window of up to 8 x 8); the largest packed filter
   run chunk by chunk (rlx_cb_conv). Tuned on Zen 1 (32 KB L1d, 512 KB L2) and kept fixed:
   on Emerald Rapids (48 KB L1d, 2 MB L2) KSTEPS 384 (convs 10.43 -> 10.49 ms) and a 1 MB
   filter limit (10.15 -> 10.39) sped up no ResNet-50 conv by over 4% (profile_cnn, b1, each
   kernel's fastest of 3 x 20 calls) */
enum { RLX_CB_MR = 6, RLX_CB_MRZ = 8, RLX_CB_CHUNK = 48, RLX_CB_KSTEPS = 192, RLX_CB_TAPS = 64,
       RLX_CB_FILTER_L2 = 256 * 1024 };

/* floats of an o x c x kh x kw filter packed by rlx_cb_pack */
static inline int64_t rlx_cb_packed_floats(int64_t o, int64_t c, int64_t kh, int64_t kw) {
    return (o + 15) / 16 * 16 * (c < 8 ? c : (c + 7) / 8 * 8) * kh * kw;
}

/* channels per block: 8, or all c of them under 8 (a 3-channel stem: one block of 3, no
   zeros multiplied) */
static inline int64_t rlx_cb_bw(int64_t c) { return c < 8 ? c : 8; }

/* channel blocks per K slice (RLX_CB_KSTEPS steps, at least one block) */
static inline int64_t rlx_cb_kblocks(int64_t c, int64_t khw) {
    const int64_t bw = rlx_cb_bw(c);
    return RLX_CB_KSTEPS / (khw * bw) > 0 ? RLX_CB_KSTEPS / (khw * bw) : 1;
}

/* do the flat tiles (rlx_cb_tile8 / rlx_cb_tile6) run this filter: whole blocks of 8
   channels, a slice's (block, tap) pairs within RLX_CB_TAPS */
static inline int rlx_cb_flat(int64_t c, int64_t kh, int64_t kw) {
    return RLX_CB_VEC && c >= 8 && rlx_cb_kblocks(c, kh * kw) * kh * kw <= RLX_CB_TAPS;
}

/* does the last filter panel hold 8 or fewer output channels on the flat tiles, which then
   take it 8 wide (o = 24: a third of a 16-wide panel's FMAs were on zeros)? Not on AVX-512:
   an 8-wide FMA there takes the issue slot of a 16-wide one */
static inline int rlx_cb_tail8(int64_t o, int64_t c, int64_t kh, int64_t kw) {
    return !RLX_CB_512 && rlx_cb_flat(c, kh, kw) && o % 16 != 0 && o % 16 <= 8;
}

/* the OIHW filter into panels of 16 output channels: panel q holds K = c8n kh kw rows of 16
   floats (c8n = c rounded up to 8), row ((cb kh + ki) kw + kj) 8 + ci % 8 for channel ci of
   block cb and tap (ki, kj); zeros for the channels and output channels past c and o. A
   last panel of 8 or fewer output channels on the flat tiles (rlx_cb_tail8) has rows of 8 */
static void rlx_cb_pack(int64_t o, int64_t c, int64_t kh, int64_t kw, const float *w,
                        float *dst) {
    const int64_t khw = kh * kw, cbn = (c + 7) / 8, bw = rlx_cb_bw(c), k = cbn * bw * khw;
    const int64_t nq = (o + 15) / 16;
    for (int64_t q = 0; q < nq; ++q) {
        const int64_t pw = q == nq - 1 && rlx_cb_tail8(o, c, kh, kw) ? 8 : 16;
        for (int64_t cb = 0; cb < cbn; ++cb)
            for (int64_t t = 0; t < khw; ++t)
                for (int64_t c8 = 0; c8 < bw; ++c8) {
                    float *d = dst + q * k * 16 + ((cb * khw + t) * bw + c8) * pw;
                    const int64_t ci = cb * 8 + c8;
                    for (int64_t j = 0; j < pw; ++j) {
                        const int64_t oc = q * 16 + j;
                        d[j] = oc < o && ci < c ? w[(oc * c + ci) * khw + t] : 0.0f;
                    }
                }
    }
}

#if RLX_CB_512
/* 16 pixels of 3 planes (s, s + hw, s + 2 hw) to d as 16 (r, g, b) triples: each 16 floats of
   d one permute of r and g, then one with b. MobileNetV2's 3 x 112 x 112 stem, b8: the
   scalar copy was 0.108 ms of the conv's 0.412 (A/B with the copy left out) */
static inline void rlx_cb_fill3(const float *s, int64_t hw, float *d) {
    const __m512 r = _mm512_loadu_ps(s), g = _mm512_loadu_ps(s + hw),
                 b = _mm512_loadu_ps(s + 2 * hw);
    /* float f of d is channel f % 3 of pixel f / 3: r, g by the first index, b the second */
    const __m512i i0 = _mm512_setr_epi32(0, 16, 0, 1, 17, 0, 2, 18, 0, 3, 19, 0, 4, 20, 0, 5),
                  j0 = _mm512_setr_epi32(0, 1, 16, 3, 4, 17, 6, 7, 18, 9, 10, 19, 12, 13, 20,
                                         15),
                  i1 = _mm512_setr_epi32(21, 0, 6, 22, 0, 7, 23, 0, 8, 24, 0, 9, 25, 0, 10, 26),
                  j1 = _mm512_setr_epi32(0, 21, 2, 3, 22, 5, 6, 23, 8, 9, 24, 11, 12, 25, 14,
                                         15),
                  i2 = _mm512_setr_epi32(0, 11, 27, 0, 12, 28, 0, 13, 29, 0, 14, 30, 0, 15, 31,
                                         0),
                  j2 = _mm512_setr_epi32(26, 1, 2, 27, 4, 5, 28, 7, 8, 29, 10, 11, 30, 13, 14,
                                         31);
    _mm512_storeu_ps(d, _mm512_permutex2var_ps(_mm512_permutex2var_ps(r, i0, g), j0, b));
    _mm512_storeu_ps(d + 16, _mm512_permutex2var_ps(_mm512_permutex2var_ps(r, i1, g), j1, b));
    _mm512_storeu_ps(d + 32, _mm512_permutex2var_ps(_mm512_permutex2var_ps(r, i2, g), j2, b));
}
#endif

/* padded input rows [ylo, yhi) of one image (x: c planes of h x w) into xp: c8n / 8 blocks of
   (yhi - ylo) rows of wp = w + 2 pw pixels of 8 channels; zeros for the padding and the
   channels past c */
static void rlx_cb_fill(const rlx_conv_geo *g, const float *x, int64_t ylo, int64_t yhi,
                        float *xp) {
    const int64_t w = g->w, pw = g->pw, wp = w + 2 * pw, rows = yhi - ylo, hw = g->h * w;
    const int64_t cbn = (g->c + 7) / 8, bw = rlx_cb_bw(g->c);  /* bw floats per pixel */
    for (int64_t cb = 0; cb < cbn; ++cb) {
        const int64_t nc = g->c - cb * 8 < 8 ? g->c - cb * 8 : 8;
        for (int64_t r = ylo; r < yhi; ++r) {
            float *d = xp + ((cb * rows + (r - ylo)) * wp) * bw;
            const int64_t iy = r - g->ph;
            if (iy < 0 || iy >= g->h) {
                memset(d, 0, (size_t)(wp * bw) * sizeof(float));
                continue;
            }
            memset(d, 0, (size_t)(pw * bw) * sizeof(float));
            memset(d + (pw + w) * bw, 0, (size_t)(pw * bw) * sizeof(float));
            const float *s = x + cb * 8 * hw + iy * w;
            float *dr = d + pw * bw;
            int64_t ix = 0;
#if RLX_CB_VEC
            if (nc == 8)  /* 8 pixels of 8 planes: one 8 x 8 register transpose */
                for (; ix + 8 <= w; ix += 8) {
                    __m256 r0 = _mm256_loadu_ps(s + ix), r1 = _mm256_loadu_ps(s + hw + ix),
                           r2 = _mm256_loadu_ps(s + 2 * hw + ix),
                           r3 = _mm256_loadu_ps(s + 3 * hw + ix),
                           r4 = _mm256_loadu_ps(s + 4 * hw + ix),
                           r5 = _mm256_loadu_ps(s + 5 * hw + ix),
                           r6 = _mm256_loadu_ps(s + 6 * hw + ix),
                           r7 = _mm256_loadu_ps(s + 7 * hw + ix);
                    rlx_cb_t8(&r0, &r1, &r2, &r3, &r4, &r5, &r6, &r7);
                    float *o = dr + ix * 8;
                    _mm256_storeu_ps(o, r0); _mm256_storeu_ps(o + 8, r1);
                    _mm256_storeu_ps(o + 16, r2); _mm256_storeu_ps(o + 24, r3);
                    _mm256_storeu_ps(o + 32, r4); _mm256_storeu_ps(o + 40, r5);
                    _mm256_storeu_ps(o + 48, r6); _mm256_storeu_ps(o + 56, r7);
                }
#endif
#if RLX_CB_512
            if (bw == 3)  /* a 3-channel stem: 16 pixels a step, interleaved in registers */
                for (; ix + 16 <= w; ix += 16)
                    rlx_cb_fill3(s + ix, hw, dr + ix * 3);
#endif
            for (; ix < w; ++ix)
                for (int64_t c8 = 0; c8 < bw; ++c8)
                    dr[ix * bw + c8] = c8 < nc ? s[c8 * hw + ix] : 0.0f;
        }
    }
}

/* the epilogue a tile applies on its way out when it ends the K loop and the output is
   NCHW8c (rlx_cb_conv's lay & 2, a residual laid out as the output): y = act((acc + bias) +
   res) straight from the accumulators, the tile's pixels i at y + 8 i (the panel's second
   block bs bytes further), instead of a pass over the chunk after it (rlx_cb_store_b). With K
   = 16-27 (MobileNetV2's 1x1 convs, 3-channel stems) that pass took ~19% of the conv's time.
   rlx_cb_tile6's asm reads the fields at the offsets checked below */
typedef struct {
    float *y;           /* the tile's first pixel in the panel's first block */
    const float *res;   /* the residual there, or 0 */
    const float *bias;  /* the panel's 16 (or 8) biases, or 0 */
    int64_t bs;         /* bytes between the panel's two blocks of y (and res) */
    int64_t act;        /* rlx_conv_epi_ctx's: 1 max(., lo), 2 min(., hi) */
    float lo, hi;
} rlx_cb_epi;
_Static_assert(offsetof(rlx_cb_epi, res) == 8 && offsetof(rlx_cb_epi, bias) == 16
               && offsetof(rlx_cb_epi, bs) == 24 && offsetof(rlx_cb_epi, act) == 32
               && offsetof(rlx_cb_epi, lo) == 40 && offsetof(rlx_cb_epi, hi) == 44,
               "rlx_cb_tile6 reads rlx_cb_epi at these offsets");

#if RLX_CB_VEC
/* rlx_cb_epi e applied to the MR x (8 NV) accumulators c0 (c1) of a tile and stored */
#define RLX_CB_EPI_STORE(e, c0, c1, MR, NV) { \
    const __m256 vlo = _mm256_set1_ps((e)->lo), vhi = _mm256_set1_ps((e)->hi); \
    const __m256 eb0 = (e)->bias ? _mm256_loadu_ps((e)->bias) : _mm256_setzero_ps(); \
    const __m256 eb1 = (e)->bias && (NV) == 2 ? _mm256_loadu_ps((e)->bias + 8) : eb0; \
    const int64_t ebs = (e)->bs / (int64_t)sizeof(float); \
    _Pragma("GCC unroll 8") for (int i = 0; i < (MR); ++i) { \
        _mm256_storeu_ps((e)->y + i * 8, \
                         rlx_conv_fin8(c0[i], (e)->bias != 0, eb0, \
                                       (e)->res ? (e)->res + i * 8 : 0, (int)(e)->act, vlo, \
                                       vhi)); \
        if ((NV) == 2) \
            _mm256_storeu_ps((e)->y + ebs + i * 8, \
                             rlx_conv_fin8(c1[i], (e)->bias != 0, eb1, \
                                           (e)->res ? (e)->res + ebs + i * 8 : 0, \
                                           (int)(e)->act, vlo, vhi)); \
    } }
#endif

/* out[i * 16 + j] (+)= the sum over cbn channel blocks of pixel i's input times panel column
   j, for MR pixels whose blocked inputs start at a[i] (the first block, tap (0, 0)); cbs, rs,
   cs: floats between channel blocks, tap rows and tap columns of the blocked copy; acc: add
   to out. MR a constant at each call, so the accumulators stay in registers */
static inline __attribute__((always_inline)) void rlx_cb_tile(
        const float *const *a, const float *restrict pk, int64_t cbn, int64_t cbs,
        int64_t kh, int64_t kw, int64_t rs, int64_t cs, float *restrict out, int acc,
        const rlx_cb_epi *e, const int bw, const int MR) {
#if RLX_CB_VEC
    __m256 c0[RLX_CB_MR], c1[RLX_CB_MR];
    const float *ap[RLX_CB_MR];
    for (int i = 0; i < MR; ++i) {
        c0[i] = acc ? _mm256_loadu_ps(out + i * 16) : _mm256_setzero_ps();
        c1[i] = acc ? _mm256_loadu_ps(out + i * 16 + 8) : _mm256_setzero_ps();
        ap[i] = a[i];
    }
    for (int64_t cb = 0; cb < cbn; ++cb)
        for (int64_t ki = 0; ki < kh; ++ki)
            for (int64_t kj = 0; kj < kw; ++kj) {
                const int64_t off = cb * cbs + ki * rs + kj * cs;
                /* not unrolled: GCC then hoists the filter loads of later steps and spills
                   accumulators (12 + 2 + 1 of the 16 ymm registers are taken) */
#pragma GCC unroll 1
                for (int c8 = 0; c8 < bw; ++c8) {
                    const __m256 b0 = _mm256_loadu_ps(pk), b1 = _mm256_loadu_ps(pk + 8);
                    pk += 16;
                    for (int i = 0; i < MR; ++i) {
                        const __m256 v = _mm256_broadcast_ss(ap[i] + off + c8);
                        c0[i] = _mm256_fmadd_ps(v, b0, c0[i]);
                        c1[i] = _mm256_fmadd_ps(v, b1, c1[i]);
                    }
                }
            }
    if (e) {  /* rlx_cb_epi: to the output (a panel of 16 output channels) */
        RLX_CB_EPI_STORE(e, c0, c1, MR, 2)
        return;
    }
    for (int i = 0; i < MR; ++i) {
        _mm256_storeu_ps(out + i * 16, c0[i]);
        _mm256_storeu_ps(out + i * 16 + 8, c1[i]);
    }
#else
    (void)e;  /* rlx_cb_conv fuses only on the vector tiles */
    if (!acc)
        for (int i = 0; i < MR * 16; ++i) out[i] = 0.0f;
    for (int64_t cb = 0; cb < cbn; ++cb)
        for (int64_t ki = 0; ki < kh; ++ki)
            for (int64_t kj = 0; kj < kw; ++kj) {
                const int64_t off = cb * cbs + ki * rs + kj * cs;
                for (int c8 = 0; c8 < bw; ++c8, pk += 16)
                    for (int i = 0; i < MR; ++i) {
                        const float v = a[i][off + c8];
                        for (int j = 0; j < 16; ++j) out[i * 16 + j] += v * pk[j];
                    }
            }
#endif
}

/* the tile on whole blocks of 8 channels (bw 8), its K loop flattened: ntap (channel
   block, tap) pairs, pair t read at offset offs[t] from each pixel's pointer, 8 K steps per
   pair unrolled; NV filter vectors per step (2: a panel of 16, 1: a last panel of 8). GCC keeps 12 + 2 + 1 ymm registers only while nothing moves a load of a
   later step above an earlier one: the empty asm with a memory clobber between steps stops
   that (it emits nothing); the arrays of accumulators stay registers while every loop over
   the pixels is unrolled (GCC's size limits would leave one rolled, and the arrays then live
   on the stack) */
#define RLX_CB_STEP8(J) { \
    const __m256 b0 = _mm256_loadu_ps(pk + 8 * NV * (J)); \
    const __m256 b1 = NV == 2 ? _mm256_loadu_ps(pk + 16 * (J) + 8) : b0; \
    _Pragma("GCC unroll 8") for (int i = 0; i < MR; ++i) { \
        const __m256 v = _mm256_broadcast_ss(a[i] + off + (J)); \
        c0[i] = _mm256_fmadd_ps(v, b0, c0[i]); \
        if (NV == 2) c1[i] = _mm256_fmadd_ps(v, b1, c1[i]); \
    } \
    __asm__ volatile("" ::: "memory"); }
#if RLX_CB_VEC
static inline __attribute__((always_inline)) void rlx_cb_tile8(
        const float *const *a, const float *restrict pk, int64_t ntap, const int64_t *offs,
        float *restrict out, int acc, const rlx_cb_epi *e, const int MR, const int NV) {
    __m256 c0[RLX_CB_MR], c1[RLX_CB_MR];
    _Pragma("GCC unroll 8") for (int i = 0; i < MR; ++i) {
        c0[i] = acc ? _mm256_loadu_ps(out + i * 16) : _mm256_setzero_ps();
        c1[i] = acc && NV == 2 ? _mm256_loadu_ps(out + i * 16 + 8) : _mm256_setzero_ps();
    }
    for (int64_t t = 0; t < ntap; ++t, pk += 64 * NV) {
        const int64_t off = offs[t];
        RLX_CB_STEP8(0) RLX_CB_STEP8(1) RLX_CB_STEP8(2) RLX_CB_STEP8(3)
        RLX_CB_STEP8(4) RLX_CB_STEP8(5) RLX_CB_STEP8(6) RLX_CB_STEP8(7)
    }
    if (e) {  /* rlx_cb_epi: to the output */
        RLX_CB_EPI_STORE(e, c0, c1, MR, NV)
        return;
    }
    _Pragma("GCC unroll 8") for (int i = 0; i < MR; ++i) {
        _mm256_storeu_ps(out + i * 16, c0[i]);
        if (NV == 2) _mm256_storeu_ps(out + i * 16 + 8, c1[i]);
    }
}
#endif

#if RLX_CB_512
/* a pixel's 16 channels of an NCHW8c tensor from its two blocks, p and p + bs floats;
   without the second block (two 0) its upper half zero */
static inline __attribute__((always_inline)) __m512 rlx_cb_ld16(const float *p, int64_t bs,
                                                               int two) {
    const __m512 lo = _mm512_castps256_ps512(_mm256_loadu_ps(p));
    if (!two) return _mm512_maskz_mov_ps(0x00ff, lo);
    return _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castps_pd(lo),
                                               _mm256_castps_pd(_mm256_loadu_ps(p + bs)), 1));
}

/* rlx_conv_fin8 on a pixel's 16 channels (a), stored to its two NCHW8c blocks y and y + bs
   (floats), the second only when two; res laid out as y, or 0 */
static inline __attribute__((always_inline)) void rlx_cb_fin16(
        __m512 a, int has_bias, __m512 b, float *y, const float *res, int64_t bs, int two,
        int act, __m512 vlo, __m512 vhi) {
    if (has_bias) a = _mm512_add_ps(a, b);
    if (res) a = _mm512_add_ps(a, rlx_cb_ld16(res, bs, two));
    if (act & 1) a = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(a, vlo, _CMP_NLE_UQ), vlo, a);
    if (act & 2) a = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(a, vhi, _CMP_NGE_UQ), vhi, a);
    _mm256_storeu_ps(y, _mm512_castps512_ps256(a));
    if (two)
        _mm256_storeu_ps(y + bs, _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a), 1)));
}

/* a finished AVX-512 tile: its MR x NV accumulators c0 (c1) through the epilogue e to an
   NCHW8c output, the unit's blocks e->bs bytes apart, of which its last panel has two
   (two16) or one (a last panel of 8 channels); without e stored to out (16 floats a pixel,
   the second panel os floats further) */
/* the epilogue's bias for a tile's panel 0 or 1 (its 16 channels, or 8 where the panel is
   the last one of 8) */
static inline __attribute__((always_inline)) __m512 rlx_cb_biasz(const rlx_cb_epi *e,
                                                                int panel, int two) {
    return _mm512_maskz_loadu_ps(two ? 0xffff : 0x00ff, e->bias + 16 * panel);
}

static inline __attribute__((always_inline)) void rlx_cb_endz(
        const __m512 *c0, const __m512 *c1, float *restrict out, int64_t os,
        const rlx_cb_epi *e, int two16, int pre, const int MR, const int NV) {
    if (e) {
        const __m512 vlo = _mm512_set1_ps(e->lo), vhi = _mm512_set1_ps(e->hi);
        const int two0 = NV == 2 || two16, add = e->bias && !pre;
        const __m512 eb0 = add ? rlx_cb_biasz(e, 0, two0) : _mm512_setzero_ps();
        const __m512 eb1 = add && NV == 2 ? rlx_cb_biasz(e, 1, two16) : eb0;
        const int64_t bs = e->bs / (int64_t)sizeof(float);
        _Pragma("GCC unroll 16") for (int i = 0; i < MR; ++i) {
            rlx_cb_fin16(c0[i], add, eb0, e->y + i * 8, e->res ? e->res + i * 8 : 0,
                         bs, two0, (int)e->act, vlo, vhi);
            if (NV == 2)
                rlx_cb_fin16(c1[i], add, eb1, e->y + 2 * bs + i * 8,
                             e->res ? e->res + 2 * bs + i * 8 : 0, bs, two16, (int)e->act,
                             vlo, vhi);
        }
        return;
    }
    _Pragma("GCC unroll 16") for (int i = 0; i < MR; ++i) {
        _mm512_storeu_ps(out + i * 16, c0[i]);
        if (NV == 2) _mm512_storeu_ps(out + os + i * 16, c1[i]);
    }
}

/* RLX_CB_PF=0 at compile time: no prefetch of a finishing tile's output and residual (A/B) */
#ifndef RLX_CB_PF
#define RLX_CB_PF 1
#endif
/* a tile that ends with the epilogue e first asks for its output lines (for writing) and
   its residual's: with K = 64 (ResNet-50's 64->256 1x1 convs) a tile computes for ~500
   cycles and then stored 16 lines that missed L1 and read 16 more; ResNet-50 batch 8 (net,
   thread CPU time) 105.6 -> 100.8 ms. Past the output's last block only a hint (never faults) */
static inline __attribute__((always_inline)) void rlx_cb_pfz(const rlx_cb_epi *e, const int MR,
                                                            const int NV) {
    const int64_t bs = e->bs / (int64_t)sizeof(float);
    _Pragma("GCC unroll 16") for (int b = 0; b < 2 * NV; ++b)
        _Pragma("GCC unroll 16") for (int l = 0; l < (MR * 8 + 15) / 16; ++l) {
            _mm_prefetch((const char *)(e->y + b * bs + l * 16), _MM_HINT_ET0);
            if (e->res) _mm_prefetch((const char *)(e->res + b * bs + l * 16), _MM_HINT_T0);
        }
}

/* the accumulators of an AVX-512 tile: zero, (acc) the partial sums in out, or (pre: the
   tile's one K slice with an epilogue that has a bias) the bias, which then saves the
   epilogue an add per accumulator */
#define RLX_CB_STARTZ(MR, NV) \
    __m512 c0[RLX_CB_MRZ], c1[RLX_CB_MRZ]; \
    const int pre = !acc && e && e->bias; \
    const __m512 s0 = pre ? rlx_cb_biasz(e, 0, (NV) == 2 || two16) : _mm512_setzero_ps(); \
    const __m512 s1 = pre && (NV) == 2 ? rlx_cb_biasz(e, 1, two16) : _mm512_setzero_ps(); \
    _Pragma("GCC unroll 16") for (int i = 0; i < (MR); ++i) { \
        c0[i] = acc ? _mm512_loadu_ps(out + i * 16) : s0; \
        c1[i] = acc && (NV) == 2 ? _mm512_loadu_ps(out + os + i * 16) : s1; \
    } \
    if (RLX_CB_PF && e) rlx_cb_pfz(e, (MR), (NV));

/* the flat tile on AVX-512: MR pixels x NV panels of 16 output channels, one zmm each (MR NV
   <= 16 accumulators of the 32 registers, so the broadcast of a pixel's input feeds two
   FMAs), otherwise as rlx_cb_tile8: ntap (block, tap) pairs at offs[t], BW K steps of a pair
   unrolled (8; 3 for a 3-channel stem's taps). The second panel is pks floats after the first in the filter; out, os, e and
   two16 as rlx_cb_endz's */
#define RLX_CB_STEPZ(J) { \
    const __m512 b0 = _mm512_loadu_ps(pk + 16 * (J)); \
    const __m512 b1 = NV == 2 ? _mm512_loadu_ps(pk + pks + 16 * (J)) : b0; \
    _Pragma("GCC unroll 16") for (int i = 0; i < MR; ++i) { \
        const __m512 v = _mm512_set1_ps(a[i][off + (J)]); \
        c0[i] = _mm512_fmadd_ps(v, b0, c0[i]); \
        if (NV == 2) c1[i] = _mm512_fmadd_ps(v, b1, c1[i]); \
    } }
#ifndef RLX_CB_ASMZ
#define RLX_CB_ASMZ 1
#endif
#ifndef RLX_CB_WHOLEZ
#define RLX_CB_WHOLEZ 1
#endif
/* not under AddressSanitizer (RLX_CPU_SANITIZE): its frame pointer leaves the 8-pixel asm
   fewer general registers than its 14 pointer operands (GCC: 'asm' operand has impossible
   constraints), and ASan cannot see inside an asm statement anyway: the sanitized build checks
   the intrinsics' form of the same tile */
#if RLX_CB_ASMZ && defined(__x86_64__) && defined(__GNUC__) && !defined(__SANITIZE_ADDRESS__)
#define RLX_CB_ZP(J, I, H, R) "vbroadcastss " #J "*4(%[a" #I "],%[off],4), %%zmm" #R "\n\t" \
    "vfmadd231ps %%zmm16, %%zmm" #R ", %%zmm" #I "\n\t" \
    "vfmadd231ps %%zmm17, %%zmm" #R ", %%zmm" #H "\n\t"
/* RLX_CB_PFK: bytes ahead each K step prefetches both panels of the filter into L1 (the
   near prefetch; 0: none; A/B). At a batch of 1 the 7x7 and 4x4 layers stream 0.5-8 MB
   filters from memory for 16-49 pixels, which the hardware prefetcher alone left waiting:
   ResNet-50 b1 (net, thread CPU time, in turns, loaded) 16.0 -> 13.9 ms at 4 KB, 13.5 at
   8 KB (b8 89.9 -> 84-85). With the far prefetch (RLX_CB_PFN) bringing the next slice into
   L2, 2 KB is enough and leaves L1 to the slice (see RLX_CB_PFN) */
#ifndef RLX_CB_PFK
#define RLX_CB_PFK 2048
#endif
#if RLX_CB_PFK
#define RLX_CB_ZPF(J) "prefetcht0 " #J "*64+%c[pfk](%[pk])\n\t" \
                      "prefetcht0 " #J "*64+%c[pfk](%[pk],%[pks])\n\t"
#else
#define RLX_CB_ZPF(J)
#endif
#define RLX_CB_ZF(J) RLX_CB_ZPF(J) "vmovups " #J "*64(%[pk]), %%zmm16\n\t" \
                     "vmovups " #J "*64(%[pk],%[pks]), %%zmm17\n\t"
#define RLX_CB_Z7(J) RLX_CB_ZF(J) RLX_CB_ZP(J, 0, 8, 18) RLX_CB_ZP(J, 1, 9, 19) \
    RLX_CB_ZP(J, 2, 10, 20) RLX_CB_ZP(J, 3, 11, 21) RLX_CB_ZP(J, 4, 12, 22) \
    RLX_CB_ZP(J, 5, 13, 23) RLX_CB_ZP(J, 6, 14, 24)
#define RLX_CB_Z8(J) RLX_CB_Z7(J) RLX_CB_ZP(J, 7, 15, 25)
/* the accumulators of 7 (8) pixels: pixel i's two panels in zmm i and zmm i + 8, at
   acc + 64 i and acc + 512 + 64 i */
#define RLX_CB_ZACC7(OP) OP(0, 0) OP(1, 64) OP(2, 128) OP(3, 192) OP(4, 256) OP(5, 320) \
    OP(6, 384) OP(8, 512) OP(9, 576) OP(10, 640) OP(11, 704) OP(12, 768) OP(13, 832) \
    OP(14, 896)
#define RLX_CB_ZACC8(OP) RLX_CB_ZACC7(OP) OP(7, 448) OP(15, 960)
#define RLX_CB_ZLD(R, B) "vmovaps " #B "(%[off]), %%zmm" #R "\n\t"
#define RLX_CB_ZST(R, B) "vmovaps %%zmm" #R ", " #B "(%[off])\n\t"
/* the accumulators' address (acc, in memory: one register less, 13 with the 8 pixels') goes
   through off before and after the loop */
/* the K steps of one offset: 8 (a block of 8 channels, one tap) or 3 (a 3-channel stem's
   tap), then the filter's next rows */
/* RLX_CB_PFN: the far prefetch (0: none; A/B). Each pass of 8 K steps also asks for 4
   lines of both panels at pf (prefetcht1: into L2), pf then 256 bytes on. The tiles of a K
   slice read it one after another, the first from memory and the rest from L1, so with the
   near prefetch alone the memory stood idle while the later tiles ran (a 4x4 output is 2
   tiles of 8 pixels, a 7x7 one 7 of 7). Tile j of ntl starts pf j / ntl of the way into the
   next slice (rlx_cb_conv), so every tile keeps the memory busy. ResNet-50, 1 thread,
   thread CPU time, p50 of 45 calls in turns, FIFO, loaded (6-12): b1 -4 to -5% alone,
   -10% with the near prefetch at 2 KB (4 KB -8 to -9%, none -7%); b8 -5% (4 KB -2 to -3%) */
#ifndef RLX_CB_PFN
#define RLX_CB_PFN 1
#endif
#if RLX_CB_PFN
#define RLX_CB_ZFAR "prefetcht1 (%[pf])\n\t" "prefetcht1 64(%[pf])\n\t" \
    "prefetcht1 128(%[pf])\n\t" "prefetcht1 192(%[pf])\n\t" \
    "prefetcht1 (%[pf],%[pks])\n\t" "prefetcht1 64(%[pf],%[pks])\n\t" \
    "prefetcht1 128(%[pf],%[pks])\n\t" "prefetcht1 192(%[pf],%[pks])\n\t" \
    "add $256, %[pf]\n\t"
#else
#define RLX_CB_ZFAR
#endif
#define RLX_CB_ZK8(S) S(0) S(1) S(2) S(3) RLX_CB_ZFAR S(4) S(5) S(6) S(7) "add $512, %[pk]\n\t"
#define RLX_CB_ZK3(S) S(0) S(1) S(2) "add $192, %[pk]\n\t"
#define RLX_CB_ZLOOP(S, ACC, K) \
    "mov %[acc], %[off]\n\t" \
    ACC(RLX_CB_ZLD) \
    "1:\n\t" \
    "mov (%[offs]), %[off]\n\t" \
    "add $8, %[offs]\n\t" \
    K(S) \
    "dec %[n]\n\t" \
    "jnz 1b\n\t" \
    "mov %[acc], %[off]\n\t" \
    ACC(RLX_CB_ZST)
#define RLX_CB_ZCLOB "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", \
    "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15", "xmm16", "xmm17", "xmm18", \
    "xmm19", "xmm20", "xmm21", "xmm22", "xmm23", "xmm24", "xmm25", "memory", "cc"
/* rlx_cb_tilez's K loop for 8 (7) pixels x 2 panels in asm (RLX_CB_ASMZ=0: the intrinsics,
   A/B): GCC's allocation of the intrinsics added 17 register copies of accumulators and 5
   moves of the second panel's pointer out of xmm registers to every 8 K steps (128 FMAs).
   zmm0-15 hold the accumulators over the whole slice, zmm16-17 the filter row, zmm18-25 the
   broadcasts. acc: the 16 accumulators in and out (pixel i's panel 0 at i, panel 1 at 8 + i):
   an asm statement takes at most 30 operands, too few for 16 in-out vectors. Single layers
   (thread CPU time, best of 4 in turns): 1x1 128->512 at 14x14 207 -> 214 GFLOP/s, 1024->256
   at 7x7 216 -> 222, 3x3 64->64 at 28x28 214 -> 217 */
#define RLX_CB_ZIO [pk] "+r"(pk), [offs] "+r"(offs), [n] "+r"(ntap), [off] "=&r"(off), \
    [pf] "+r"(pf)
#define RLX_CB_ZIN7 [a0] "r"(a[0]), [a1] "r"(a[1]), [a2] "r"(a[2]), [a3] "r"(a[3]), \
    [a4] "r"(a[4]), [a5] "r"(a[5]), [a6] "r"(a[6]), [pks] "r"(pkb), [acc] "m"(acc), \
    [pfk] "i"(RLX_CB_PFK)
#define RLX_CB_ZIN8 RLX_CB_ZIN7, [a7] "r"(a[7])
static inline __attribute__((always_inline)) void rlx_cb_loopz(
        const float *const *a, const float *pk, int64_t pks, int64_t ntap, const int64_t *offs,
        __m512 *acc, const char *pf, const int BW, const int MR) {
    int64_t off, pkb = pks * (int64_t)sizeof(float);
    if (MR == 8 && BW == 8)
        __asm__ volatile(RLX_CB_ZLOOP(RLX_CB_Z8, RLX_CB_ZACC8, RLX_CB_ZK8)
                         : RLX_CB_ZIO : RLX_CB_ZIN8 : RLX_CB_ZCLOB);
    else if (BW == 8)
        __asm__ volatile(RLX_CB_ZLOOP(RLX_CB_Z7, RLX_CB_ZACC7, RLX_CB_ZK8)
                         : RLX_CB_ZIO : RLX_CB_ZIN7 : RLX_CB_ZCLOB);
    else if (MR == 8)
        __asm__ volatile(RLX_CB_ZLOOP(RLX_CB_Z8, RLX_CB_ZACC8, RLX_CB_ZK3)
                         : RLX_CB_ZIO : RLX_CB_ZIN8 : RLX_CB_ZCLOB);
    else
        __asm__ volatile(RLX_CB_ZLOOP(RLX_CB_Z7, RLX_CB_ZACC7, RLX_CB_ZK3)
                         : RLX_CB_ZIO : RLX_CB_ZIN7 : RLX_CB_ZCLOB);
}
/*@WHOLEZ@*/
#define RLX_CB_ASMZ_ON 1
#else
#define RLX_CB_ASMZ_ON 0
#endif
static inline __attribute__((always_inline)) void rlx_cb_tilez(
        const float *const *a, const float *restrict pk, int64_t pks, int64_t ntap,
        const int64_t *offs, float *restrict out, int64_t os, int acc, const rlx_cb_epi *e,
        int two16, const char *pf, const int BW, const int MR, const int NV) {
#if RLX_CB_ASMZ_ON && RLX_CB_WHOLEZ
    if (NV == 2 && (MR == 8 || MR == 7) && ntap > 0 && (!e || two16)) {
        if (RLX_CB_PF && e) rlx_cb_pfz(e, MR, NV);
        rlx_cb_wholez(a, pk, pks, ntap, offs, out, os, acc, e, pf, BW, MR);
        return;
    }
#endif
    RLX_CB_STARTZ(MR, NV)
    (void)pf;
#if RLX_CB_ASMZ_ON
    if (NV == 2 && (MR == 8 || MR == 7) && ntap > 0) {
        __m512 accs[16] __attribute__((aligned(64)));
        _Pragma("GCC unroll 16") for (int i = 0; i < MR; ++i) {
            accs[i] = c0[i];
            accs[8 + i] = c1[i];
        }
        rlx_cb_loopz(a, pk, pks, ntap, offs, accs, pf, BW, MR);
        rlx_cb_endz(accs, accs + 8, out, os, e, two16, pre, MR, NV);
        return;
    }
#endif
    for (int64_t t = 0; t < ntap; ++t, pk += 16 * BW) {
        const int64_t off = offs[t];
        if (BW == 3) {
            RLX_CB_STEPZ(0) RLX_CB_STEPZ(1) RLX_CB_STEPZ(2)
            continue;
        }
        RLX_CB_STEPZ(0) RLX_CB_STEPZ(1) RLX_CB_STEPZ(2) RLX_CB_STEPZ(3)
        RLX_CB_STEPZ(4) RLX_CB_STEPZ(5) RLX_CB_STEPZ(6) RLX_CB_STEPZ(7)
    }
    rlx_cb_endz(c0, c1, out, os, e, two16, pre, MR, NV);
}

/* rlx_cb_tile's loop (any channels per block bw, cbn blocks of kh x kw taps) on the
   AVX-512 tile: a stem of 3 channels (K = 3 x 49 at 7x7) ran on rlx_cb_tile at 0.46x ONNX
   Runtime. Where it has 32 output channels or more, a 3-channel stem runs on rlx_cb_tilez
   with BW 3 instead (the asm loop): single layers, NCHW in, NCHW8c out, 1 thread, thread
   CPU time, best of 4 in turns: 3->64 7x7 stride 2 at 56x56 0.310 -> 0.281 ms, 3->32 3x3
   stride 2 0.057 -> 0.050 ms, 3->64 3x3 at 112x112 0.296 -> 0.283 ms */
static inline __attribute__((always_inline)) void rlx_cb_tilezg(
        const float *const *a, const float *restrict pk, int64_t pks, int64_t cbn,
        int64_t cbs, int64_t kh, int64_t kw, int64_t rs, int64_t cs, float *restrict out,
        int64_t os, int acc, const rlx_cb_epi *e, int two16, const int bw, const int MR,
        const int NV) {
    RLX_CB_STARTZ(MR, NV)
    for (int64_t cb = 0; cb < cbn; ++cb)
        for (int64_t ki = 0; ki < kh; ++ki)
            for (int64_t kj = 0; kj < kw; ++kj) {
                const int64_t off = cb * cbs + ki * rs + kj * cs;
                for (int c8 = 0; c8 < bw; ++c8, pk += 16) {
                    const __m512 b0 = _mm512_loadu_ps(pk);
                    const __m512 b1 = NV == 2 ? _mm512_loadu_ps(pk + pks) : b0;
                    _Pragma("GCC unroll 16") for (int i = 0; i < MR; ++i) {
                        const __m512 v = _mm512_set1_ps(a[i][off + c8]);
                        c0[i] = _mm512_fmadd_ps(v, b0, c0[i]);
                        if (NV == 2) c1[i] = _mm512_fmadd_ps(v, b1, c1[i]);
                    }
                }
            }
    rlx_cb_endz(c0, c1, out, os, e, two16, pre, MR, NV);
}
#endif

/* the full tile (6 pixels, bw 8) as rlx_cb_tile8, written out: GCC's register allocation of
   the intrinsics adds register copies and reorders broadcasts, 33-36 GFLOP/s on ResNet's
   layers against 35-39 here (Zen 1, one thread; its FMA ceiling 39.7). ymm0-11 hold the
   accumulators for the whole of the K loop, ymm12-13 the filter row, ymm14-15 broadcasts
   of two pixels in turn. Each step prefetches the filter 4 KB ahead (8 (block, tap) pairs):
   where the filter streams from memory (a batch of 1 at 4x4 or 7x7, 8-9 MB filters read
   for 16 pixels) the hardware prefetcher alone left 24-27 GFLOP/s, 30-32 with it (ORT
   27-30); a prefetch past the filter's end is only a hint (it never faults) */
#if RLX_CB_VEC && defined(__x86_64__) && defined(__GNUC__)
#define RLX_CB_ASM6 1
#define RLX_CB_A(J, R, V) "vbroadcastss " #J "*4(%[a" #R "],%[off],4), %%ymm" #V "\n\t"
#define RLX_CB_F(V, R0, R1) "vfmadd231ps %%ymm12, %%ymm" #V ", %%ymm" #R0 "\n\t" \
                            "vfmadd231ps %%ymm13, %%ymm" #V ", %%ymm" #R1 "\n\t"
#define RLX_CB_S6(J) \
    "prefetcht0 " #J "*64+4096(%[pk])\n\t" \
    "vmovups " #J "*64(%[pk]), %%ymm12\n\t" \
    "vmovups " #J "*64+32(%[pk]), %%ymm13\n\t" \
    RLX_CB_A(J, 0, 14) RLX_CB_A(J, 1, 15) RLX_CB_F(14, 0, 1) \
    RLX_CB_A(J, 2, 14) RLX_CB_F(15, 2, 3) \
    RLX_CB_A(J, 3, 15) RLX_CB_F(14, 4, 5) \
    RLX_CB_A(J, 4, 14) RLX_CB_F(15, 6, 7) \
    RLX_CB_A(J, 5, 15) RLX_CB_F(14, 8, 9) RLX_CB_F(15, 10, 11)
#define RLX_CB_ROW6(OP) \
    OP(0, 0) OP(1, 32) OP(2, 64) OP(3, 96) OP(4, 128) OP(5, 160) \
    OP(6, 192) OP(7, 224) OP(8, 256) OP(9, 288) OP(10, 320) OP(11, 352)
#define RLX_CB_LD(R, B) "vmovups " #B "(%[out]), %%ymm" #R "\n\t"
#define RLX_CB_Z(R, B) "vxorps %%ymm" #R ", %%ymm" #R ", %%ymm" #R "\n\t"
#define RLX_CB_ST(R, B) "vmovups %%ymm" #R ", " #B "(%[out])\n\t"
/* rlx_cb_epi on the accumulators: (even, odd) register of pixel i, 32 i. The address
   registers are the loop's, free by then: pk the output, offs the residual, n bs, off the
   bias and act; ymm12-13 bias, lo or hi, ymm14-15 the compare masks */
#define RLX_CB_PIX6(OP) \
    OP(0, 1, 0) OP(2, 3, 32) OP(4, 5, 64) OP(6, 7, 96) OP(8, 9, 128) OP(10, 11, 160)
#define RLX_CB_EB(R0, R1, B) "vaddps %%ymm12, %%ymm" #R0 ", %%ymm" #R0 "\n\t" \
                             "vaddps %%ymm13, %%ymm" #R1 ", %%ymm" #R1 "\n\t"
#define RLX_CB_ER(R0, R1, B) "vaddps " #B "(%[offs]), %%ymm" #R0 ", %%ymm" #R0 "\n\t" \
                             "vaddps " #B "(%[offs],%[n]), %%ymm" #R1 ", %%ymm" #R1 "\n\t"
/* rlx_conv_fin8's blends: keep the accumulator where it is > lo (< hi) or NaN. Not vmaxps /
   vminps alone (half the micro-ops): either operand order departs from the reference's
   max(x, 0) (rlx_max_f, numpy): lo first keeps a NaN but gives -0.0 for max(-0.0, 0) where
   the reference gives +0.0; the accumulator first gives +0.0 but turns a NaN into lo (ONNX
   Runtime keeps NaNs through ReLU too) */
#define RLX_CB_EC(R, V, M, P) "vcmpps $" #P ", %%ymm" #V ", %%ymm" #R ", %%ymm" #M "\n\t" \
                              "vblendvps %%ymm" #M ", %%ymm" #R ", %%ymm" #V ", %%ymm" #R "\n\t"
#define RLX_CB_ELO(R0, R1, B) RLX_CB_EC(R0, 12, 14, 0x16) RLX_CB_EC(R1, 12, 15, 0x16)
#define RLX_CB_EHI(R0, R1, B) RLX_CB_EC(R0, 13, 14, 0x19) RLX_CB_EC(R1, 13, 15, 0x19)
#define RLX_CB_EY(R0, R1, B) "vmovups %%ymm" #R0 ", " #B "(%[pk])\n\t" \
                             "vmovups %%ymm" #R1 ", " #B "(%[pk],%[n])\n\t"
static inline void rlx_cb_tile6(const float *const *a, const float *pk, int64_t ntap,
                                const int64_t *offs, float *out, int acc,
                                const rlx_cb_epi *e) {
    int64_t off;
    __asm__ volatile(
        "cmpq $0, %[acc]\n\t"
        "je 1f\n\t"
        RLX_CB_ROW6(RLX_CB_LD)
        "jmp 2f\n"
        "1:\n\t"
        RLX_CB_ROW6(RLX_CB_Z)
        "2:\n\t"
        "mov (%[offs]), %[off]\n\t"
        "add $8, %[offs]\n\t"
        RLX_CB_S6(0) RLX_CB_S6(1) RLX_CB_S6(2) RLX_CB_S6(3)
        RLX_CB_S6(4) RLX_CB_S6(5) RLX_CB_S6(6) RLX_CB_S6(7)
        "add $512, %[pk]\n\t"
        "dec %[n]\n\t"
        "jnz 2b\n\t"
        "test %[e], %[e]\n\t"
        "jnz 3f\n\t"
        RLX_CB_ROW6(RLX_CB_ST)
        "jmp 8f\n"
        "3:\n\t"
        "mov 16(%[e]), %[off]\n\t"
        "test %[off], %[off]\n\t"
        "jz 4f\n\t"
        "vmovups (%[off]), %%ymm12\n\t"
        "vmovups 32(%[off]), %%ymm13\n\t"
        RLX_CB_PIX6(RLX_CB_EB)
        "4:\n\t"
        "mov (%[e]), %[pk]\n\t"
        "mov 8(%[e]), %[offs]\n\t"
        "mov 24(%[e]), %[n]\n\t"
        "test %[offs], %[offs]\n\t"
        "jz 5f\n\t"
        RLX_CB_PIX6(RLX_CB_ER)
        "5:\n\t"
        "mov 32(%[e]), %[off]\n\t"
        "test $1, %[off]\n\t"
        "jz 6f\n\t"
        "vbroadcastss 40(%[e]), %%ymm12\n\t"
        RLX_CB_PIX6(RLX_CB_ELO)
        "6:\n\t"
        "test $2, %[off]\n\t"
        "jz 7f\n\t"
        "vbroadcastss 44(%[e]), %%ymm13\n\t"
        RLX_CB_PIX6(RLX_CB_EHI)
        "7:\n\t"
        RLX_CB_PIX6(RLX_CB_EY)
        "8:\n\t"
        : [pk] "+r"(pk), [offs] "+r"(offs), [n] "+r"(ntap), [off] "=&r"(off)
        : [a0] "r"(a[0]), [a1] "r"(a[1]), [a2] "r"(a[2]), [a3] "r"(a[3]), [a4] "r"(a[4]),
          [a5] "r"(a[5]), [out] "r"(out), [acc] "rm"((int64_t)acc), [e] "r"(e)
        : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9",
          "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15", "memory", "cc");
}
#else
#define RLX_CB_ASM6 0
#endif

/* n <= RLX_CB_CHUNK pixels x 16 output channels (yb, pixel-major) to NCHW: rows [0, nv) of y
   (rows p apart, from the first pixel) = act((yb + bias) + res), conv.py's epilogue. res:
   NCHW as y, or with rb NCHW8c (its first pixel in the first block, blocks p * 8 apart),
   turned to rows by the same 8 x 8 transposes */
static void rlx_cb_store(const float *yb, int64_t n, int64_t nv, float *y, const float *bias,
                         const float *res, int64_t p, int act, float lo, float hi, int rb) {
    int64_t j = 0;
#if RLX_CB_VEC
    const __m256 vlo = _mm256_set1_ps(lo), vhi = _mm256_set1_ps(hi);
    float rt[64];  /* a blocked residual's 8 x 8 tile, channel-major */
    for (; j + 8 <= n; j += 8)
        for (int64_t h = 0; h < nv; h += 8) {
            const float *s = yb + j * 16 + h;
            __m256 v[8] = {_mm256_loadu_ps(s), _mm256_loadu_ps(s + 16),
                           _mm256_loadu_ps(s + 32), _mm256_loadu_ps(s + 48),
                           _mm256_loadu_ps(s + 64), _mm256_loadu_ps(s + 80),
                           _mm256_loadu_ps(s + 96), _mm256_loadu_ps(s + 112)};
            rlx_cb_t8(&v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7]);
            if (res && rb) {
                const float *r8 = res + (h / 8 * p + j) * 8;
                __m256 u[8];
                for (int i = 0; i < 8; ++i) u[i] = _mm256_loadu_ps(r8 + i * 8);
                rlx_cb_t8(&u[0], &u[1], &u[2], &u[3], &u[4], &u[5], &u[6], &u[7]);
                for (int i = 0; i < 8; ++i) _mm256_storeu_ps(rt + i * 8, u[i]);
            }
            const int64_t m = nv - h < 8 ? nv - h : 8;
            for (int64_t r = 0; r < m; ++r)  /* v[r]: output channel h + r, pixels j.. */
                _mm256_storeu_ps(y + (h + r) * p + j,
                                 rlx_conv_fin8(v[r], bias != 0,
                                               _mm256_set1_ps(bias ? bias[h + r] : 0.0f),
                                               !res ? 0 : rb ? rt + r * 8 : res + (h + r) * p + j,
                                               act, vlo, vhi));
        }
#endif
    for (int64_t r = 0; r < nv; ++r)
        for (int64_t jj = j; jj < n; ++jj)
            y[r * p + jj] = rlx_conv_fin(yb[jj * 16 + r], bias ? bias[r] : 0.0f, bias != 0, res,
                                         rb ? ((r >> 3) * p + jj) * 8 + (r & 7) : r * p + jj,
                                         act, lo, hi);
}

/* the same tile to NCHW8c (rlx_cb_conv's lay & 2): y points at the first pixel in the first
   of the nv / 8 channel blocks (nv 8 or 16), blocks p * 8 floats apart; each pixel's 8
   channels are one vector, stored as they are. res: laid out as y, or without rb NCHW (its
   first pixel in its first channel, rows p apart; summed one float at a time) */
static void rlx_cb_store_b(const float *yb, int64_t n, int64_t nv, float *y, const float *bias,
                           const float *res, int64_t p, int act, float lo, float hi, int rb) {
    for (int64_t h = 0; h < nv; h += 8) {
        float *yd = y + h / 8 * p * 8;
        const float *rd = res && rb ? res + h / 8 * p * 8 : 0;
        int64_t i = 0;
#if RLX_CB_VEC
        const __m256 vlo = _mm256_set1_ps(lo), vhi = _mm256_set1_ps(hi);
        const __m256 vb = bias ? _mm256_loadu_ps(bias + h) : _mm256_setzero_ps();
        if (!res || rb)
            for (; i < n; ++i)
                _mm256_storeu_ps(yd + i * 8, rlx_conv_fin8(_mm256_loadu_ps(yb + i * 16 + h),
                                                           bias != 0, vb, rd ? rd + i * 8 : 0,
                                                           act, vlo, vhi));
#endif
        for (; i < n; ++i)
            for (int64_t c8 = 0; c8 < 8; ++c8)
                yd[i * 8 + c8] = rlx_conv_fin(yb[i * 16 + h + c8], bias ? bias[h + c8] : 0.0f,
                                              bias != 0, rb ? rd : res,
                                              rb ? i * 8 + c8 : (h + c8) * p + i, act, lo, hi);
    }
}

/* padded rows [ylo, yhi) of one image already in NCHW8c (c a multiple of 8) into xp, as
   rlx_cb_fill lays them out: one copy of w * 8 floats per row */
static void rlx_cb_fill_b(const rlx_conv_geo *g, const float *x, int64_t ylo, int64_t yhi,
                          float *xp) {
    const int64_t w = g->w, pw = g->pw, wp = w + 2 * pw, rows = yhi - ylo, cbn = g->c / 8;
    for (int64_t cb = 0; cb < cbn; ++cb)
        for (int64_t r = ylo; r < yhi; ++r) {
            float *d = xp + ((cb * rows + (r - ylo)) * wp) * 8;
            const int64_t iy = r - g->ph;
            if (iy < 0 || iy >= g->h) {
                memset(d, 0, (size_t)(wp * 8) * sizeof(float));
                continue;
            }
            memset(d, 0, (size_t)(pw * 8) * sizeof(float));
            memset(d + (pw + w) * 8, 0, (size_t)(pw * 8) * sizeof(float));
            memcpy(d + pw * 8, x + ((cb * g->h + iy) * w) * 8, (size_t)(w * 8) * sizeof(float));
        }
}

/* CALL(M) with the tile's pixel count mr (1..6) as the constant M, so a tile's
   accumulators stay in registers */
#define RLX_CB_BY_MR(mr, CALL) \
    switch (mr) { \
        case 6: CALL(6); break; \
        case 5: CALL(5); break; \
        case 4: CALL(4); break; \
        case 3: CALL(3); break; \
        case 2: CALL(2); break; \
        default: CALL(1); break; \
    }
/* the same for rlx_cb_tilez's pixel counts 1..RLX_CB_MRZ (8): 8 and 7, then RLX_CB_BY_MR */
#define RLX_CB_BY_MRZ(mr, CALL) \
    switch (mr) { \
        case 8: CALL(8); break; \
        case 7: CALL(7); break; \
        default: RLX_CB_BY_MR(mr, CALL) break; \
    }
/* RLX_CB_FUSE=0 at compile time: every tile through the scratch and the store pass (A/B) */
#ifndef RLX_CB_FUSE
#define RLX_CB_FUSE 1
#endif

/* the second convolution of a pair (conv2d_pair: a ResNet block's last 1x1 and its
   projection shortcut, summed into one output): its image's input x (NCHW8c when blocked),
   geometry g (the same output rows and columns as the first's) and filter pk packed by
   rlx_cb_pack; bias (or 0) is added to the first's */
typedef struct {
    const rlx_conv_geo *g;
    const float *x, *pk, *bias;
    int blocked;
    int64_t filter_l2;  /* both filters' bytes run chunk by chunk, at most (RLX_CB_FILTER_L2) */
} rlx_cb_pair;

/* the images one call takes (emit_blocked's fold): n of them, each xs floats after the one
   before in the input (x2s in a pair's second input) and ys in the output and residual */
typedef struct {
    int64_t n, xs, x2s, ys;
} rlx_cb_imgs;

/* one convolution's side of the K loop for output rows [oy0, oy1): its blocked input rows
   (xp: copied, or the NCHW8c input read in place; the next image's xs floats further),
   filter and, where the flat tiles take them, the (channel block, tap) offsets from a pixel's
   pointer of every block (offs, in the scratch: nofs of them; slice kb's start at kb khw, so
   a tile's pixel pointers are the same in every K slice) */
typedef struct {
    const rlx_conv_geo *g;
    const float *xp, *pk;
    int64_t xs;
    int64_t ylo, yhi, wp, bw, cbn, cbs, k, khw, cbk, rs, cs, nofs;
    int in_place, flat, flat3;
    int64_t *offs;
} rlx_cb_src;

/* floats of scratch for s's offsets (nofs int64s, rounded up to a cache line) */
static inline int64_t rlx_cb_offs_floats(const rlx_cb_src *s) {
    return (s->nofs * 2 + 15) / 16 * 16;
}

/* s's geometry for rows [oy0, oy1); returns the floats of scratch its copy needs (its
   offsets' are rlx_cb_offs_floats, filled by rlx_cb_src_fill) */
static int64_t rlx_cb_src_init(rlx_cb_src *s, const rlx_conv_geo *g, const float *pk,
                               int blocked, int64_t oy0, int64_t oy1) {
    s->g = g;
    s->pk = pk;
    s->wp = g->w + 2 * g->pw;
    s->cbn = (g->c + 7) / 8;
    s->ylo = oy0 * g->sh;
    s->yhi = (oy1 - 1) * g->sh + (g->kh - 1) * g->dh + 1;
    /* an unpadded blocked input is read where it is: no copy */
    s->in_place = blocked && g->ph == 0 && g->pw == 0;
    s->bw = rlx_cb_bw(g->c);
    s->khw = g->kh * g->kw;
    s->k = s->cbn * s->bw * s->khw;
    s->cbs = s->in_place ? g->h * g->w * 8 : (s->yhi - s->ylo) * s->wp * s->bw;
    s->rs = g->dh * s->wp * s->bw;
    s->cs = g->dw * s->bw;
    s->cbk = rlx_cb_kblocks(g->c, s->khw);
    /* whole blocks of 8 channels: the (block, tap) pairs of a K slice as one list of offsets
       from a pixel's pointer (rlx_cb_tile8 / rlx_cb_tile6); windows of up to RLX_CB_TAPS */
    s->flat = rlx_cb_flat(g->c, g->kh, g->kw);
    /* a 3-channel stem on AVX-512: its taps as that list too, 3 K steps each (rlx_cb_tilez's
       BW 3), for the asm loop */
    s->flat3 = RLX_CB_512 && g->c == 3 && s->khw <= RLX_CB_TAPS;
    s->nofs = s->flat || s->flat3 ? s->cbn * s->khw : 0;
    return s->in_place ? 0 : s->cbn * s->cbs;
}

/* s's input rows: read in place, or copied into buf; its offsets into ofs */
static void rlx_cb_src_fill(rlx_cb_src *s, const float *x, int blocked, float *buf,
                            float *ofs) {
    s->offs = (int64_t *)ofs;
    for (int64_t cb = 0, t = 0; t < s->nofs; ++cb)
        for (int64_t ki = 0; ki < s->g->kh; ++ki)
            for (int64_t kj = 0; kj < s->g->kw; ++kj)
                s->offs[t++] = cb * s->cbs + ki * s->rs + kj * s->cs;
    if (s->in_place)
        s->xp = x + s->ylo * s->g->w * 8;
    else {
        s->xp = buf;
        if (blocked)
            rlx_cb_fill_b(s->g, x, s->ylo, s->yhi, buf);
        else
            rlx_cb_fill(s->g, x, s->ylo, s->yhi, buf);
    }
}

/* output rows [oy0, oy1) of one image of a groups-1 convolution with o output channels: pk
   the filter packed by rlx_cb_pack, y / res the image's output (and residual) planes; lay:
   1 the input is NCHW8c, 2 the output is, 4 the residual is (else NCHW). With p2 (a pair, no
   residual) the second convolution's K slices follow the first's on the same accumulators,
   and the store adds both biases. With im (every input read in place), im->n images at once:
   their chunks follow one another, so a filter too large for L2 is read once for them all
   unit by unit, not once per image. Returns 0 when out of memory for the blocked copy (the
   caller then runs rlx_cb_fallback or rlx_cb_direct) */
/* where it is compiled (kernel_library.py): RLX_CB_EXTERN, a program linking the prebuilt
   object, declares it only (the static helpers only it calls then go unused and uncompiled);
   RLX_CB_LIBRARY, that object, defines it with hidden visibility (each program keeps its own
   copy, unseen by another loaded program); else a program defines it static, as it was */
#if defined(RLX_CB_EXTERN) || defined(RLX_CB_LIBRARY)
#define RLX_CB_CONV2_LINK __attribute__((visibility("hidden")))
#else
#define RLX_CB_CONV2_LINK static
#endif
RLX_CB_CONV2_LINK int rlx_cb_conv2(const rlx_conv_geo *g, const float *x, const float *pk,
                                   int64_t o, const float *bias, const float *res, float *y,
                                   int64_t oy0, int64_t oy1, int act, float lo, float hi,
                                   int lay, const rlx_cb_pair *p2, const rlx_cb_imgs *im)
#ifdef RLX_CB_EXTERN
;
#else
{
    enum { MR = RLX_CB_MR, CH = RLX_CB_CHUNK };
    const int ns = p2 ? 2 : 1;  /* the convolutions summed */
    rlx_cb_src src[2];
    int64_t copy[2] = {0, 0};
    copy[0] = rlx_cb_src_init(&src[0], g, pk, lay & 1, oy0, oy1);
    if (p2)
        copy[1] = rlx_cb_src_init(&src[1], p2->g, p2->pk, p2->blocked, oy0, oy1);
    const int64_t ni = im ? im->n : 1;  /* images */
    if (ni > 1 && (copy[0] || copy[1])) {  /* a copied input: one image at a time */
        for (int64_t i = 0; i < ni; ++i) {
            rlx_cb_pair pi;
            if (p2) {
                pi = *p2;
                pi.x = p2->x + i * im->x2s;
            }
            if (!rlx_cb_conv2(g, x + i * im->xs, pk, o, bias, res ? res + i * im->ys : 0,
                              y + i * im->ys, oy0, oy1, act, lo, hi, lay, p2 ? &pi : 0, 0))
                return 0;
        }
        return 1;
    }
    src[0].xs = im ? im->xs : 0;
    src[1].xs = im ? im->x2s : 0;
    const int64_t ybn = (RLX_CB_512 ? 2 : 1) * CH * 16 + 16;
    const int64_t of0 = rlx_cb_offs_floats(&src[0]), of1 = p2 ? rlx_cb_offs_floats(&src[1]) : 0;
    float *buf = rlx_sgemm_scratch(of0 + of1 + copy[0] + copy[1] + ybn + (p2 && bias ? o : 0));
    if (buf == 0) return 0;
    rlx_cb_src_fill(&src[0], x, lay & 1, buf + of0 + of1, buf);
    if (p2) rlx_cb_src_fill(&src[1], p2->x, p2->blocked, buf + of0 + of1 + copy[0], buf + of0);
    float *yb = buf + of0 + of1 + copy[0] + copy[1];
    if (p2 && bias) {  /* one bias for the pair's sum */
        float *bs = yb + ybn;
        for (int64_t i = 0; i < o; ++i) bs[i] = bias[i] + p2->bias[i];
        bias = bs;
    }
    const int64_t p = g->oh * g->ow, pix0 = oy0 * g->ow, npix = (oy1 - oy0) * g->ow;
    /* (unit, chunk) pairs, a unit PU panels (two on AVX-512, where the flat tile takes 32
       output channels): chunk by chunk, every unit, while the packed filter stays in L2 (the
       chunk's input then stays in L1 across the units and its offsets are computed once:
       1x1 convs of 16-32 channels spent 7% of their time on the offsets); unit by unit over
       every chunk where the filter is larger */
    enum { PU = RLX_CB_512 ? 2 : 1 };
    /* pixels a tile takes, at most; on AVX-512 an image's pixels are ntt tiles of even sizes
       (tile J from J npix / ntt), CH / RLX_CB_MRZ at most a chunk, the chunks' tiles even too:
       a 7x7 output is 7 tiles of 7 (the whole-tile asm) in chunks of 4 and 3. It was 6 tiles
       of 8 and one of a pixel (which costs half a full tile: its two accumulators wait on the
       FMA latency), then chunks of 25 and 24 pixels in tiles of 7, 6, 6, 6 and 6, 6, 6, 6,
       the 6s on the intrinsics */
    const int64_t step = RLX_CB_512 ? RLX_CB_MRZ : MR;
    const int64_t ntt = (npix + step - 1) / step, tpc = CH / step;
    const int64_t nq = (o + 15) / 16, nu = (nq + PU - 1) / PU, nch = (ntt + tpc - 1) / tpc;
    const int64_t nci = nch * ni;  /* (image, chunk) pairs */
    const int by_chunk = nq * (src[0].k + (p2 ? src[1].k : 0)) * 16 * (int64_t)sizeof(float)
                         <= (p2 ? p2->filter_l2 : RLX_CB_FILTER_L2);
    /* each pixel's first input in each blocked copy (past the chunk's last, its first
       again: a tile's unused pointers); the (image, chunk) they are for */
    const float *ap[2][CH + RLX_CB_MRZ];
    int64_t at = -1, tb[CH + 1];  /* and its tiles' first pixels from the chunk's, then n */
    for (int64_t it = 0; it < nu * nci; ++it) {
        const int64_t q = (by_chunk ? it % nu : it / nci) * PU;  /* the unit's first panel */
        const int64_t np = nq - q < PU ? nq - q : PU;           /* and its panels */
        const int64_t ci = by_chunk ? it / nu : it % nci, img = ci / nch;
        /* the chunk's tiles [j0, j0 + ntl) of the image's, pixels [c0, c0 + n) */
        const int64_t j0 = RLX_CB_512 ? ci % nch * ntt / nch : ci % nch * tpc;
        const int64_t ntl = RLX_CB_512 ? (ci % nch + 1) * ntt / nch - j0
                            : ntt - j0 < tpc ? ntt - j0 : tpc;
        const int64_t c0 = RLX_CB_512 ? j0 * npix / ntt : j0 * step;
        float *yi = y + (img ? img * im->ys : 0);  /* the image's output and residual */
        const float *ri = res ? res + (img ? img * im->ys : 0) : 0;
        const int64_t nv = o - q * 16 < 16 * np ? o - q * 16 : 16 * np;  /* its channels */
        const int64_t n = RLX_CB_512 ? (j0 + ntl) * npix / ntt - c0
                          : npix - c0 < ntl * step ? npix - c0 : ntl * step;
        if (ci != at) {
            for (int64_t j = 0; j <= ntl; ++j)
                tb[j] = RLX_CB_512 ? (j0 + j) * npix / ntt - c0 : j * step < n ? j * step : n;
            for (int s = 0; s < ns; ++s) {
                const rlx_conv_geo *gs = src[s].g;
                const int64_t wp = src[s].wp, bw = src[s].bw, ylo = src[s].ylo;
                const float *xs = src[s].xp + img * src[s].xs;
                for (int64_t i = 0, oy = (pix0 + c0) / g->ow, ox = (pix0 + c0) % g->ow; i < n;
                     ++i) {
                    ap[s][i] = xs + ((oy * gs->sh - ylo) * wp + ox * gs->sw) * bw;
                    if (++ox == g->ow) { ox = 0; ++oy; }
                }
                for (int64_t i = n; i < n + RLX_CB_MRZ; ++i) ap[s][i] = ap[s][0];
            }
        }
        at = ci;
        /* NCHW8c: block 2q (2q + 1, ...) from pixel pix0 + c0; NCHW: row 16 q. Panel q + 1
           is 16 p floats further in either layout */
        const int64_t atb = (q * 2 * p + pix0 + c0) * 8, atn = q * 16 * p + pix0 + c0;
        const int rb = (lay & 4) != 0;  /* the residual is NCHW8c */
        const float *rq = ri ? ri + (rb ? atb : atn) : 0;
        const float *bq = bias ? bias + q * 16 : 0;
        /* the vector tiles store an NCHW8c output themselves on the last K slice (rlx_cb_tile
           whole panels of 16 channels only: it computes 16; the AVX-512 tiles any) */
        int fuse = RLX_CB_FUSE && RLX_CB_VEC && (lay & 2) && (!res || rb);
        for (int s = 0; s < ns; ++s)
            fuse = fuse && (src[s].flat || RLX_CB_512 || nv == 16 * np);
        rlx_cb_epi ep = {yi + atb, rq, bq, p * 8 * (int64_t)sizeof(float), act, lo, hi};
        for (int s = 0; s < ns; ++s) {
            const rlx_cb_src *S = &src[s];
            const int64_t k = S->k, khw = S->khw, cbs = S->cbs, cbn = S->cbn, cbk = S->cbk;
            const int64_t bw = S->bw, rs = S->rs, cs = S->cs, kh = S->g->kh, kw = S->g->kw;
            const int flat = S->flat, flat3 = S->flat3;
            const float *pq = S->pk + q * k * 16;
            const int narrow = q + np == nq && rlx_cb_tail8(o, S->g->c, kh, kw);
            (void)flat3; (void)narrow;
            for (int64_t kb = 0; kb < cbn; kb += cbk) {
                const int64_t nb = cbn - kb < cbk ? cbn - kb : cbk, acc = s > 0 || kb > 0;
                const int64_t ks = kb * khw * bw;  /* the slice's first row of a panel */
                const rlx_cb_epi *e = fuse && s == ns - 1 && kb + nb == cbn ? &ep : 0;
                /* the flat tiles: the slice's offsets; the others add the slice's first
                   block to the pixel pointers */
                const int64_t *offs = flat || flat3 ? S->offs + kb * khw : S->offs;
#if RLX_CB_512
                const float *pb = pq + ks * 16;
                /* the far prefetch's start (RLX_CB_PFN): tile j's j / ntl into the next slice
                   of these panels, or the pair's second filter after the first's last slice,
                   or the next unit's after the last slice; j sl / ntl kept as a quotient pfq
                   and a remainder pfr (no division a tile) */
                const int64_t sl = nb * khw * bw, pfdq = sl / ntl, pfdr = sl % ntl;
                const float *nx = ks + sl < k ? pb + sl * 16
                                  : s + 1 < ns ? src[s + 1].pk + q * src[s + 1].k * 16
                                  : src[0].pk + (q + PU) * src[0].k * 16;
                int64_t pfq = 0, pfr = 0;
#endif
                for (int64_t t = 0, j = 0, mr; t < n; t += mr, ++j) {
                    mr = tb[j + 1] - t;
                    const float *a2[RLX_CB_MR > RLX_CB_MRZ ? RLX_CB_MR : RLX_CB_MRZ];
                    const float *const *a = ap[s] + t;
                    if (!flat && !flat3) {
                        for (int64_t i = 0; i < mr; ++i) a2[i] = a[i] + kb * cbs;
                        a = a2;
                    }
#if RLX_CB_512
                    {
                        ep.y = yi + atb + t * 8;
                        ep.res = rq ? rq + t * 8 : 0;
                        const int two16 = nv - 16 * (np - 1) > 8;
                        float *o16 = yb + t * 16;
                        const char *pf = (const char *)(nx + pfq * 16);
                        pfq += pfdq;
                        pfr += pfdr;
                        if (pfr >= ntl) { pfr -= ntl; ++pfq; }
#define RLX_CB_FZ(M, NV) rlx_cb_tilez(a, pb, k * 16, nb * khw, offs, o16, CH * 16, acc, e, \
                                      two16, pf, 8, M, NV)
#define RLX_CB_T2(M) rlx_cb_tilez(a, pb, k * 16, khw, offs, o16, CH * 16, acc, e, two16, pf, 3, \
                                  M, 2)
#define RLX_CB_GZ(M, NV) rlx_cb_tilezg(a, pb, k * 16, nb, cbs, kh, kw, rs, cs, o16, \
                                       CH * 16, acc, e, two16, (int)bw, M, NV)
#define RLX_CB_F2(M) RLX_CB_FZ(M, 2)
#define RLX_CB_F1(M) RLX_CB_FZ(M, 1)
#define RLX_CB_G2(M) RLX_CB_GZ(M, 2)
#define RLX_CB_G1(M) RLX_CB_GZ(M, 1)
                        if (flat && np == 2) RLX_CB_BY_MRZ(mr, RLX_CB_F2)
                        else if (flat) RLX_CB_BY_MRZ(mr, RLX_CB_F1)
                        else if (flat3 && np == 2) RLX_CB_BY_MRZ(mr, RLX_CB_T2)
                        else if (np == 2) RLX_CB_BY_MRZ(mr, RLX_CB_G2)
                        else RLX_CB_BY_MRZ(mr, RLX_CB_G1)
#undef RLX_CB_FZ
#undef RLX_CB_GZ
#undef RLX_CB_F2
#undef RLX_CB_F1
#undef RLX_CB_G2
#undef RLX_CB_G1
#undef RLX_CB_T2
                        continue;
                    }
#endif
                    for (int64_t pp = 0; pp < np; ++pp) {  /* one panel a call */
                        const int nar = narrow && pp == np - 1;
                        const float *pb = pq + pp * k * 16 + ks * (nar ? 8 : 16);
                        float *o16 = yb + pp * CH * 16 + t * 16;
                        ep.y = yi + atb + pp * 16 * p + t * 8;
                        ep.res = rq ? rq + pp * 16 * p + t * 8 : 0;
                        ep.bias = bq ? bq + pp * 16 : 0;
#if RLX_CB_VEC
                        if (flat && nar) {  /* the last panel, 8 wide */
#define RLX_CB_CALL(M) rlx_cb_tile8(a, pb, nb * khw, offs, o16, acc, e, M, 1)
                            RLX_CB_BY_MR(mr, RLX_CB_CALL)
#undef RLX_CB_CALL
#if RLX_CB_ASM6
                        } else if (flat && mr == MR) {
                            rlx_cb_tile6(a, pb, nb * khw, offs, o16, acc, e);
#endif
                        } else if (flat) {
#define RLX_CB_CALL(M) rlx_cb_tile8(a, pb, nb * khw, offs, o16, acc, e, M, 2)
                            RLX_CB_BY_MR(mr, RLX_CB_CALL)
#undef RLX_CB_CALL
                        } else
#endif
                        {
#define RLX_CB_CALL(M) rlx_cb_tile(a, pb, nb, cbs, kh, kw, rs, cs, o16, acc, e, (int)bw, M)
                            RLX_CB_BY_MR(mr, RLX_CB_CALL)
#undef RLX_CB_CALL
                        }
                    }
                }
            }
        }
        if (fuse)
            continue;
        for (int64_t pp = 0; pp < np; ++pp) {
            const int64_t nvp = nv - pp * 16 < 16 ? nv - pp * 16 : 16;
            const float *rp = rq ? rq + pp * 16 * p : 0, *bp = bq ? bq + pp * 16 : 0;
            if (lay & 2)
                rlx_cb_store_b(yb + pp * CH * 16, n, nvp, yi + atb + pp * 16 * p, bp, rp, p, act,
                               lo, hi, rb);
            else
                rlx_cb_store(yb + pp * CH * 16, n, nvp, yi + atn + pp * 16 * p, bp, rp, p, act,
                             lo, hi, rb);
        }
    }
    return 1;
}
#endif

/* one convolution (rlx_cb_conv2 without a pair) */
static inline int rlx_cb_conv(const rlx_conv_geo *g, const float *x, const float *pk,
                              int64_t o, const float *bias, const float *res, float *y,
                              int64_t oy0, int64_t oy1, int act, float lo, float hi, int lay) {
    return rlx_cb_conv2(g, x, pk, o, bias, res, y, oy0, oy1, act, lo, hi, lay, 0, 0);
}

/* offset of (channel ch, pixel at) in one image of c channels and p pixels: NCHW, or NCHW8c
   (c a multiple of 8) when blocked */
static inline int64_t rlx_cb_at(int blocked, int64_t ch, int64_t at, int64_t p) {
    return blocked ? ((ch >> 3) * p + at) * 8 + (ch & 7) : ch * p + at;
}

/* output rows [oy0, oy1) of one image, one output at a time in any layouts (lay as
   rlx_cb_conv's), with no scratch: what runs when the scratch cannot be had and a layout is
   blocked (slow but right); the OIHW filter wt read in place */
static void rlx_cb_direct(const rlx_conv_geo *g, const float *x, const float *wt, int64_t o,
                          const float *bias, const float *res, float *y, int64_t oy0,
                          int64_t oy1, int act, float lo, float hi, int lay) {
    const int64_t p = g->oh * g->ow, hw = g->h * g->w, khw = g->kh * g->kw;
    for (int64_t oc = 0; oc < o; ++oc)
        for (int64_t oy = oy0; oy < oy1; ++oy)
            for (int64_t ox = 0; ox < g->ow; ++ox) {
                float s = 0.0f;
                for (int64_t ci = 0; ci < g->c; ++ci)
                    for (int64_t ki = 0; ki < g->kh; ++ki)
                        for (int64_t kj = 0; kj < g->kw; ++kj) {
                            const int64_t iy = oy * g->sh - g->ph + ki * g->dh;
                            const int64_t ix = ox * g->sw - g->pw + kj * g->dw;
                            if (iy >= 0 && iy < g->h && ix >= 0 && ix < g->w)
                                s += x[rlx_cb_at(lay & 1, ci, iy * g->w + ix, hw)]
                                     * wt[(oc * g->c + ci) * khw + ki * g->kw + kj];
                        }
                const int64_t at = rlx_cb_at(lay & 2, oc, oy * g->ow + ox, p);
                y[at] = rlx_conv_fin(s, bias ? bias[oc] : 0.0f, bias != 0, res,
                                     rlx_cb_at(lay & 4, oc, oy * g->ow + ox, p), act, lo, hi);
            }
}

/* output positions [j0, j1) of one image on conv.py's implicit GEMM (any geometry) */
static void rlx_cb_fallback(const rlx_conv_geo *g, const float *x, const float *wt, int64_t o,
                            const float *bias, const float *res, float *y, int64_t j0,
                            int64_t j1, int act, float lo, float hi) {
    const int64_t p = g->oh * g->ow;
    rlx_conv_epi_ctx e = {y, bias, res, p, act, lo, hi};
    rlx_conv_gemm(o, g->c * g->kh * g->kw, wt, g, x, y, p, j0, j1,
                  bias || res || act ? rlx_conv_epi : 0, &e);
}
#endif
"""

# the 8 x 8 transpose both the copy and the store use; before SOURCE's functions
TRANSPOSE = r"""
#ifndef RLX_CB_T8_H
#define RLX_CB_T8_H
#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
/* rows r0..r7 of an 8 x 8 block become its columns */
static inline __attribute__((always_inline)) void rlx_cb_t8(
        __m256 *r0, __m256 *r1, __m256 *r2, __m256 *r3, __m256 *r4, __m256 *r5, __m256 *r6,
        __m256 *r7) {
    const __m256 t0 = _mm256_unpacklo_ps(*r0, *r1), t1 = _mm256_unpackhi_ps(*r0, *r1),
                 t2 = _mm256_unpacklo_ps(*r2, *r3), t3 = _mm256_unpackhi_ps(*r2, *r3),
                 t4 = _mm256_unpacklo_ps(*r4, *r5), t5 = _mm256_unpackhi_ps(*r4, *r5),
                 t6 = _mm256_unpacklo_ps(*r6, *r7), t7 = _mm256_unpackhi_ps(*r6, *r7);
    const __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE),
                 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE),
                 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE),
                 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
    /* the 128-bit halves recombined by insert / extract, not vperm2f128: Zen 1 runs that as
       8 micro-ops, an insert as 2 */
    *r0 = _mm256_insertf128_ps(u0, _mm256_castps256_ps128(u4), 1);
    *r1 = _mm256_insertf128_ps(u1, _mm256_castps256_ps128(u5), 1);
    *r2 = _mm256_insertf128_ps(u2, _mm256_castps256_ps128(u6), 1);
    *r3 = _mm256_insertf128_ps(u3, _mm256_castps256_ps128(u7), 1);
    *r4 = _mm256_insertf128_ps(u4, _mm256_extractf128_ps(u0, 1), 0);
    *r5 = _mm256_insertf128_ps(u5, _mm256_extractf128_ps(u1, 1), 0);
    *r6 = _mm256_insertf128_ps(u6, _mm256_extractf128_ps(u2, 1), 0);
    *r7 = _mm256_insertf128_ps(u7, _mm256_extractf128_ps(u3, 1), 0);
}
#endif
#endif
"""

SOURCE = TRANSPOSE + SOURCE.replace("/*@WHOLEZ@*/", conv_tilez_asm.source())


def packed_bytes(o: int, c: int, kh: int, kw: int) -> int:
    """Bytes of an o x c x kh x kw filter in rlx_cb_pack's panels (rlx_cb_packed_floats)."""
    return -(-o // CB_O) * CB_O * (c if c < CB_C else -(-c // CB_C) * CB_C) * kh * kw * 4


def mode() -> str:
    """``RLX_CONV_BLOCKED``: "0" every convolution on conv.py's kernels (A/B timing), "all"
    every groups-1 convolution on a parameter filter blocked (tests of odd shapes), else the
    rule table (use_blocked); anything else is an ArgumentError."""
    return env_choice("RLX_CONV_BLOCKED", ("0", "all"))


# the rule table, from single layers timed against conv.py's kernels (CPU time, 1 thread, Zen 1,
# ONNX Runtime's ratio in brackets, old -> blocked): 3x3 64->64 at 28x28 0.80x -> 0.90x,
# 3x3 256->256 at 7x7 0.71x -> 0.88x, 3x3 stride 2 128->128 at 28x28 0.78x -> 0.90x; but
# 3x3 512->512 at 4x4 1.07x -> 1.00x (16 pixels fill the implicit GEMM's one tile exactly),
# every 1x1 conv 0.71-0.86x blocked against 0.72-1.2x (before layout.py kept activations
# blocked). The 7x7 stem on 3 channels: 0.33x blocked with 5 of its 8-channel block zeros,
# 0.62x on the implicit GEMM; with blocks of c < 8 channels (rlx_cb_bw) 32.2 GFLOP/s blocked
# against 22.8 on the implicit GEMM (3 -> 64, 7x7 stride 2 at 112x112). 3x3 stems on 3
# channels too (one layer, NCHW in and out, ONNX Runtime's ratio, implicit GEMM -> blocked):
# MobileNetV2's 3 -> 32 stride 2 at 112x112 0.59x -> 0.94x (batch 1), 0.59x -> 1.18x (8);
# VGG's 3 -> 64 stride 1 0.73x -> 1.01x (1), 0.74x -> 1.07x (8); in a chain its output then
# stays blocked for the depthwise conv after it
MIN_CHANNELS = 16
MIN_PIXELS = 32
NARROW_TAPS = 9  # under 8 input channels (one narrow block): windows of 3 x 3 or more


def use_blocked(c: int, o: int, groups: int, kh: int, kw: int, sh: int, sw: int,
                oh: int, ow: int) -> bool:
    """Run a convolution on the blocked direct kernel: groups 1, a window of several taps, at
    least MIN_CHANNELS input channels and MIN_PIXELS output pixels, or a stem (under 8
    channels, a window of NARROW_TAPS or more; see the table above). Never one of no input
    channels (conv.py's kernel writes its epilogue; this one died of SIGFPE on it)."""
    if groups != 1 or mode() == "0" or c == 0:
        return False
    return mode() == "all" or (kh * kw > 1 and c >= MIN_CHANNELS and oh * ow >= MIN_PIXELS) \
        or _narrow(c, kh, kw)


def _narrow(c: int, kh: int, kw: int) -> bool:
    return 0 < c < CB_C and kh * kw >= NARROW_TAPS


def in_chain(c: int, groups: int, kh: int = 1, kw: int = 1) -> bool:
    """May a groups-1 convolution run on the blocked kernel inside a chain of NCHW8c kernels
    (layout.py), whatever its window? Where neither side ends up blocked, use_blocked still
    decides. At least MIN_CHANNELS input channels, or a stem (_narrow: its output then goes
    blocked to the pooling after it)."""
    return groups == 1 and mode() != "0" and (c >= MIN_CHANNELS or _narrow(c, kh, kw))


MIN_ITEMS = 8  # split an image's output rows when there are fewer images than this

FILTER_L2 = 256 << 10  # RLX_CB_FILTER_L2: the largest filter one conv runs chunk by chunk
FOLD_BYTES = 1 << 20  # the most input rows the images of one call put in L2
FOLD_MAX = 1 << 20  # the largest RLX_CB_FOLD accepted (the batch bounds it anyway)


def images_per_call(n: int, in_bytes: int, filter_bytes: int, in_place: bool) -> int:
    """Images one call of rlx_cb_conv2 takes where a thread runs the kernel alone (its fold).
    A filter over FILTER_L2 runs unit by unit, and one image at a time read it whole from
    memory (or L3) once per image: ResNet-50's 4x4 and 7x7 stages at batch 8. Folded, each
    unit of the filter is read once for all the call's images, which re-read their input per
    unit instead, so as many images as keep the input rows they read (``in_bytes`` each)
    within FOLD_BYTES. Only where every input is read in place (NCHW8c, 1x1, unpadded: no
    per-image copy). ``RLX_CB_FOLD``: "0" never (A/B timing), a number: that many wherever
    the input is read in place; not a whole number from 0 to FOLD_MAX: ArgumentError."""
    fold = env_count("RLX_CB_FOLD", "images per call such as 4, or 0 for one at a time",
                     FOLD_MAX)
    if not in_place or n < 2 or fold == 0:
        return 1
    if fold is not None:
        return min(n, fold)
    if filter_bytes <= FILTER_L2:
        return 1
    return max(1, min(n, FOLD_BYTES // max(in_bytes, 1)))


L3_BYTES = 4 << 20  # a blocked input above this is read backward over the batch (backward)


def backward(n: int, in_bytes: int) -> bool:
    """Should a kernel of ``n`` images read its blocked input of ``in_bytes`` from the last
    image to the first? Where the input outgrows the L3 (L3_BYTES) and the kernel before
    wrote it forward, its last images are the ones still cached; forward, every read misses
    (LRU's cyclic worst case). ``RLX_CPU_BACKWARD=0``: never (A/B timing)."""
    return env_flag("RLX_CPU_BACKWARD", True) and n > 1 and in_bytes > L3_BYTES


def open_items(env: KernelEnv, w: Writer, flops: int, items: int, geo: str,
               backward: bool = False) -> None:
    """Open a conv kernel's loop over its ``items`` work items (shared out by the team
    when ``flops`` pays for it) and declare its geometry ``geo`` inside; the caller closes it.
    ``backward``: item ``it`` runs from the last to the first (see backward)."""
    pragma = env.parallel(flops, 0)
    if pragma:
        w.line(pragma)
    if backward:
        w.open(f"for (int64_t ir = 0; ir < {items}; ++ir)")
        w.line(f"const int64_t it = {items - 1} - ir;")
    else:
        w.open(f"for (int64_t it = 0; it < {items}; ++it)")
    w.line(f"const rlx_conv_geo geo = {geo};")


def item_rows(w: Writer, blocks: int, step: int, total: int, lo: str, hi: str) -> None:
    """Declare the item's rows [``lo``, ``hi``) of ``total``: block ``rb`` of ``blocks``
    blocks of ``step``. Row blocks only share work out: a thread alone takes every row in its
    first item and skips the rest, so what an item packs or copies is done once."""
    if blocks > 1:
        w.line("const int solo = rlx_conv_team() == 1;")
        w.line("if (solo && rb > 0) continue;")
        w.line(f"const int64_t {lo} = rb * {step}, {hi} = solo ? {total} : "
               f"{lo} + {step} < {total} ? {lo} + {step} : {total};")
    else:
        w.line(f"const int64_t {lo} = 0, {hi} = {total};")


@dataclass(frozen=True)
class Second:
    """The second convolution of a pair (conv_pair.py) as emit_blocked takes it: C pointers
    of its input, OIHW filter, prepacked filter and bias, its input's channels and pixels per
    image, its geometry (a C initializer) and whether its input is NCHW8c."""

    x: str
    wt: str
    packed: str
    bias: str
    c: int
    hw: int
    geo: str
    blocked: bool
    filter_l2: int  # both filters' bytes run chunk by chunk, at most


def emit_blocked(env: KernelEnv, w: Writer, packed: str, geo: str, n: int, x: str, wt: str,
                 c: int, hw: int, o: int, oh: int, ow: int, bias: str | None, res: str | None,
                 out: str, tail: str, flops: int, lay: int = 0,
                 second: Second | None = None, fold: int = 1) -> str:
    """The kernel's loop over (image, block of output rows) calling rlx_cb_conv (x, wt, bias,
    res, out: C pointers of the input, OIHW filter, bias, residual and output; lay: 1 the
    input is NCHW8c, 2 the output is, 4 the residual is); returns IMPL. With ``second`` (and
    no residual) rlx_cb_conv2 sums both convolutions; returns IMPL_PAIR. ``fold``: images one
    call takes where a thread runs the kernel alone (images_per_call)."""
    blocks = 1 if n >= MIN_ITEMS else min(oh, -(-MIN_ITEMS // n))
    step = -(-oh // blocks)
    blocks = -(-oh // step)
    p = oh * ow
    open_items(env, w, flops, n * blocks, geo)
    w.line(f"const int64_t b = it / {blocks}, rb = it % {blocks};")
    item_rows(w, blocks, step, oh, "oy0", "oy1")  # the blocked copy of the input: once alone
    s = second
    fold = min(fold, n)
    im = "0"
    if fold > 1:  # alone: the first image of each fold takes the fold's images, the rest skip
        if blocks == 1:
            w.line("const int solo = rlx_conv_team() == 1;")
        w.line(f"if (solo && b % {fold}) continue;")
        w.line(f"const rlx_cb_imgs im = {{solo ? ({n} - b < {fold} ? {n} - b : {fold}) : 1, "
               f"{c * hw}, {s.c * s.hw if s else 0}, {o * p}}};")
        im = "&im"
    w.line(f"const float* xb = {x} + b * {c * hw};")
    w.line(f"float* yb = {out} + b * {o * p};")
    if s is not None:
        w.line(f"const rlx_conv_geo geo2 = {s.geo};")
        w.line(f"const rlx_cb_pair p2 = {{&geo2, {s.x} + b * {s.c * s.hw}, {s.packed}, "
               f"{s.bias}, {int(s.blocked)}, {s.filter_l2}}};")
        w.open(f"if (!rlx_cb_conv2(&geo, xb, {packed}, {o}, {bias or '0'}, 0, yb, oy0, oy1, "
               f"{tail}, {lay & 3}, &p2, {im}))")
        # out of memory for the copies: the second into the output, then the first with
        # the output as its residual (rlx_cb_direct reads it at each output's own index
        # before writing there), one output at a time
        _each_image(w, fold, f"{c * hw}", f"{o * p}")
        w.line(f"rlx_cb_direct(&geo2, p2.x + bi * {s.c * s.hw}, {s.wt}, {o}, p2.bias, 0, "
               f"yb + bi * {o * p}, oy0, oy1, 0, 0.0f, 0.0f, {int(s.blocked) | lay & 2});")
        w.line(f"rlx_cb_direct(&geo, xi, {wt}, {o}, {bias or '0'}, yi, yi, oy0, oy1, {tail}, "
               f"{lay & 3 | (4 if lay & 2 else 0)});")
        _close(w, 3 if fold > 1 else 2)
        return IMPL_PAIR
    res_b = f"{res} + b * {o * p}" if res else "0"
    # out of memory for the blocked copy: the same rows by conv.py's implicit GEMM
    w.open(f"if (!rlx_cb_conv2(&geo, xb, {packed}, {o}, {bias or '0'}, {res_b}, yb, oy0, oy1, "
           f"{tail}, {lay}, 0, {im}))")
    _each_image(w, fold, f"{c * hw}", f"{o * p}")
    res_i = f"{res_b} + bi * {o * p}" if res else "0"
    if lay:  # out of memory, a blocked side: one output at a time
        w.line(f"rlx_cb_direct(&geo, xi, {wt}, {o}, {bias or '0'}, {res_i}, yi, oy0, oy1, "
               f"{tail}, {lay});")
    else:
        w.line(f"rlx_cb_fallback(&geo, xi, {wt}, {o}, {bias or '0'}, {res_i}, yi, oy0 * {ow}, "
               f"oy1 * {ow}, {tail});")
    _close(w, 3 if fold > 1 else 2)
    return IMPL


def _each_image(w: Writer, fold: int, xs: str, ys: str) -> None:
    """Inside a kernel's out-of-memory branch: its images one at a time (the fold's, or the
    one), as bi with input xi and output yi (close with _close)."""
    if fold > 1:
        w.open("for (int64_t bi = 0; bi < im.n; ++bi)")
    else:
        w.line("const int64_t bi = 0;")
    w.line(f"const float* xi = xb + bi * {xs};")
    w.line(f"float* yi = yb + bi * {ys};")


def _close(w: Writer, opened: int) -> None:
    """Close the ``opened`` blocks emit_blocked opened: the item loop, the out-of-memory
    branch and, with a fold, its image loop."""
    for _ in range(opened):
        w.close()
