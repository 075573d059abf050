"""A ``metal_stdlib`` that declares what generated MSL uses, for a strict C++17 syntax pass.

There is no Metal compiler for Linux. This header maps Metal's address spaces to clang address
spaces (``device`` 1, ``constant`` 2), ``threadgroup`` arrays to statics (clang forbids
address-space-qualified locals), declares the vector id type, ``half`` (clang's storage-only
``__fp16``; the dialect computes in f32), ``mem_flags``, ``simd_shuffle_xor``,
``threadgroup_barrier``, ``as_type`` and the math builtins with Metal's overloads, so clang
checks every name, type and call in a kernel. Metal's ``[[...]]`` attributes are not checked
(clang ignores unknown attributes; the pass turns off only that warning).
"""

from __future__ import annotations

_MATH1 = ("exp", "exp2", "log", "log2", "sqrt", "rsqrt", "tanh", "sin", "cos", "floor", "ceil",
          "rint", "round", "trunc", "fabs", "abs", "sign")
_MATH2 = ("pow", "fmod", "min", "max", "fmin", "fmax", "copysign")

METAL_STDLIB = "\n".join([
    "#pragma once",
    "#define kernel extern \"C\"",
    "#define device __attribute__((address_space(1)))",
    "#define constant __attribute__((address_space(2)))",
    "#define threadgroup static",
    "#define thread",
    "typedef unsigned int uint;",
    "typedef unsigned short ushort;",
    "typedef __fp16 half;  // clang's storage-only half: arithmetic promotes to float",
    "namespace metal {",
    "struct uint3 { uint x, y, z; };",
    "enum class mem_flags { mem_none = 0, mem_device = 1, mem_threadgroup = 2 };",
    "void threadgroup_barrier(mem_flags flags);",
    "template <typename T, typename S> T as_type(S value);",
    "template <typename T> T simd_shuffle_xor(T data, ushort mask);",
    *(f"float {f}(float x);" for f in _MATH1),
    *(f"float {f}(float x, float y);" for f in _MATH2),
    "int abs(int x); int min(int x, int y); int max(int x, int y);",
    "int clamp(int x, int lo, int hi); float clamp(float x, float lo, float hi);",
    "uint min(uint x, uint y); uint max(uint x, uint y);",
    "bool isnan(float x); bool isinf(float x);",
    "}", ""])
