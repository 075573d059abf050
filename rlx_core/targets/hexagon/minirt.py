"""minirt: the few libc, libm and compiler-rt pieces a linked Hexagon program needs, in C.

There is no Hexagon libc or compiler-rt on this machine, so a program for ``qemu-hexagon``
carries its own: Linux syscalls through ``trap0(#1)`` (read, write, exit), memcpy/memset,
the ``__hexagon_*`` division helpers Clang calls (integer division by shift-subtract, float
division by Newton steps in double), and the libm functions generated C calls. The libm here
computes in double and rounds once to float: good to about 1 ulp of f32, which is what the
conformance suite's f32 tolerance (2e-5) asks; it is not a general-purpose libm.
"""

from __future__ import annotations


def _two_over_pi_words(bits: int = 1184) -> str:
    """2/pi to ``bits`` bits (Machin's formula in integers), as C words after 64 zero bits."""
    prec = bits + 64

    def arctan_inv(x: int) -> int:  # arctan(1/x) * 2^prec
        total = term = (1 << prec) // x
        n, sign = 1, -1
        while term:
            term //= x * x
            n += 2
            total += sign * (term // n)
            sign = -sign
        return total

    pi = 4 * (4 * arctan_inv(5) - arctan_inv(239))  # pi * 2^prec
    frac = ((2 << (2 * prec)) // pi) >> (prec - bits)  # 2/pi * 2^bits
    words = [0, 0] + [(frac >> (bits - 32 * (i + 1))) & 0xFFFFFFFF for i in range(bits // 32)]
    return ", ".join(f"0x{w:08x}u" for w in words)


SOURCE = r"""
#include <stdint.h>
#include <stddef.h>

/* ---- Linux syscalls (the generic table: read 63, write 64, exit 93) ---- */
static long rlx_sys3(long n, long a, long b, long c) {
    register long r0 __asm__("r0") = a;
    register long r1 __asm__("r1") = b;
    register long r2 __asm__("r2") = c;
    register long r6 __asm__("r6") = n;
    __asm__ volatile("trap0(#1)" : "+r"(r0) : "r"(r1), "r"(r2), "r"(r6) : "memory");
    return r0;
}
void rlx_exit(int code) { rlx_sys3(93, code, 0, 0); for (;;) {} }
long rlx_read_all(void* p, long n) {
    long got = 0;
    while (got < n) { long r = rlx_sys3(63, 0, (long)((char*)p + got), n - got);
                      if (r <= 0) return got; got += r; }
    return got;
}
void rlx_write_all(const void* p, long n) {
    long put = 0;
    while (put < n) { long r = rlx_sys3(64, 1, (long)((const char*)p + put), n - put);
                      if (r <= 0) rlx_exit(3); put += r; }
}

/* ---- string.h ---- */
void* memcpy(void* __restrict__ d, const void* __restrict__ s, size_t n) {
    unsigned char* dp = d; const unsigned char* sp = s;
    while (n--) *dp++ = *sp++;
    return d;
}
void* memmove(void* d, const void* s, size_t n) {
    unsigned char* dp = d; const unsigned char* sp = s;
    if (dp < sp) { while (n--) *dp++ = *sp++; }
    else { dp += n; sp += n; while (n--) *--dp = *--sp; }
    return d;
}
/* Clang's call for block copies it knows are 8-byte multiples of at least 32 bytes */
void* __hexagon_memcpy_likely_aligned_min32bytes_mult8bytes(void* d, const void* s, size_t n) {
    return memcpy(d, s, n);
}
void* memset(void* d, int c, size_t n) {
    unsigned char* dp = d;
    while (n--) *dp++ = (unsigned char)c;
    return d;
}

/* ---- integer division (shift-subtract; Clang calls these for / and %) ---- */
static uint64_t rlx_udivmod64(uint64_t n, uint64_t d, uint64_t* rem) {
    uint64_t q = 0, r = 0;
    if (d == 0) { *rem = 0; return 0; }
    for (int i = 63; i >= 0; --i) {
        r = (r << 1) | ((n >> i) & 1u);
        if (r >= d) { r -= d; q |= (uint64_t)1 << i; }
    }
    *rem = r;
    return q;
}
uint64_t __hexagon_udivdi3(uint64_t a, uint64_t b) { uint64_t r; return rlx_udivmod64(a, b, &r); }
uint64_t __hexagon_umoddi3(uint64_t a, uint64_t b) { uint64_t r; rlx_udivmod64(a, b, &r); return r; }
int64_t __hexagon_divdi3(int64_t a, int64_t b) {
    uint64_t r, ua = a < 0 ? 0 - (uint64_t)a : (uint64_t)a, ub = b < 0 ? 0 - (uint64_t)b : (uint64_t)b;
    uint64_t q = rlx_udivmod64(ua, ub, &r);
    return (int64_t)(((a < 0) != (b < 0)) ? 0 - q : q);
}
int64_t __hexagon_moddi3(int64_t a, int64_t b) {
    uint64_t r, ua = a < 0 ? 0 - (uint64_t)a : (uint64_t)a, ub = b < 0 ? 0 - (uint64_t)b : (uint64_t)b;
    rlx_udivmod64(ua, ub, &r);
    return (int64_t)(a < 0 ? 0 - r : r);
}
uint32_t __hexagon_udivsi3(uint32_t a, uint32_t b) { return (uint32_t)__hexagon_udivdi3(a, b); }
uint32_t __hexagon_umodsi3(uint32_t a, uint32_t b) { return (uint32_t)__hexagon_umoddi3(a, b); }
int32_t __hexagon_divsi3(int32_t a, int32_t b) { return (int32_t)__hexagon_divdi3(a, b); }
int32_t __hexagon_modsi3(int32_t a, int32_t b) { return (int32_t)__hexagon_moddi3(a, b); }

/* ---- bits ---- */
static inline uint64_t rlx_dbits(double x) { uint64_t u; memcpy(&u, &x, 8); return u; }
static inline double rlx_dfrom(uint64_t u) { double x; memcpy(&x, &u, 8); return x; }
static inline uint32_t rlx_fbits(float x) { uint32_t u; memcpy(&u, &x, 4); return u; }
static inline float rlx_ffrom(uint32_t u) { float x; memcpy(&x, &u, 4); return x; }
static const double RLX_INF = __builtin_inf();
#define RLX_NAN (__builtin_nan(""))
/* 2^k for any k in [-2000, 2000], as two exact factors (each within double's range) */
static double rlx_scale(double x, int k) {
    while (k > 1000) { x *= rlx_dfrom((uint64_t)(1023 + 1000) << 52); k -= 1000; }
    while (k < -1000) { x *= rlx_dfrom((uint64_t)(1023 - 1000) << 52); k += 1000; }
    return x * rlx_dfrom((uint64_t)(1023 + k) << 52);
}

/* ---- division: Newton reciprocal on the mantissa in [1, 2) ---- */
double __hexagon_divdf3(double a, double b) {
    if (__builtin_isnan(a) || __builtin_isnan(b)) return RLX_NAN;
    int neg = (int)((rlx_dbits(a) ^ rlx_dbits(b)) >> 63);
    double sgn = neg ? -1.0 : 1.0;
    if (b == 0.0) return a == 0.0 ? RLX_NAN : sgn * RLX_INF;
    if (__builtin_isinf(b)) return __builtin_isinf(a) ? RLX_NAN : sgn * 0.0;
    if (__builtin_isinf(a)) return sgn * RLX_INF;
    uint64_t ub = rlx_dbits(b) & 0x7FFFFFFFFFFFFFFFull;
    int e = 0;
    if ((ub >> 52) == 0) { ub = rlx_dbits(rlx_dfrom(ub) * 18014398509481984.0); e = -54; }
    e += (int)(ub >> 52) - 1023;
    double m = rlx_dfrom((ub & 0x000FFFFFFFFFFFFFull) | 0x3FF0000000000000ull);  /* [1, 2) */
    double y = 1.4117647058823529 - 0.47058823529411764 * m;  /* 24/17 - 8/17 m */
    for (int i = 0; i < 5; ++i) y = y * (2.0 - m * y);
    double aa = a < 0 ? -a : a;
    double q = aa * y;                  /* |a| / m */
    double r = aa - q * m;              /* one correction step */
    q = q + r * y;
    return sgn * rlx_scale(q, -e);
}
float __hexagon_divsf3(float a, float b) { return (float)__hexagon_divdf3((double)a, (double)b); }

/* ---- libm (double inside, f32 entry points round once) ---- */
double fabs(double x) { return rlx_dfrom(rlx_dbits(x) & 0x7FFFFFFFFFFFFFFFull); }
float fabsf(float x) { return rlx_ffrom(rlx_fbits(x) & 0x7FFFFFFFu); }
double copysign(double x, double y) {
    return rlx_dfrom((rlx_dbits(x) & 0x7FFFFFFFFFFFFFFFull) | (rlx_dbits(y) & 0x8000000000000000ull));
}
float copysignf(float x, float y) {
    return rlx_ffrom((rlx_fbits(x) & 0x7FFFFFFFu) | (rlx_fbits(y) & 0x80000000u));
}
double trunc(double x) {
    if (!(fabs(x) < 4503599627370496.0)) return x;  /* |x| >= 2^52, inf, NaN */
    return copysign((double)(int64_t)x, x);
}
double floor(double x) { double t = trunc(x); return (t > x) ? t - 1.0 : t; }
double ceil(double x) { double t = trunc(x); return (t < x) ? t + 1.0 : t; }
double rint(double x) {  /* half to even */
    if (!(fabs(x) < 4503599627370496.0)) return x;
    double t = trunc(x), f = x - t;
    if (fabs(f) > 0.5 || (fabs(f) == 0.5 && ((int64_t)t & 1))) t += (x < 0 ? -1.0 : 1.0);
    return copysign(t, x);
}
float truncf(float x) { return (float)trunc(x); }
float floorf(float x) { return (float)floor(x); }
float ceilf(float x) { return (float)ceil(x); }
float rintf(float x) { return (float)rint(x); }
float nearbyintf(float x) { return (float)rint(x); }
double nearbyint(double x) { return rint(x); }

double sqrt(double x) {
    if (__builtin_isnan(x) || x < 0) return x == 0 ? x : RLX_NAN;
    if (x == 0 || __builtin_isinf(x)) return x;
    uint64_t u = rlx_dbits(x);
    int e = (int)(u >> 52) - 1023;
    if ((u >> 52) == 0) return sqrt(x * 18014398509481984.0) / 134217728.0;
    int half = e >> 1;                                   /* floor(e / 2) */
    double m = rlx_scale(x, -2 * half);                  /* [1, 4) */
    double r = 1.0 / 1.5;                                /* rsqrt(m) by Newton */
    r = m < 2 ? 0.85 : 0.6;
    for (int i = 0; i < 6; ++i) r = r * (1.5 - 0.5 * m * r * r);
    double s = m * r;
    s = s + 0.5 * (m - s * s) * r;
    return rlx_scale(s, half);
}
float sqrtf(float x) { return (float)sqrt((double)x); }

static const double RLX_LN2_HI = 6.93147180369123816490e-01, RLX_LN2_LO = 1.90821492927058770002e-10;
double exp(double x) {
    if (__builtin_isnan(x)) return x;
    if (x > 709.8) return RLX_INF;
    if (x < -745.2) return 0.0;
    double kf = rint(x * 1.4426950408889634);
    int k = (int)kf;
    double r = (x - kf * RLX_LN2_HI) - kf * RLX_LN2_LO;
    double term = 1.0, sum = 1.0;
    for (int i = 1; i < 15; ++i) { term = term * r / i; sum += term; }
    return rlx_scale(sum, k);
}
double expm1(double x) {
    if (fabs(x) < 0.3) {
        double term = x, sum = x;
        for (int i = 2; i < 18; ++i) { term = term * x / i; sum += term; }
        return sum;
    }
    return exp(x) - 1.0;
}
double log(double x) {
    if (__builtin_isnan(x) || x < 0) return RLX_NAN;
    if (x == 0) return -RLX_INF;
    if (__builtin_isinf(x)) return x;
    int e = 0;
    if ((rlx_dbits(x) >> 52) == 0) { x *= 18014398509481984.0; e = -54; }
    uint64_t u = rlx_dbits(x);
    e += (int)(u >> 52) - 1023;
    double m = rlx_dfrom((u & 0x000FFFFFFFFFFFFFull) | 0x3FF0000000000000ull);
    if (m > 1.4142135623730951) { m *= 0.5; e += 1; }
    double s = (m - 1.0) / (m + 1.0), s2 = s * s, term = s, sum = 0.0;
    for (int i = 1; i < 40; i += 2) { sum += term / i; term *= s2; }
    return e * RLX_LN2_HI + (e * RLX_LN2_LO + 2.0 * sum);
}
double log1p(double x) { return fabs(x) < 1e-4 ? x - x * x / 2 + x * x * x / 3 : log(1.0 + x); }
static int rlx_is_int(double y) { return fabs(y) >= 4503599627370496.0 || trunc(y) == y; }
static int rlx_is_odd(double y) {
    return fabs(y) < 9007199254740992.0 && rlx_is_int(y) && ((int64_t)y & 1);
}
double pow(double x, double y) {
    if (y == 0) return 1.0;
    if (x == 1.0) return 1.0;
    if (__builtin_isnan(x) || __builtin_isnan(y)) return RLX_NAN;
    if (x == 0) {
        if (y < 0) return rlx_is_odd(y) ? copysign(RLX_INF, x) : RLX_INF;
        return rlx_is_odd(y) ? x : 0.0;
    }
    if (x < 0) {
        if (__builtin_isinf(x))  /* C99 F.9.4.4: -0/+0 for y < 0, -inf/+inf for y > 0 */
            return y < 0 ? (rlx_is_odd(y) ? -0.0 : 0.0) : (rlx_is_odd(y) ? -RLX_INF : RLX_INF);
        if (__builtin_isinf(y)) return fabs(x) == 1.0 ? 1.0 : ((fabs(x) < 1) == (y < 0) ? RLX_INF : 0.0);
        if (!rlx_is_int(y)) return RLX_NAN;
        double p = pow(-x, y);
        return rlx_is_odd(y) ? -p : p;
    }
    if (__builtin_isinf(y)) return (x < 1) == (y < 0) ? RLX_INF : 0.0;
    return exp(y * log(x));
}
double fmod(double x, double y) {
    if (__builtin_isnan(x) || __builtin_isnan(y) || __builtin_isinf(x) || y == 0) return RLX_NAN;
    double ax = fabs(x), ay = fabs(y);
    if (__builtin_isinf(y) || ax < ay) return x;
    while (ax >= ay) {  /* subtract the largest ay * 2^k <= ax: exact (Sterbenz) */
        double t = ay;
        while (t * 2.0 <= ax) t *= 2.0;
        ax -= t;
    }
    return copysign(ax, x);
}
float expf(float x) { return (float)exp((double)x); }
float expm1f(float x) { return (float)expm1((double)x); }
float logf(float x) { return (float)log((double)x); }
float log1pf(float x) { return (float)log1p((double)x); }
float powf(float x, float y) { return (float)pow((double)x, (double)y); }
float fmodf(float x, float y) { return (float)fmod((double)x, (double)y); }

static double rlx_sin_poly(double r) {  /* |r| <= pi/4 */
    double r2 = r * r, term = r, sum = r;
    for (int i = 3; i < 25; i += 2) { term = -term * r2 / ((i - 1) * i); sum += term; }
    return sum;
}
static double rlx_cos_poly(double r) {
    double r2 = r * r, term = 1.0, sum = 1.0;
    for (int i = 2; i < 26; i += 2) { term = -term * r2 / ((i - 1) * i); sum += term; }
    return sum;
}
/* 2/pi in bits, 32 a word, most significant first, after 64 zero bits (rlx_ph_bit): enough
   for every finite double (the top exponent needs bits up to ~1100) */
static const uint32_t rlx_2_over_pi[] = {@TWO_OVER_PI@};
/* the 32 bits of the table from bit t on */
static uint32_t rlx_ph_word(int t) {
    int w = t >> 5, sh = t & 31;
    return sh ? (rlx_2_over_pi[w] << sh) | (rlx_2_over_pi[w + 1] >> (32 - sh)) : rlx_2_over_pi[w];
}
/* |x| = k pi/2 + r for |x| >= 2^20 (Payne-Hanek): x = m 2^e exactly (m of 53 bits), and
   x 2/pi mod 4 needs only the 128 bits of 2/pi from weight 2^(1-e) down (higher bits give
   multiples of 4, lower ones under 2^-74): P = m * those bits mod 2^128, whose top 2 bits are
   k mod 4 and the rest the fraction of a quadrant */
static double rlx_reduce_large(double ax, int* q) {
    union { double d; uint64_t u; } b = {ax};
    int e = (int)((b.u >> 52) & 0x7ff) - 1075;          /* ax = m 2^e */
    uint64_t m = (b.u & 0xfffffffffffffull) | (1ull << 52);
    uint32_t u[2] = {(uint32_t)m, (uint32_t)(m >> 32)}, v[4], p[6] = {0, 0, 0, 0, 0, 0};
    int t0 = e + 62;                                    /* table bit of weight 2^(1-e) */
    for (int j = 0; j < 4; ++j) v[3 - j] = rlx_ph_word(t0 + 32 * j);
    for (int i = 0; i < 2; ++i) {
        uint64_t carry = 0;
        for (int j = 0; j < 4; ++j) {
            uint64_t t = (uint64_t)u[i] * v[j] + p[i + j] + carry;
            p[i + j] = (uint32_t)t;
            carry = t >> 32;
        }
        p[i + 4] = (uint32_t)carry;
    }
    int k = (int)(p[3] >> 30);
    double f = ((double)((((uint64_t)(p[3] & 0x3fffffffu)) << 32) | p[2])
                + (double)p[1] * 2.3283064365386963e-10) * 2.1684043449710089e-19;  /* 2^-62 */
    if (f >= 0.5) { f -= 1.0; k += 1; }                 /* |r| <= pi/4 */
    *q = k & 3;
    return f * 1.5707963267948966;
}
/* x = k pi/2 + r: Cody-Waite with three parts of pi/2 (33 bits each, so k * part is exact)
   below 2^20, Payne-Hanek above */
static double rlx_reduce(double x, int* q) {
    if (fabs(x) >= 1048576.0) {
        double r = rlx_reduce_large(fabs(x), q);
        if (x < 0) { *q = (4 - *q) & 3; r = -r; }       /* -x = (-k) pi/2 + (-r) */
        return r;
    }
    double k = rint(x * 0.63661977236758134);
    *q = (int)((int64_t)k & 3);
    return ((x - k * 1.57079632673412561417e+00) - k * 6.07710050650619224932e-11)
           - k * 2.02226624879595063154e-21;
}
double sin(double x) {
    if (__builtin_isnan(x) || __builtin_isinf(x)) return RLX_NAN;
    int q; double r = rlx_reduce(x, &q);
    switch (q) { case 0: return rlx_sin_poly(r); case 1: return rlx_cos_poly(r);
                 case 2: return -rlx_sin_poly(r); default: return -rlx_cos_poly(r); }
}
double cos(double x) {
    if (__builtin_isnan(x) || __builtin_isinf(x)) return RLX_NAN;
    int q; double r = rlx_reduce(x, &q);
    switch (q) { case 0: return rlx_cos_poly(r); case 1: return -rlx_sin_poly(r);
                 case 2: return -rlx_cos_poly(r); default: return rlx_sin_poly(r); }
}
double tanh(double x) {
    if (__builtin_isnan(x)) return x;
    if (fabs(x) > 22.0) return copysign(1.0, x);
    double e = expm1(2.0 * fabs(x));
    return copysign(e / (e + 2.0), x);
}
float sinf(float x) { return (float)sin((double)x); }
float cosf(float x) { return (float)cos((double)x); }
float tanhf(float x) { return (float)tanh((double)x); }
double erf(double x) {  /* Taylor series near 0, continued-fraction-free complement beyond */
    if (__builtin_isnan(x)) return x;
    double ax = fabs(x);
    if (ax > 6.0) return copysign(1.0, x);
    if (ax < 2.5) {
        double x2 = ax * ax, term = ax, sum = ax;
        for (int n = 1; n < 80; ++n) { term = -term * x2 / n; sum += term / (2 * n + 1); }
        return copysign(1.1283791670955126 * sum, x);
    }
    /* erfc(x) by its asymptotic-free continued fraction (Lentz), x >= 2.5 */
    double f = ax, c = ax, d = 0.0;
    for (int n = 1; n < 60; ++n) {
        double an = n * 0.5;
        d = ax + an * d; d = 1.0 / d;
        c = ax + an / c;
        f *= c * d;
    }
    return copysign(1.0 - exp(-ax * ax) / (f * 1.7724538509055160), x);
}
float erff(float x) { return (float)erf((double)x); }
double fmax(double a, double b) { return __builtin_isnan(a) ? b : (__builtin_isnan(b) ? a : (a > b ? a : b)); }
double fmin(double a, double b) { return __builtin_isnan(a) ? b : (__builtin_isnan(b) ? a : (a < b ? a : b)); }
float fmaxf(float a, float b) { return (float)fmax(a, b); }
float fminf(float a, float b) { return (float)fmin(a, b); }
double round(double x) { double t = trunc(x); return fabs(x - t) >= 0.5 ? t + copysign(1.0, x) : t; }
float roundf(float x) { return (float)round(x); }
"""
SOURCE = SOURCE.replace("@TWO_OVER_PI@", _two_over_pi_words())
