"""The C prelude every generated translation unit starts with: types and scalar helpers.

The helpers pin the numpy reference's semantics (rlx_core/targets/numpy_ref/semantics.py) where
C leaves them open: integer division truncates and gives 0 for a zero divisor, signed
overflow wraps (arithmetic is done in the unsigned type), float -> int casts saturate with
NaN -> 0, max/min propagate NaN, f16/bf16 round to nearest even. The block is guarded so that
several programs can share one translation unit (the specialization cache embeds many).
"""

from __future__ import annotations

from rlx_core.targets.c_common.ctype_table import INT_BOUNDS, UNSIGNED, VALUE

_HEAD = r"""
#ifndef RLX_PRELUDE_H
#define RLX_PRELUDE_H
#include <stdint.h>
#include <stddef.h>
#include <string.h>
#include <math.h>

/* f16: the compiler's _Float16 when it has one (GCC/Clang define __FLT16_MAX__), else bits */
#if defined(__FLT16_MAX__) && !defined(RLX_NO_FLOAT16)
#define RLX_HAVE_FLOAT16 1
typedef _Float16 rlx_f16;
static inline float rlx_f16_ld(rlx_f16 h) { return (float)h; }
static inline rlx_f16 rlx_f16_st(float f) { return (rlx_f16)f; }
static inline rlx_f16 rlx_f16_st_d(double f) { return (rlx_f16)f; }
#else
#define RLX_HAVE_FLOAT16 0
typedef uint16_t rlx_f16;
static inline float rlx_f16_ld(rlx_f16 h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1Fu, man = h & 0x3FFu;
    uint32_t bits;
    if (exp == 0x1Fu) {
        bits = sign | 0x7F800000u | (man << 13);
    } else if (exp == 0) {
        if (man == 0) {
            bits = sign;
        } else {  /* subnormal: normalise */
            int e = -1;
            do { man <<= 1; e++; } while ((man & 0x400u) == 0);
            bits = sign | ((uint32_t)(127 - 15 - e) << 23) | ((man & 0x3FFu) << 13);
        }
    } else {
        bits = sign | ((exp + 112u) << 23) | (man << 13);
    }
    float f; memcpy(&f, &bits, 4); return f;
}
static inline rlx_f16 rlx_f16_st(float f) {
    uint32_t x; memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000u, absx = x & 0x7FFFFFFFu;
    if (absx > 0x7F800000u) return (rlx_f16)(sign | 0x7E00u);          /* NaN */
    if (absx >= 0x477FF000u) return (rlx_f16)(sign | 0x7C00u);         /* overflow -> inf */
    if (absx < 0x38800000u) {                                          /* subnormal or zero */
        if (absx < 0x33000000u) return (rlx_f16)sign;
        uint32_t man = (absx & 0x7FFFFFu) | 0x800000u;
        int shift = 126 - (int)(absx >> 23);  /* 14..24: value / 2^-24 == man >> shift */
        uint32_t half = man >> shift, rest = man & ((1u << shift) - 1u);
        uint32_t mid = 1u << (shift - 1);
        if (rest > mid || (rest == mid && (half & 1u))) half++;
        return (rlx_f16)(sign | half);
    }
    uint32_t r = absx - 0x38000000u;  /* rebias the exponent */
    r = (r + 0xFFFu + ((r >> 13) & 1u)) >> 13;
    return (rlx_f16)(sign | r);
}
static inline rlx_f16 rlx_f16_st_d(double f) { return rlx_f16_st((float)f); }
#endif
static inline float rlx_round_f16(float f) { return rlx_f16_ld(rlx_f16_st(f)); }
static inline float rlx_round_f16_d(double f) { return rlx_f16_ld(rlx_f16_st_d(f)); }

/* bf16 is stored as the top 16 bits of a float32 */
static inline float rlx_bf16_ld(uint16_t b) {
    uint32_t u = (uint32_t)b << 16; float f; memcpy(&f, &u, 4); return f;
}
static inline uint16_t rlx_bf16_st(float f) {
    uint32_t u; memcpy(&u, &f, 4);
    if (f != f) return (uint16_t)((u >> 16) | 0x40u);  /* keep NaN a NaN */
    u += 0x7FFFu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}
static inline float rlx_round_bf16(float f) { return rlx_bf16_ld(rlx_bf16_st(f)); }

/* float helpers: NaN-propagating max/min (np.maximum), sign keeping NaN, stable logistic */
static inline float rlx_max_f(float a, float b) { return (a != a || a > b) ? a : b; }
static inline float rlx_min_f(float a, float b) { return (a != a || a < b) ? a : b; }
static inline double rlx_max_d(double a, double b) { return (a != a || a > b) ? a : b; }
static inline double rlx_min_d(double a, double b) { return (a != a || a < b) ? a : b; }
static inline float rlx_sign_f(float x) { return x != x ? x : (float)((x > 0) - (x < 0)); }
static inline double rlx_sign_d(double x) { return x != x ? x : (double)((x > 0) - (x < 0)); }
/* f32 exp and erf the compiler can vectorise: branch-free arithmetic and selects, no calls
   (libm's expf/erff are scalar calls, which keep softmax and erf-GELU loops scalar) */
static inline float rlx_pow2i_f(int32_t n) {
    uint32_t bits = (uint32_t)(n + 127) << 23;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}
/* exp(r) for r = x - n ln2 (|r| <= ln2/2; ln2 split in two for an exact product): Cephes
   expf's degree-6 polynomial, about 1 ulp. Shared by rlx_exp_f and the cpu attention's
   softmax exp, which must agree bit for bit */
static inline float rlx_exp_rem_f(float x, float n) {
    float r = x - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    return p * r * r + r + 1.0f;
}
static inline float rlx_exp_f(float x) {
    /* Cephes expf: x = n ln2 + r with |r| <= ln2/2, exp(r) by rlx_exp_rem_f; 2^n as two
       normal factors so results in the subnormal range stay correct */
    const float xc = x < -103.5f ? -103.5f : (x > 88.72283935546875f ? 88.72283935546875f : x);
    const float n = __builtin_floorf(xc * 1.44269504088896341f + 0.5f);
    const float p = rlx_exp_rem_f(xc, n);
    const int32_t ni = (int32_t)n, n1 = ni >> 1;
    float y = p * rlx_pow2i_f(n1) * rlx_pow2i_f(ni - n1);
    y = x > 88.72283935546875f ? INFINITY : y;
    y = x < -103.5f ? 0.0f : y;
    return x != x ? x : y;
}
static inline float rlx_erf_f(float x) {
    /* erf(x) = x P(x^2) / Q(x^2) on |x| <= 4, a (6, 4) rational fitted to relative error
       (Lawson iteration) with float coefficients: within 4.1 ulp below |x| = 1 and 4e-7 absolute
       above, checked against libm's double erf on every third float of [0, 4.5]. Beyond 4,
       erf rounds to +-1 in f32. No exp and no branch: about twice the speed of the
       series + Abramowitz-Stegun pair it replaces, which ran both halves and an exp. */
    float a = fabsf(x);
    a = a < 4.0f ? a : 4.0f;
    const float z = a * a;
    float p = 1.91103435e-08f;
    p = p * z - 1.9422514e-06f;
    p = p * z + 0.000147280458f;
    p = p * z + 0.00399040617f;
    p = p * z + 0.0515244342f;
    p = p * z + 0.207122043f;
    p = p * z + 1.12837911f;
    float q = 0.00102106528f;
    q = q * z + 0.014957767f;
    q = q * z + 0.117969394f;
    q = q * z + 0.51688838f;
    q = q * z + 1.0f;
    float r = a * p / q;
    r = r < 1.0f ? r : 1.0f;
    r = copysignf(r, x);
    return x != x ? x : r;
}
static inline float rlx_tanh_f(float x) {
    /* Cephes tanhf with both halves computed and a select, so a loop of it vectorises
       (libm's tanhf is a scalar call: GPT-2's tanh GELU spent 12 us on 1,024 values of it):
       below |x| = 0.625 x + x^3 P(x^2), above 1 - 2 / (exp(2|x|) + 1) with the sign of x;
       |x| is clamped at 10, where tanh rounds to 1 in f32, so exp does not overflow */
    const float a = fabsf(x), z = x * x;
    float p = -5.70498872745e-3f;
    p = p * z + 2.06390887954e-2f;
    p = p * z - 5.37397155531e-2f;
    p = p * z + 1.33314422036e-1f;
    p = p * z - 3.33332819422e-1f;
    const float small = copysignf(p * z * x + x, x);  /* -0.0 stays -0.0 */
    const float e = rlx_exp_f(2.0f * (a < 10.0f ? a : 10.0f));
    const float big = copysignf(1.0f - 2.0f / (e + 1.0f), x);
    return x != x ? x : (a < 0.625f ? small : big);
}
static inline float rlx_logistic_f(float x) {
    float e = rlx_exp_f(-fabsf(x)); return x >= 0 ? 1.0f / (1.0f + e) : e / (1.0f + e);
}
static inline double rlx_logistic_d(double x) {
    double e = exp(-fabs(x)); return x >= 0 ? 1.0 / (1.0 + e) : e / (1.0 + e);
}
static inline uint64_t rlx_upow(uint64_t base, uint64_t e) {
    uint64_t r = 1;
    while (e) { if (e & 1u) r *= base; base *= base; e >>= 1; }
    return r;
}
"""


def _int_helpers(name: str) -> str:
    t, u = VALUE[name], UNSIGNED[name]
    lo, hi = INT_BOUNDS[name]
    signed = lo < 0
    lines = [f"/* {name} */"]
    if signed:
        lines.append(
            f"static inline {t} rlx_div_{name}({t} a, {t} b) {{ return b == 0 ? 0 : "
            f"(b == -1 ? ({t})(({u})0 - ({u})a) : ({t})(a / b)); }}")
        lines.append(
            f"static inline {t} rlx_rem_{name}({t} a, {t} b) {{ return (b == 0 || b == -1) ? 0 "
            f": ({t})(a % b); }}")
        lines.append(
            f"static inline {t} rlx_pow_{name}({t} a, {t} b) {{\n"
            f"    if (b < 0) return a == 1 ? 1 : (a == -1 ? ((b & 1) ? -1 : 1) : 0);\n"
            f"    return ({t})rlx_upow((uint64_t)(int64_t)a, (uint64_t)b);\n}}")
        lines.append(f"static inline {t} rlx_abs_{name}({t} a) {{ return a < 0 ? "
                     f"({t})(({u})0 - ({u})a) : a; }}")
    else:
        lines.append(f"static inline {t} rlx_div_{name}({t} a, {t} b) {{ return b == 0 ? 0 : "
                     f"({t})(a / b); }}")
        lines.append(f"static inline {t} rlx_rem_{name}({t} a, {t} b) {{ return b == 0 ? 0 : "
                     f"({t})(a % b); }}")
        lines.append(f"static inline {t} rlx_pow_{name}({t} a, {t} b) {{ "
                     f"return ({t})rlx_upow((uint64_t)a, (uint64_t)b); }}")
    # float -> int: truncate toward zero, saturate, NaN -> 0 (semantics.convert)
    lo_lit = "INT64_MIN" if name == "i64" else str(lo)
    hi_lit = "INT64_MAX" if name == "i64" else (f"{hi}u" if name == "u32" else str(hi))
    lines.append(
        f"static inline {t} rlx_f2i_{name}(double f) {{\n"
        f"    if (f != f) return 0;\n"
        f"    if (f >= (double){hi_lit}) return {hi_lit};\n"
        f"    if (f <= (double){lo_lit}) return {lo_lit};\n"
        f"    return ({t})f;\n}}")
    return "\n".join(lines)


def prelude() -> str:
    """The guarded prelude block (identical for every program, so it caches well)."""
    ints = "\n".join(_int_helpers(n) for n in INT_BOUNDS)
    return _HEAD.lstrip("\n") + ints + "\n#endif /* RLX_PRELUDE_H */\n"
