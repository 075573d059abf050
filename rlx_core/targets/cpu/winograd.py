"""The CPU's Winograd convolution: 3x3, stride 1, groups 1, on F(m x m, 3 x 3) tiles.

A direct 3x3 convolution spends 9 multiplies per output, input channel and output channel;
the blocked direct tile (conv_blocked.py) already runs them at the FMA ceiling, as ONNX
Runtime's MLAS does. Winograd's minimal filtering (Lavin & Gray 2016) computes an m x m tile
of outputs from a (m + 2) x (m + 2) tile of inputs with (m + 2)^2 multiplies per channel
pair: F(4x4, 3x3) 36 for 16 outputs (4x fewer), F(2x2, 3x3) 16 for 4 (2.25x fewer). Each
output block is ``Y = A^T [ sum_c (G g G^T) . (B^T d B) ] A``:

- **filter transform** ``U = G g G^T`` once per binding (prepack.py, kind ``wino4`` /
  ``wino2``), in double, each of the (m + 2)^2 positions then packed as the blocked tile's
  filter of a 1x1 convolution (``rlx_cb_pack``: panels of 16 output channels), and a flag
  after them: U holds an inf or NaN. Then every call runs ``rlx_wg_direct`` instead (the
  transforms would make a whole output channel NaN, inf - inf, where the convolution gives
  +-inf);
- **input transform** ``V = B^T d B`` of every tile and block of 8 channels, 8 channels per
  vector (the NCHW8c layout's pixel), written position-major: position xi's V is an NCHW8c
  image of c channels and one row of ``nt`` pixels, the tiles;
- **the GEMMs**: per position xi, ``M_xi = U_xi V_xi``, a 1x1 convolution of that image on
  the blocked conv's own kernel (``rlx_cb_conv``: its 6 x 16 asm tile, chunking and filter
  prefetch), output NCHW8c;
- **or the filter on the fly** (``filter_on_the_fly``: F(4, 3) items of at most LAZY_TILES
  tiles): the filter is packed for the direct kernel (prepack kind ``winolazy``, 9 / 36 of
  U's bytes) and each item transforms it, in float, a row of positions of two panels (32 output
  channels) at a time (``rlx_wg{m}_lazy``), which that row's GEMMs then read from L2;
- **output transform** ``Y = A^T M A`` of every tile and block of 8 output channels, with the
  epilogue on the way (bias, residual, max / min / clip, conv.py's order) and partial tiles
  clipped at the right and bottom edges, to NCHW or NCHW8c.

On AVX-512 both transforms run two tiles a vector (``rlx_wg{m}_in2`` / ``_out2``: tiles q and
q + 1 of a block are next to each other in V and M, so a pair's 16 floats are one zmm), an odd
chunk padded with a zero tile so every pair sits on a 64-byte boundary.

Work items are chunks of tiles over the whole batch (a 7x7 output is 4 tiles of F(4, 3); at
batch 8 the GEMMs see 32). The transforms' error grows with the channel count and with m:
F(4, 3)'s points (0, +-1, +-2) amplify rounding about 10x over a direct sum, F(6, 3)'s far
more (not built). conv.py's ``winograd_tile`` is the rule; ``RLX_WINOGRAD``: "0" off, "2" /
"4" that tile on every eligible convolution (A/B timing, tests).
"""

from __future__ import annotations

from fractions import Fraction as F

from rlx_core.targets.c_common.kernels import KernelEnv
from rlx_core.targets.c_common.loops import Writer
from rlx_core.targets.cpu import conv_blocked, scratch
from rlx_core.targets.cpu.env import env_choice

IMPL = "rlx-conv-winograd"
IMPLS = (IMPL,)
TILES = (2, 4)  # the m of F(m x m, 3 x 3) built

Matrix = list[list[F]]

# Lavin & Gray's matrices; points 0, -1, 1 (F(2, 3)) and 0, +-1, +-2 (F(4, 3)), and infinity
_BT: dict[int, Matrix] = {
    2: [
        [F(1), F(0), F(-1), F(0)],
        [F(0), F(1), F(1), F(0)],
        [F(0), F(-1), F(1), F(0)],
        [F(0), F(1), F(0), F(-1)],
    ],
    4: [
        [F(v) for v in r]
        for r in (
            (4, 0, -5, 0, 1, 0),
            (0, -4, -4, 1, 1, 0),
            (0, 4, -4, -1, 1, 0),
            (0, -2, -1, 2, 1, 0),
            (0, 2, -1, -2, 1, 0),
            (0, 4, 0, -5, 0, 1),
        )
    ],
}
_G: dict[int, Matrix] = {
    2: [
        [F(1), F(0), F(0)],
        [F(1, 2), F(1, 2), F(1, 2)],
        [F(1, 2), F(-1, 2), F(1, 2)],
        [F(0), F(0), F(1)],
    ],
    4: [
        [F(1, 4), F(0), F(0)],
        [F(-1, 6), F(-1, 6), F(-1, 6)],
        [F(-1, 6), F(1, 6), F(-1, 6)],
        [F(1, 24), F(1, 12), F(1, 6)],
        [F(1, 24), F(-1, 12), F(1, 6)],
        [F(0), F(0), F(1)],
    ],
}
_AT: dict[int, Matrix] = {
    2: [[F(1), F(1), F(1), F(0)], [F(0), F(1), F(-1), F(-1)]],
    4: [
        [F(v) for v in r]
        for r in (
            (1, 1, 1, 1, 1, 0),
            (0, 1, -1, 2, -2, 0),
            (0, 1, 1, 4, 4, 0),
            (0, 1, -1, 8, -8, 1),
        )
    ],
}


def matrices(m: int) -> tuple[Matrix, Matrix, Matrix]:
    """B^T, G and A^T of F(m x m, 3 x 3) (exact fractions)."""
    return _BT[m], _G[m], _AT[m]


def _lin(row: list[F], names: list[str]) -> str:
    """The C expression sum_k row[k] * names[k], zeros skipped, +-1 without a multiply."""
    out = ""
    for coef, name in zip(row, names, strict=True):
        if coef == 0:
            continue
        mag = abs(coef)
        term = name if mag == 1 else f"{float(mag)!r}f * {name}"
        out += (" - " if coef < 0 else " + ") + term if out else ("-" if coef < 0 else "") + term
    return out or "0.0f"


def _sandwich(mat: Matrix, src: list[list[str]], pre: str) -> tuple[list[str], list[list[str]]]:
    """C statements of ``mat . src . mat^T`` on scalars named in ``src`` (a square grid):
    returns the statements and the names of the result's grid (prefix ``pre``)."""
    rows, k = len(mat), len(mat[0])
    lines: list[str] = []
    t = [[f"{pre}t{i}_{j}" for j in range(k)] for i in range(rows)]
    for i in range(rows):
        for j in range(k):
            lines.append(f"const float {t[i][j]} = {_lin(mat[i], [src[q][j] for q in range(k)])};")
    r = [[f"{pre}r{i}_{j}" for j in range(rows)] for i in range(rows)]
    for i in range(rows):
        for j in range(rows):
            lines.append(f"const float {r[i][j]} = {_lin(mat[j], t[i])};")
    return lines, r


def _transforms(m: int, lanes: int) -> str:
    """C of F(m x m, 3 x 3)'s input and output transforms on ``lanes`` floats a pixel: 8, one
    tile's block of 8 channels (rlx_wg{m}_in / _out), or 16, two tiles' side by side
    (rlx_wg{m}_in2 / _out2: a zmm on AVX-512; their V and M are next to each other, tiles q
    and q + 1 of one block 8 floats apart)."""
    bt, _, at = matrices(m)
    ti = m + 2
    tt = ti * ti
    d = [[f"d[{(i * ti + j) * lanes} + l]" for j in range(ti)] for i in range(ti)]
    in_lines, v = _sandwich(bt, d, "")
    in_body = "\n        ".join(
        in_lines + [f"v[{i * ti + j} * vs + l] = {v[i][j]};" for i in range(ti) for j in range(ti)]
    )
    mm = [[f"s[{i * ti + j} * ss + l]" for j in range(ti)] for i in range(ti)]
    out_lines, y = _sandwich(at, mm, "")
    out_body = "\n        ".join(
        out_lines
        + [f"y[{(i * m + j) * lanes} + l] = {y[i][j]};" for i in range(m) for j in range(m)]
    )
    sfx = "" if lanes == 8 else "2"
    return rf"""
/* F({m}x{m}, 3x3): the input transform B^T d B of {ti} x {ti} pixels of {lanes} floats (d,
   pixel-major) into {tt} positions of {lanes} floats, vs floats apart */
static inline void rlx_wg{m}_in{sfx}(const float *restrict d, float *restrict v, int64_t vs) {{
    #pragma omp simd
    for (int l = 0; l < {lanes}; ++l) {{
        {in_body}
    }}
}}

/* the output transform A^T s A of {tt} positions of {lanes} floats (ss apart) into {m} x {m}
   pixels of {lanes} floats (y, pixel-major) */
static inline void rlx_wg{m}_out{sfx}(const float *restrict s, int64_t ss, float *restrict y) {{
    #pragma omp simd
    for (int l = 0; l < {lanes}; ++l) {{
        {out_body}
    }}
}}
"""


def _source(m: int) -> str:
    """The transforms and the convolution of F(m x m, 3 x 3) as C (names rlx_wg{m}_*)."""
    _, g, _ = matrices(m)
    ti = m + 2
    tt = ti * ti
    gd = ", ".join("{" + ", ".join(repr(float(c)) for c in row) + "}" for row in g)
    return (
        _transforms(m, 8)
        + _transforms(m, 16)
        + rf"""
/* the OIHW 3x3 filter w (o x c, c a multiple of 8) transformed, U = G g G^T in double, each
   of the {tt} positions packed by rlx_cb_pack as a 1x1 filter (rlx_cb_packed_floats(o, c,
   1, 1) floats apart), then the float rlx_wg_direct_only reads: 1 when U holds an inf or a
   NaN (an inf or NaN weight, or a weight whose transform overflows) or could not be made
   (out of memory), else 0 */
static void rlx_wg{m}_pack(int64_t o, int64_t c, const float *w, float *dst) {{
    static const double G[{ti}][3] = {{{gd}}};
    const int64_t stride = rlx_cb_packed_floats(o, c, 1, 1);
    float *u = (float *)malloc((size_t)(o * c * {tt}) * sizeof(float));
    if (u == 0) {{
        dst[{tt} * stride] = 1.0f;
        return;
    }}
    int bad = 0;
    for (int64_t k = 0; k < o * c; ++k) {{
        const float *f = w + k * 9;
        double t[{ti}][3];
        for (int i = 0; i < {ti}; ++i)
            for (int j = 0; j < 3; ++j)
                t[i][j] = G[i][0] * f[j] + G[i][1] * f[3 + j] + G[i][2] * f[6 + j];
        for (int i = 0; i < {ti}; ++i)
            for (int j = 0; j < {ti}; ++j) {{
                const float v = (float)(t[i][0] * G[j][0] + t[i][1] * G[j][1]
                                        + t[i][2] * G[j][2]);
                bad |= v - v != 0.0f;  /* inf - inf and NaN - NaN are NaN */
                u[(i * {ti} + j) * o * c + k] = v;
            }}
    }}
    for (int xi = 0; xi < {tt}; ++xi) rlx_cb_pack(o, c, 1, 1, u + xi * o * c, dst + xi * stride);
    dst[{tt} * stride] = bad ? 1.0f : 0.0f;
    free(u);
}}

/* row i of U = G g G^T (positions (i, 0) .. (i, {ti} - 1)) of panels [q0, q0 + np) of a 3x3
   filter packed by rlx_cb_pack (p3: c a multiple of 8, panels of 16 output channels), in
   float, each position packed as rlx_cb_pack's 1x1 filter of those np panels, position
   (i, r) at ub + r np 16 c: the on-the-fly filter (see filter_on_the_fly). Row by row, the
   sandwich costs what the whole transform does (9 + {ti} x 3 FMAs a row) */
static void rlx_wg{m}_lazy(const float *restrict p3, int64_t c, int64_t q0, int64_t np, int i,
                          float *restrict ub) {{
    static const float G[{ti}][3] = {{{gd}}};
    const float a0 = G[i][0], a1 = G[i][1], a2 = G[i][2];
    const int64_t ps = np * 16 * c;
    for (int64_t qq = 0; qq < np; ++qq) {{
        const float *pq = p3 + (q0 + qq) * c * 9 * 16;
        for (int64_t k = 0; k < c; ++k) {{
            /* channel k's 9 taps, 8 x 16 floats apart (rows ((cb 9 + t) 8 + c8) of 16) */
            const float *f = pq + ((k / 8) * 72 + k % 8) * 16;
            float *u = ub + (qq * c + k) * 16;
            float t0[16], t1[16], t2[16];
            #pragma omp simd
            for (int l = 0; l < 16; ++l) {{
                t0[l] = a0 * f[l] + a1 * f[384 + l] + a2 * f[768 + l];
                t1[l] = a0 * f[128 + l] + a1 * f[512 + l] + a2 * f[896 + l];
                t2[l] = a0 * f[256 + l] + a1 * f[640 + l] + a2 * f[1024 + l];
            }}
            for (int r = 0; r < {ti}; ++r) {{
                const float b0 = G[r][0], b1 = G[r][1], b2 = G[r][2];
                #pragma omp simd
                for (int l = 0; l < 16; ++l) u[r * ps + l] = t0[l] * b0 + t1[l] * b1 + t2[l] * b2;
            }}
        }}
    }}
}}

/* tile q's {ti} x {ti} input pixels (zeros outside the input) of channel block cb into d,
   ps floats a pixel (8, or 16 with another tile's beside them); x the whole batch */
static inline void rlx_wg{m}_gather(const rlx_conv_geo *g, const float *x, int64_t q,
                                   int64_t cb, int lay, float *d, int64_t ps) {{
    const int64_t h = g->h, w = g->w, hw = h * w;
    const int64_t th = (g->oh + {m} - 1) / {m}, tw = (g->ow + {m} - 1) / {m};
    const int64_t b = q / (th * tw), ty = q / tw % th, tx = q % tw;
    const int64_t y0 = ty * {m} - g->ph, x0 = tx * {m} - g->pw;
    const float *xb = x + b * g->c * hw;
    for (int64_t i = 0; i < {ti}; ++i)
        for (int64_t j = 0; j < {ti}; ++j) {{
            float *dd = d + (i * {ti} + j) * ps;
            const int64_t iy = y0 + i, ix = x0 + j;
            if (iy < 0 || iy >= h || ix < 0 || ix >= w) {{
                for (int l = 0; l < 8; ++l) dd[l] = 0.0f;
            }} else if (lay & 1) {{
                memcpy(dd, xb + ((cb * h + iy) * w + ix) * 8, 8 * sizeof(float));
            }} else {{
                const float *s = xb + cb * 8 * hw + iy * w + ix;
                for (int l = 0; l < 8; ++l) dd[l] = s[l * hw];
            }}
        }}
}}

#if RLX_WG_PAIRS
/* NCHW8c input: tiles q and q2 (q2 < 0: none, zeros) of channel block cb side by side into d,
   16 floats a pixel, each pixel one zmm store (two 8-float stores there made every load of
   the transform that follows miss store forwarding) */
static inline void rlx_wg{m}_gather2(const rlx_conv_geo *g, const float *x, int64_t q,
                                    int64_t q2, int64_t cb, float *d) {{
    const int64_t h = g->h, w = g->w, hw = h * w;
    const int64_t th = (g->oh + {m} - 1) / {m}, tw = (g->ow + {m} - 1) / {m};
    const float *src[2];
    int64_t y0[2], x0[2];
    for (int k = 0; k < 2; ++k) {{
        const int64_t t = k ? q2 : q;
        src[k] = 0;
        y0[k] = x0[k] = 0;
        if (t < 0) continue;
        const int64_t b = t / (th * tw), ty = t / tw % th, tx = t % tw;
        y0[k] = ty * {m} - g->ph;
        x0[k] = tx * {m} - g->pw;
        src[k] = x + (b * g->c + cb * 8) * hw;  /* image b's block cb */
    }}
    for (int64_t i = 0; i < {ti}; ++i)
        for (int64_t j = 0; j < {ti}; ++j) {{
            __m256 half[2];
            for (int k = 0; k < 2; ++k) {{
                const int64_t iy = y0[k] + i, ix = x0[k] + j;
                half[k] = src[k] && iy >= 0 && iy < h && ix >= 0 && ix < w
                          ? _mm256_loadu_ps(src[k] + (iy * w + ix) * 8) : _mm256_setzero_ps();
            }}
            _mm512_storeu_ps(d + (i * {ti} + j) * 16,
                             _mm512_insertf32x8(_mm512_castps256_ps512(half[0]), half[1], 1));
        }}
}}
#endif

/* tile q's {m} x {m} outputs of output block ob (yt: pixel-major, ps floats a pixel) with the
   epilogue, clipped at the right and bottom edges, into y (lay as rlx_wg{m}_conv's) */
static inline void rlx_wg{m}_put(const rlx_conv_geo *g, int64_t q, int64_t o, int64_t ob,
                                const float *yt, int64_t ps, const float *bias,
                                const float *res, float *y, int act, float lo, float hi,
                                int lay) {{
    const int64_t oh = g->oh, ow = g->ow, p = oh * ow;
    const int64_t th = (oh + {m} - 1) / {m}, tw = (ow + {m} - 1) / {m};
    const int64_t b = q / (th * tw), ty = q / tw % th, tx = q % tw;
    const int64_t my = oh - ty * {m} < {m} ? oh - ty * {m} : {m};
    const int64_t mx = ow - tx * {m} < {m} ? ow - tx * {m} : {m};
    const float *bb = bias ? bias + ob * 8 : 0;
#if RLX_CB_VEC
    const __m256 vlo = _mm256_set1_ps(lo), vhi = _mm256_set1_ps(hi);
    const __m256 vb = bb ? _mm256_loadu_ps(bb) : _mm256_setzero_ps();
#endif
    for (int64_t i = 0; i < my; ++i)
        for (int64_t j = 0; j < mx; ++j) {{
            const int64_t at = (ty * {m} + i) * ow + tx * {m} + j;
            const float *s = yt + (i * {m} + j) * ps;
            /* NCHW8c: 8 channels of a pixel contiguous; NCHW: planes p apart */
            float *yy = y + b * o * p + ((lay & 2) ? (ob * p + at) * 8 : ob * 8 * p + at);
            const int64_t ys = (lay & 2) ? 1 : p;
            const float *rr = !res ? 0 : res + b * o * p
                + ((lay & 4) ? (ob * p + at) * 8 : ob * 8 * p + at);
            const int64_t rs = (lay & 4) ? 1 : p;
#if RLX_CB_VEC
            if (ys == 1 && (!rr || rs == 1)) {{  /* NCHW8c sides: one vector */
                _mm256_storeu_ps(yy, rlx_conv_fin8(_mm256_loadu_ps(s), bb != 0, vb, rr, act,
                                                   vlo, vhi));
                continue;
            }}
#endif
            for (int l = 0; l < 8; ++l)
                yy[l * ys] = rlx_conv_fin(s[l], bb ? bb[l] : 0.0f, bb != 0, rr, l * rs, act,
                                          lo, hi);
        }}
}}

/* tiles [t0, t1) of a batch (tile q: image q / (th tw), row of tiles q / tw % th, column
   q % tw) of a 3x3 stride-1 convolution of c input and o output channels (both multiples of
   8), u packed by rlx_wg{m}_pack, or with lazy (o a multiple of 16) the 3x3 filter packed by
   rlx_cb_pack, transformed here (rlx_wg{m}_lazy); x, y, res the whole batch (lay as
   rlx_cb_conv's: 1 the input is NCHW8c, 2 the output is, 4 the residual is). Returns 0 when
   out of memory */
static int rlx_wg{m}_conv(const rlx_conv_geo *g, const float *x, const float *u, int64_t o,
                         const float *bias, const float *res, float *y, int64_t t0,
                         int64_t t1, int act, float lo, float hi, int lay, int lazy) {{
    enum {{ M = {m}, TI = {ti}, TT = {tt} }};
    /* with pairs, an odd count of tiles gets a zero tile: every pair's 16 floats at a
       64-byte boundary (an odd count split half the vectors over two cache lines: 64 channels
       at 28 x 28, 49 tiles, ran 13% slower paired than not) */
    const int64_t c = g->c, nt = RLX_WG_PAIRS ? (t1 - t0 + 1) & ~(int64_t)1 : t1 - t0;
    const int64_t cbn = c / 8, obn = o / 8;
    float *v = rlx_wg_scratch((c + o) * TT * nt);
    if (v == 0) return 0;
    float *mo = v + c * TT * nt;  /* the GEMMs' outputs: position xi at mo + xi o nt */
    float d[TI * TI * 16];
    for (int64_t q = t0; q < t1; q += 1 + RLX_WG_PAIRS) {{
        for (int64_t cb = 0; cb < cbn; ++cb) {{
            float *vq = v + (cb * nt + (q - t0)) * 8;
            if (RLX_WG_PAIRS) {{  /* tiles q and q + 1 in one vector */
#if RLX_WG_PAIRS
                if (RLX_WG_GATHER2 && (lay & 1)) {{
                    rlx_wg{m}_gather2(g, x, q, q + 1 < t1 ? q + 1 : -1, cb, d);
                    rlx_wg{m}_in2(d, vq, c * nt);
                    continue;
                }}
#endif
                rlx_wg{m}_gather(g, x, q, cb, lay, d, 16);
                if (q + 1 < t1)
                    rlx_wg{m}_gather(g, x, q + 1, cb, lay, d + 8, 16);
                else
                    for (int64_t i = 0; i < TI * TI; ++i) memset(d + i * 16 + 8, 0, 32);
                rlx_wg{m}_in2(d, vq, c * nt);
            }} else {{
                rlx_wg{m}_gather(g, x, q, cb, lay, d, 8);
                rlx_wg{m}_in(d, vq, c * nt);
            }}
        }}
    }}
    /* position xi: an NCHW8c image of c channels, one row of nt pixels, in place */
    const rlx_conv_geo g1 = {{c, 1, nt, 1, 1, 1, 1, 0, 0, 1, 1, 1, nt}};
    const int64_t us = rlx_cb_packed_floats(o, c, 1, 1);
    if (lazy) {{
        /* RLX_WG_LAZY_PANELS panels at a time, a row of positions at a time: the group's 3x3
           filter stays in L2 over its {ti} rows, the transformed row in L2 for its GEMMs */
        const int64_t nq = o / 16;
        float *ub = rlx_wg_lazy_scratch(TI * RLX_WG_LAZY_PANELS * 16 * c);
        if (ub == 0) return 0;
        for (int64_t q0 = 0; q0 < nq; q0 += RLX_WG_LAZY_PANELS) {{
            const int64_t np = nq - q0 < RLX_WG_LAZY_PANELS ? nq - q0 : RLX_WG_LAZY_PANELS;
            for (int i = 0; i < TI; ++i) {{
                rlx_wg{m}_lazy(u, c, q0, np, i, ub);
                for (int r = 0; r < TI; ++r) {{
                    const int64_t xi = i * TI + r;
                    if (!rlx_cb_conv(&g1, v + xi * c * nt, ub + r * np * 16 * c, np * 16, 0, 0,
                                     mo + xi * o * nt + q0 * 16 * nt, 0, 1, 0, 0.0f, 0.0f, 3))
                        return 0;
                }}
            }}
        }}
    }} else
        for (int64_t xi = 0; xi < TT; ++xi)
            if (!rlx_cb_conv(&g1, v + xi * c * nt, u + xi * us, o, 0, 0, mo + xi * o * nt, 0,
                             1, 0, 0.0f, 0.0f, 3))
                return 0;
    float yt[M * M * 16];
    for (int64_t q = t0; q < t1; q += 1 + RLX_WG_PAIRS) {{
        for (int64_t ob = 0; ob < obn; ++ob) {{
            const float *mq = mo + (ob * nt + (q - t0)) * 8;
            if (RLX_WG_PAIRS) {{
                rlx_wg{m}_out2(mq, o * nt, yt);
                rlx_wg{m}_put(g, q, o, ob, yt, 16, bias, res, y, act, lo, hi, lay);
                if (q + 1 < t1)
                    rlx_wg{m}_put(g, q + 1, o, ob, yt + 8, 16, bias, res, y, act, lo, hi,
                                 lay);
            }} else {{
                rlx_wg{m}_out(mq, o * nt, yt);
                rlx_wg{m}_put(g, q, o, ob, yt, 8, bias, res, y, act, lo, hi, lay);
            }}
        }}
    }}
    return 1;
}}
"""
    )


SOURCE = (
    scratch.SOURCE
    + r"""
#ifndef RLX_WG_H
#define RLX_WG_H
#include <math.h>
/* AVX-512: the transforms run two tiles a vector (rlx_wg{m}_in2 / _out2) */
#if defined(__AVX512F__)
#define RLX_WG_PAIRS 1
#define RLX_WG_GATHER2 1
#else
#define RLX_WG_PAIRS 0
#endif
/* this thread's transform buffer (the tiles' V and M of one item; cpu/scratch.py), apart
   from rlx_sgemm_scratch, which the GEMMs (rlx_cb_conv) take while it is in use */
RLX_SCRATCH(rlx_wg_scratch, float)
/* this thread's on-the-fly filter buffer (a row of positions of RLX_WG_LAZY_PANELS panels) */
RLX_SCRATCH(rlx_wg_lazy_scratch, float)
#define RLX_WG_LAZY_PANELS 2

/* does the filter packed by rlx_wg{m}_pack or rlx_wg_lazy_pack (u, its flag float at
   flag_at: after the (m + 2)^2 positions, or after the 3x3 filter) need rlx_wg_direct?
   Where U holds an inf or NaN, Winograd's transforms would mix it into every
   output of its channel as NaN (inf - inf), where the convolution gives +-inf, and NaN only
   where an inf weight meets a zero (of the padding, too) */
static inline int rlx_wg_direct_only(const float *u, int64_t flag_at) {
    return u[flag_at] != 0.0f;
}

/* the OIHW 3x3 filter w (o x c) packed by rlx_cb_pack for the on-the-fly transform
   (rlx_wg{m}_lazy), then rlx_wg_direct_only's float: 1 when a weight is an inf or a NaN
   (its transform then holds one too; a finite filter's cannot overflow: every row of G sums
   to at most 1 in magnitude), else 0 */
static void rlx_wg_lazy_pack(int64_t o, int64_t c, const float *w, float *dst) {
    int bad = 0;
    for (int64_t k = 0; k < o * c * 9; ++k) bad |= w[k] - w[k] != 0.0f;
    rlx_cb_pack(o, c, 3, 3, w, dst);
    dst[rlx_cb_packed_floats(o, c, 3, 3)] = bad ? 1.0f : 0.0f;
}

/* tiles [t0, t1) of m x m outputs (as rlx_wg{m}_conv's) one output at a time, the OIHW 3x3
   filter wt read in place: what runs when the transform buffer cannot be had, or the
   transformed filter is not finite (slow but right). Taps over the padding multiply its
   zeros too: 0 * inf is NaN there, as in the reference's padded input */
static void rlx_wg_direct(const rlx_conv_geo *g, const float *x, const float *wt, int64_t o,
                          const float *bias, const float *res, float *y, int64_t m,
                          int64_t t0, int64_t t1, int act, float lo, float hi, int lay) {
    const int64_t c = g->c, hw = g->h * g->w, p = g->oh * g->ow;
    const int64_t th = (g->oh + m - 1) / m, tw = (g->ow + m - 1) / m;
    for (int64_t q = t0; q < t1; ++q) {
        const int64_t b = q / (th * tw), ty = q / tw % th, tx = q % tw;
        const float *xb = x + b * c * hw;
        for (int64_t oc = 0; oc < o; ++oc)
            for (int64_t oy = ty * m; oy < ty * m + m && oy < g->oh; ++oy)
                for (int64_t ox = tx * m; ox < tx * m + m && ox < g->ow; ++ox) {
                    float s = 0.0f;
                    for (int64_t ci = 0; ci < c; ++ci)
                        for (int64_t ki = 0; ki < 3; ++ki)
                            for (int64_t kj = 0; kj < 3; ++kj) {
                                const int64_t iy = oy - g->ph + ki, ix = ox - g->pw + kj;
                                const float xv = iy >= 0 && iy < g->h && ix >= 0 && ix < g->w
                                    ? xb[rlx_cb_at(lay & 1, ci, iy * g->w + ix, hw)] : 0.0f;
                                s += xv * wt[(oc * c + ci) * 9 + ki * 3 + kj];
                            }
                    const int64_t at = oy * g->ow + ox;
                    y[b * o * p + rlx_cb_at(lay & 2, oc, at, p)] = rlx_conv_fin(
                        s, bias ? bias[oc] : 0.0f, bias != 0, res ? res + b * o * p : 0,
                        rlx_cb_at(lay & 4, oc, at, p), act, lo, hi);
                }
    }
}
"""
    + "".join(_source(m) for m in TILES)
    + "#endif\n"
)


# after the positions, rlx_wg{m}_pack's float saying whether only rlx_wg_direct may run (a
# cache line, so what follows keeps its alignment)
FLAG_BYTES = 64


def packed_bytes(o: int, c: int, m: int) -> int:
    """Bytes of an o x c 3x3 filter transformed and packed by rlx_wg{m}_pack."""
    return (m + 2) ** 2 * conv_blocked.packed_bytes(o, c, 1, 1) + FLAG_BYTES


def lazy_packed_bytes(o: int, c: int) -> int:
    """Bytes of an o x c 3x3 filter packed by rlx_wg_lazy_pack (filter_on_the_fly)."""
    return conv_blocked.packed_bytes(o, c, 3, 3) + FLAG_BYTES


# the transform buffer of one item, at most (V and M of its tiles): chunks of tiles beyond it
ITEM_BYTES = 2 * 1024 * 1024
MIN_CHUNK = 48  # tiles per item, at least, where the buffer limits them (the tile's chunk)
MIN_ITEMS = 2  # items where one would do, for a team (a thread alone takes them all)
MIN_SPLIT = 12  # tiles per item, at least, when split for the team


# the on-the-fly filter (filter_on_the_fly) for items of at most this many tiles of F(4, 3)
LAZY_TILES = 32


def _chunk(m: int, n: int, c: int, o: int, oh: int, ow: int) -> tuple[int, int]:
    """Tiles of the whole batch, and tiles per item where the transform buffer limits them."""
    tiles = n * -(-oh // m) * -(-ow // m)
    per = (m + 2) ** 2 * (c + o) * 4  # bytes of one tile's V and M
    return tiles, min(tiles, max(MIN_CHUNK, ITEM_BYTES // per))


def filter_on_the_fly(m: int, n: int, c: int, o: int, oh: int, ow: int) -> bool:
    """Does F(m, 3) transform its filter in each call (rlx_wg{m}_lazy, from the 3x3 filter
    packed for the direct kernel: prepack kind ``winolazy``) instead of reading U prepacked?

    Each weight of U is used once per tile of an item, and U holds (m + 2)^2 / 9 times the
    filter's floats: with few tiles the GEMMs wait on U's stream from memory (ResNet-50's
    512 -> 512 at 4x4, batch 8, 8 tiles: 37.7 MB a call). The transform then writes U a row
    at a time into L2, which costs about as much again (512 -> 512: 1.1-1.8 ms of transform
    against 0.94 ms of GEMMs), so it pays only for F(4, 3) (36 positions from 9 taps) on at
    most LAZY_TILES tiles, with whole panels of 16 output channels. Emerald Rapids, 1 thread,
    per-kernel fastest thread-CPU time, A/B in one process (FIFO, load 12-18): 512 -> 512 at
    4x4 b8 2.78 -> 2.45 ms, 256 -> 256 at 7x7 b8 (32 tiles) 1.50-1.56 -> 1.43-1.50, 128 ->
    128 at 14x14 b1 (16 tiles) 0.26-0.27 -> 0.22-0.23; F(2, 3) on the fly was slower (256 ->
    256 at 7x7 b1 0.405 -> 0.45), and so were items of 56 tiles (128 -> 128 at 14x14 b8).
    ``RLX_WG_LAZY``: "0" never, "1" on every Winograd conv (A/B timing, tests); anything else
    is an ArgumentError."""
    env = env_choice("RLX_WG_LAZY", ("0", "1"))
    if env == "0" or o % 16:
        return False
    return env == "1" or (m == 4 and _chunk(m, n, c, o, oh, ow)[1] <= LAZY_TILES)


def emit_winograd(
    env: KernelEnv,
    w: Writer,
    m: int,
    packed: str,
    geo: str,
    n: int,
    x: str,
    wt: str,
    c: int,
    o: int,
    oh: int,
    ow: int,
    bias: str | None,
    res: str | None,
    out: str,
    tail: str,
    flops: int,
    lay: int = 0,
    lazy: bool = False,
) -> str:
    """The kernel's loop over chunks of tiles calling rlx_wg{m}_conv (x, wt, bias, res, out:
    C pointers of the input, OIHW filter, bias, residual and output of the whole batch;
    ``packed`` the filter packed by rlx_wg{m}_pack, or with ``lazy`` (the renderer's
    filter_on_the_fly) by rlx_wg_lazy_pack; lay as conv_blocked.emit_blocked's); returns
    IMPL. Out of memory, or a filter whose transform is not finite: rlx_wg_direct, one output
    at a time."""
    tiles, chunk = _chunk(m, n, c, o, oh, ow)
    # the float after the packed filter saying whether only rlx_wg_direct may run
    flag_at = ((lazy_packed_bytes(o, c) if lazy else packed_bytes(o, c, m)) - FLAG_BYTES) // 4
    split = chunk == tiles and tiles >= MIN_ITEMS * MIN_SPLIT
    if split:  # one chunk would do: items for the team, taken all at once by a thread alone
        chunk = -(-tiles // MIN_ITEMS)
    items = -(-tiles // chunk)
    conv_blocked.open_items(env, w, flops, items, geo)
    if split:
        w.line("const int solo = rlx_conv_team() == 1;")
        w.line("if (solo && it > 0) continue;")
    w.line(
        f"const int64_t t0 = it * {chunk}, t1 = {'solo || ' if split else ''}"
        f"t0 + {chunk} >= {tiles} ? {tiles} : t0 + {chunk};"
    )
    w.open(
        f"if (rlx_wg_direct_only({packed}, {flag_at}) || "
        f"!rlx_wg{m}_conv(&geo, {x}, {packed}, {o}, {bias or '0'}, {res or '0'}, "
        f"{out}, t0, t1, {tail}, {lay}, {int(lazy)}))"
    )
    w.line(
        f"rlx_wg_direct(&geo, {x}, {wt}, {o}, {bias or '0'}, {res or '0'}, {out}, {m}, "
        f"t0, t1, {tail}, {lay});"
    )
    w.close()
    w.close()
    return IMPL
