/* int8 kernels in the CMSIS-NN style: fully connected (SMLAD on two 16-bit lanes where the
 * core has the DSP extension), TFLite's requantization (multiplier and shift), argmax, and
 * dequantize for an argmax over dequantized logits (relu and other integer max / min / neg
 * chains are one generated loop per kernel, emitter.py). Every kernel computes what the
 * numpy reference (targets/numpy_ref/quant_semantics.py) computes, bit for bit: integer
 * sums wrap modulo 2^32 (unsigned arithmetic, no signed-overflow UB), float work is one IEEE
 * f32 operation per step (-ffp-contract=off). */
#ifndef RLX_NN_H
#define RLX_NN_H
#include <stdint.h>

#if defined(__ARM_FEATURE_DSP) && !defined(RLX_NO_DSP)
#include <arm_acle.h>
#define RLX_DSP 1
static inline uint32_t rlx_read32(const void *p) {
    uint32_t v;
    __builtin_memcpy(&v, p, 4); /* one LDR: Cortex-M4/M33 allow unaligned word loads */
    return v;
}
static inline uint32_t rlx_ror8(uint32_t v) { return (v >> 8) | (v << 24); }
#endif

/* y[r, n] = bias[n] + sum_k x[r, k] * w[n, k] - b_zp * sum_k x[r, k]  (mod 2^32).
 * The emitter folds the input zero point into bias: -a_zp * sum_k w[n, k] + K * a_zp * b_zp,
 * as CMSIS-NN does, so the inner loop is a plain dot product. */
#define RLX_FC(NAME, XT, XEXT)                                                                \
static inline void NAME(const XT *x, const int8_t *w, const int32_t *bias, int32_t b_zp, int32_t *y, \
                 int rows, int K, int N) {                                                    \
    for (int r = 0; r < rows; r++, x += K, y += N) {                                          \
        uint32_t sx = 0;                                                                      \
        if (b_zp != 0)                                                                        \
            for (int k = 0; k < K; k++) sx += (uint32_t)(int32_t)x[k];                        \
        const int8_t *wr = w;                                                                 \
        for (int n = 0; n < N; n++, wr += K) {                                                \
            uint32_t acc = 0;                                                                 \
            int k = 0;                                                                        \
            RLX_FC_DSP_LOOP(XEXT)                                                             \
            for (; k < K; k++) acc += (uint32_t)((int32_t)x[k] * (int32_t)wr[k]);            \
            y[n] = (int32_t)(acc + (uint32_t)bias[n] - (uint32_t)b_zp * sx);                  \
        }                                                                                     \
    }                                                                                         \
}

#ifdef RLX_DSP
/* four bytes a step: XEXT widens bytes 0,2 and 1,3 of x to 16-bit lanes, SXTB16 the weight */
#define RLX_FC_DSP_LOOP(XEXT)                                                                 \
    for (; k + 4 <= K; k += 4) {                                                              \
        uint32_t xv = rlx_read32(x + k), wv = rlx_read32(wr + k);                             \
        acc = (uint32_t)__smlad((int32_t)XEXT(xv), (int32_t)__sxtb16(wv), (int32_t)acc);      \
        acc = (uint32_t)__smlad((int32_t)XEXT(rlx_ror8(xv)), (int32_t)__sxtb16(rlx_ror8(wv)), \
                                (int32_t)acc);                                                \
    }
#else
#define RLX_FC_DSP_LOOP(XEXT)
#endif

RLX_FC(rlx_fc_u8, uint8_t, __uxtb16)
RLX_FC(rlx_fc_s8, int8_t, __sxtb16)

/* TFLite's MultiplyByQuantizedMultiplier: a doubling high multiply rounded half away from zero,
 * then a rounding right shift. 64-bit intermediates keep every shift in range. */
static inline int32_t rlx_mbqm(int32_t acc, int32_t m, int32_t shift) {
    int left = shift > 0 ? shift : 0, right = shift > 0 ? 0 : -shift;
    int32_t x = (int32_t)((uint32_t)acc << left);
    int64_t ab = (int64_t)x * m;
    int64_t v = ab + (ab >= 0 ? ((int64_t)1 << 30) : (1 - ((int64_t)1 << 30)));
    int64_t h = v >= 0 ? (v >> 31) : -((-v) >> 31);
    int64_t mask = ((int64_t)1 << right) - 1;
    int64_t rem = h & mask, thr = (mask >> 1) + (h < 0);
    return (int32_t)((h >> right) + (rem > thr));
}

/* channel of element i = (i / inner) % C; per-tensor parameters have C = 1 */
#define RLX_REQUANT(NAME, T)                                                                  \
static inline void NAME(const int32_t *acc, T *y, int n, int inner, int C, const int32_t *mult,      \
                 const int32_t *shift, int32_t zp, int32_t lo, int32_t hi) {                  \
    for (int i = 0; i < n; i++) {                                                             \
        int c = C == 1 ? 0 : (i / inner) % C;                                                 \
        int32_t v = rlx_mbqm(acc[i], mult[c], shift[c]) + zp;                                 \
        y[i] = (T)(v < lo ? lo : v > hi ? hi : v);                                            \
    }                                                                                         \
}
RLX_REQUANT(rlx_requantize_u8, uint8_t)
RLX_REQUANT(rlx_requantize_s8, int8_t)
RLX_REQUANT(rlx_requantize_s16, int16_t)


/* the first index of the largest value along an axis of extent n: (outer, n, inner) */
#define RLX_ARGMAX(NAME, T, IT)                                                               \
static inline void NAME(const T *x, IT *y, int outer, int n, int inner) {                            \
    for (int o = 0; o < outer; o++)                                                           \
        for (int j = 0; j < inner; j++) {                                                     \
            const T *p = x + (o * n) * inner + j;                                             \
            int best = 0;                                                                     \
            for (int i = 1; i < n; i++) {                                                     \
                T v = p[i * inner], b = p[best * inner];                                      \
                if (b == b && (v != v || v > b)) best = i; /* numpy: the first NaN wins */    \
            }                                                                                 \
            y[o * inner + j] = (IT)best;                                                      \
        }                                                                                     \
}
RLX_ARGMAX(rlx_argmax_f32_i32, float, int32_t)
RLX_ARGMAX(rlx_argmax_f32_i64, float, int64_t)
RLX_ARGMAX(rlx_argmax_s32_i32, int32_t, int32_t)
RLX_ARGMAX(rlx_argmax_s32_i64, int32_t, int64_t)
RLX_ARGMAX(rlx_argmax_u8_i32, uint8_t, int32_t)
RLX_ARGMAX(rlx_argmax_u8_i64, uint8_t, int64_t)
RLX_ARGMAX(rlx_argmax_s8_i32, int8_t, int32_t)
RLX_ARGMAX(rlx_argmax_s8_i64, int8_t, int64_t)
RLX_ARGMAX(rlx_argmax_s16_i32, int16_t, int32_t)
RLX_ARGMAX(rlx_argmax_s16_i64, int16_t, int64_t)
RLX_ARGMAX(rlx_argmax_s64_i32, int64_t, int32_t)
RLX_ARGMAX(rlx_argmax_s64_i64, int64_t, int64_t)

/* f32(i32(q) - zp) * scale, one rounding per step (feeds an argmax over dequantized logits) */
#define RLX_DEQUANT(NAME, T)                                                                  \
static inline void NAME(const T *q, float *y, int n, int inner, int C, const float *scale,           \
                 const int32_t *zp, int per_zp) {                                             \
    for (int i = 0; i < n; i++) {                                                             \
        int c = C == 1 ? 0 : (i / inner) % C;                                                 \
        int32_t d = (int32_t)((uint32_t)(int32_t)q[i] - (uint32_t)zp[per_zp ? c : 0]);        \
        y[i] = (float)d * scale[c];                                                           \
    }                                                                                         \
}
RLX_DEQUANT(rlx_dequantize_s32, int32_t)
RLX_DEQUANT(rlx_dequantize_u8, uint8_t)
RLX_DEQUANT(rlx_dequantize_s8, int8_t)

#include "rlx_conv.h" /* conv2d / depthwise / pooling, NHWC */
#endif
