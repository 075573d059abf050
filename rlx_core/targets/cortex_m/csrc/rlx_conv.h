/* int8 convolution and pooling in the CMSIS-NN style, NHWC activations: conv2d (weights
 * OHWI), depthwise conv (weights HWC, one filter per channel), max and average pooling.
 * Bit-exact with the numpy int8 reference (targets/numpy_ref/quant_conv.py):
 * - conv / depthwise write the i32 accumulators sum (x - x_zp) * (w - w_zp) + bias over the
 *   taps inside the image (a padded tap is the input's zero point: it adds nothing), wrapping
 *   modulo 2^32; requantize (rlx_nn.h) brings them to int8 per output channel;
 * - max pooling takes the largest tap inside the image (padding never wins);
 * - average pooling is TFLite's: the sum over the taps inside the image, divided by their
 *   count rounding half away from zero, then clamped to [lo, hi]. */
#ifndef RLX_CONV_H
#define RLX_CONV_H
#include <stdint.h>

/* one geometry for every kernel: input N,H,W,C -> output OH,OW; window KH,KW, stride, pad */
typedef struct {
    int n, h, w, c, oh, ow, kh, kw, sh, sw, ph, pw;
} rlx_win_t;

/* the window's rows [*y0, *y1) and columns [*x0, *x1) inside the image, at output (oy, ox) */
static inline void rlx_win_clip(const rlx_win_t *g, int oy, int ox, int *y0, int *y1, int *x0,
                                int *x1) {
    int iy = oy * g->sh - g->ph, ix = ox * g->sw - g->pw;
    *y0 = iy < 0 ? -iy : 0;
    *y1 = iy + g->kh > g->h ? g->h - iy : g->kh;
    *x0 = ix < 0 ? -ix : 0;
    *x1 = ix + g->kw > g->w ? g->w - ix : g->kw;
}

/* y[n, oy, ox, o] (i32) = bias[o] + sum_{ky,kx,ci} (x[n, iy, ix, ci] - x_zp) * (w[o, ky, kx, ci] - w_zp) */
#define RLX_CONV(NAME, XT)                                                                    \
static inline void NAME(const XT *x, const int8_t *w, const int32_t *bias, int32_t x_zp,       \
                        int32_t w_zp, int32_t *y, const rlx_win_t *g, int O) {               \
    for (int n = 0; n < g->n; n++)                                                            \
        for (int oy = 0; oy < g->oh; oy++)                                                    \
            for (int ox = 0; ox < g->ow; ox++, y += O) {                                      \
                int y0, y1, x0, x1;                                                           \
                rlx_win_clip(g, oy, ox, &y0, &y1, &x0, &x1);                                  \
                const XT *base = x + ((n * g->h + oy * g->sh - g->ph) * g->w                  \
                                      + ox * g->sw - g->pw) * g->c;                           \
                for (int o = 0; o < O; o++) {                                                 \
                    uint32_t acc = bias ? (uint32_t)bias[o] : 0u;                             \
                    const int8_t *wo = w + o * g->kh * g->kw * g->c;                          \
                    for (int ky = y0; ky < y1; ky++)                                          \
                        for (int kx = x0; kx < x1; kx++) {                                    \
                            const XT *xp = base + (ky * g->w + kx) * g->c;                    \
                            const int8_t *wp = wo + (ky * g->kw + kx) * g->c;                 \
                            for (int ci = 0; ci < g->c; ci++)                                 \
                                acc += (uint32_t)(((int32_t)xp[ci] - x_zp)                    \
                                                  * ((int32_t)wp[ci] - w_zp));                \
                        }                                                                     \
                    y[o] = (int32_t)acc;                                                      \
                }                                                                             \
            }                                                                                 \
}
RLX_CONV(rlx_conv_nhwc_u8, uint8_t)
RLX_CONV(rlx_conv_nhwc_s8, int8_t)

/* depthwise, channel multiplier 1: y[n, oy, ox, c] = bias[c] + sum (x - x_zp) * (w[ky, kx, c] - w_zp) */
#define RLX_DWCONV(NAME, XT)                                                                  \
static inline void NAME(const XT *x, const int8_t *w, const int32_t *bias, int32_t x_zp,       \
                        int32_t w_zp, int32_t *y, const rlx_win_t *g) {                      \
    for (int n = 0; n < g->n; n++)                                                            \
        for (int oy = 0; oy < g->oh; oy++)                                                    \
            for (int ox = 0; ox < g->ow; ox++, y += g->c) {                                   \
                int y0, y1, x0, x1;                                                           \
                rlx_win_clip(g, oy, ox, &y0, &y1, &x0, &x1);                                  \
                const XT *base = x + ((n * g->h + oy * g->sh - g->ph) * g->w                  \
                                      + ox * g->sw - g->pw) * g->c;                           \
                for (int c = 0; c < g->c; c++) {                                              \
                    uint32_t acc = bias ? (uint32_t)bias[c] : 0u;                             \
                    for (int ky = y0; ky < y1; ky++)                                          \
                        for (int kx = x0; kx < x1; kx++)                                      \
                            acc += (uint32_t)(((int32_t)base[(ky * g->w + kx) * g->c + c]     \
                                               - x_zp)                                        \
                                              * ((int32_t)w[(ky * g->kw + kx) * g->c + c]     \
                                                 - w_zp));                                    \
                    y[c] = (int32_t)acc;                                                      \
                }                                                                             \
            }                                                                                 \
}
RLX_DWCONV(rlx_dwconv_nhwc_u8, uint8_t)
RLX_DWCONV(rlx_dwconv_nhwc_s8, int8_t)

/* pooling: AVG = 0 takes the max of the taps inside the image, AVG = 1 their rounded mean */
#define RLX_POOL(NAME, T, AVG)                                                                \
static inline void NAME(const T *x, T *y, const rlx_win_t *g, int32_t lo, int32_t hi) {        \
    for (int n = 0; n < g->n; n++)                                                            \
        for (int oy = 0; oy < g->oh; oy++)                                                    \
            for (int ox = 0; ox < g->ow; ox++, y += g->c) {                                   \
                int y0, y1, x0, x1;                                                           \
                rlx_win_clip(g, oy, ox, &y0, &y1, &x0, &x1);                                  \
                const T *base = x + ((n * g->h + oy * g->sh - g->ph) * g->w                   \
                                     + ox * g->sw - g->pw) * g->c;                            \
                int32_t count = (y1 - y0) * (x1 - x0);                                        \
                for (int c = 0; c < g->c; c++) {                                              \
                    int32_t acc = AVG ? 0 : INT32_MIN;                                        \
                    for (int ky = y0; ky < y1; ky++)                                          \
                        for (int kx = x0; kx < x1; kx++) {                                    \
                            int32_t v = base[(ky * g->w + kx) * g->c + c];                    \
                            if (AVG) acc += v; else if (v > acc) acc = v;                     \
                        }                                                                     \
                    if (AVG && count > 0)                                                     \
                        acc = acc > 0 ? (acc + count / 2) / count : (acc - count / 2) / count; \
                    if (count == 0) acc = lo; /* a window wholly in the padding */            \
                    y[c] = (T)(acc < lo ? lo : acc > hi ? hi : acc);                          \
                }                                                                             \
            }                                                                                 \
}
RLX_POOL(rlx_maxpool_nhwc_u8, uint8_t, 0)
RLX_POOL(rlx_maxpool_nhwc_s8, int8_t, 0)
RLX_POOL(rlx_avgpool_nhwc_u8, uint8_t, 1)
RLX_POOL(rlx_avgpool_nhwc_s8, int8_t, 1)

/* layout changes around the NHWC kernels for the IR's NCHW tensors (cortex_m/conv_step.py):
 * y[b, p, i] = x[b, i, p] over N batches, C channels and HW pixels, and back */
#define RLX_TO_NHWC(NAME, T)                                                                  \
static inline void NAME(const T *x, T *y, int n, int c, int hw) {                             \
    for (int b = 0; b < n; b++)                                                               \
        for (int i = 0; i < c; i++)                                                           \
            for (int p = 0; p < hw; p++) y[(b * hw + p) * c + i] = x[(b * c + i) * hw + p];  \
}
RLX_TO_NHWC(rlx_nchw_to_nhwc_u8, uint8_t)
RLX_TO_NHWC(rlx_nchw_to_nhwc_s8, int8_t)

#define RLX_TO_NCHW(NAME, T)                                                                  \
static inline void NAME(const T *x, T *y, int n, int c, int hw) {                             \
    for (int b = 0; b < n; b++)                                                               \
        for (int i = 0; i < c; i++)                                                           \
            for (int p = 0; p < hw; p++) y[(b * c + i) * hw + p] = x[(b * hw + p) * c + i];  \
}
RLX_TO_NCHW(rlx_nhwc_to_nchw_s32, int32_t)
RLX_TO_NCHW(rlx_nhwc_to_nchw_u8, uint8_t) /* after a pooling step (cortex_m/pool_step.py) */
RLX_TO_NCHW(rlx_nhwc_to_nchw_s8, int8_t)
#endif
