"""The two libc headers generated C includes, for a Hexagon build without a libc sysroot.

Clang's own resource headers give ``stdint.h``/``stddef.h`` and the HVX intrinsics; these give
``string.h`` and ``math.h`` as declarations (and classification macros on compiler builtins).
A compile-check needs nothing more; a linked program takes the definitions from minirt.py.
"""

from __future__ import annotations

STRING_H = r"""
#ifndef RLX_FREESTANDING_STRING_H
#define RLX_FREESTANDING_STRING_H
#include <stddef.h>
void* memcpy(void* __restrict__ d, const void* __restrict__ s, size_t n);
void* memmove(void* d, const void* s, size_t n);
void* memset(void* d, int c, size_t n);
#endif
"""

_UNARY = ("exp", "log", "sqrt", "tanh", "erf", "sin", "cos", "floor", "ceil", "rint",
          "nearbyint", "trunc", "fabs", "round", "expm1", "log1p")
_BINARY = ("pow", "fmod", "copysign", "fmax", "fmin")

MATH_H = "\n".join([
    "#ifndef RLX_FREESTANDING_MATH_H",
    "#define RLX_FREESTANDING_MATH_H",
    "#define INFINITY (__builtin_inff())",
    "#define NAN (__builtin_nanf(\"\"))",
    "#define HUGE_VAL (__builtin_huge_val())",
    "#define isnan(x) __builtin_isnan(x)",
    "#define isinf(x) __builtin_isinf(x)",
    "#define isfinite(x) __builtin_isfinite(x)",
    "#define signbit(x) __builtin_signbit(x)",
    *(f"double {f}(double x);\nfloat {f}f(float x);" for f in _UNARY),
    *(f"double {f}(double x, double y);\nfloat {f}f(float x, float y);" for f in _BINARY),
    "#endif", ""])

HEADERS: dict[str, str] = {"string.h": STRING_H, "math.h": MATH_H}
