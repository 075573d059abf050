"""The erf a cpu GEMM's epilogue uses (the erf-GELU after MiniLM's FFN1): fewer vector ops.

The prelude's ``rlx_erf_f`` (c_common/prelude.py) is shared by every C-like target and keeps
4 ulp below |x| = 1; its (6, 4) rational, clamps, copysign and NaN select are ~22 of the ~30
AVX-512 ops an erf-GELU element costs, and the epilogue is bound by that count (two vector
ports), not by the divide. Here a (5, 3) rational (Lawson fit to absolute error on
[0, 3.6]) is clamped at |x| = 3.5, where it has passed 1 (so large arguments give +-1 exactly,
as erf rounds to in f32 from about 3.9): max |error| 1.02e-6 in f32 (numpy, 450,001 points of
[0, 4.5]; tests/targets/test_cpu_epilogue_erf.py holds the compiled one to 1.25e-6),
and both clamps are written so a NaN passes through them (``C < a ? C : a`` is vminps with
the NaN operand second), which drops the prelude's ``x != x`` select. That select stays in
the prelude because other targets' compilers (Hexagon's) turned a clamp into a NaN-dropping
fmin; this function is compiled only by the cpu target's GCC or Clang, without fast-math.

The GELU epilogue alone, 8 x 32 tiles in L1 (standalone C, one thread, SCHED_FIFO, load ~17):
0.28-0.29 ns per element with the prelude's erf, 0.24 with this one. MiniLM's FFN1 kernel
(8 x 128 x 384 @ 384 x 1536 + bias, GELU; one thread, thread CPU time, both builds in one
process in turns, SCHED_FIFO, load ~15): 5.66 -> 5.60 ms min, 6.08 -> 6.00 ms p50; the GEMM
with bias alone takes 5.23, so the GELU went from ~0.44 to ~0.38 ms.

The int8 linears' GELU in their store (cpu/igemm_packed.py's ``rlx_ig_epilogue``, 8 x 16
tiles) calls it too (one thread, SCHED_FIFO, builds in alternating processes, load 2-5): that
epilogue alone (standalone C, 8 runs each) 0.52-0.61 ns per element, median 0.57 -> 0.47-0.61,
median 0.51; the dynamic int8 FFN1 linear + GELU (thread CPU time, min of 25 blocks, 4 runs
each) 0.507-0.518 -> 0.488-0.496 ms at 128 x 384 x 1536, 4.12-4.27 -> 3.87-4.08 ms at
1024 x 384 x 1536; the static one there 4.56-4.86 -> 4.43-4.61 ms.
"""

from __future__ import annotations

NAME = "rlx_erf_gemm_f"
ENABLED = True  # False: the prelude's erf in f32 GEMMs (side-by-side measurements; the int8
# linears' store, igemm_packed.rlx_ig_epilogue, defines and calls this one whatever it says)

SOURCE = f"""#ifndef RLX_ERF_GEMM_F
#define RLX_ERF_GEMM_F
static inline float {NAME}(float x) {{
    float a = fabsf(x);
    a = 3.5f < a ? 3.5f : a;  /* a NaN stays NaN: no x != x select */
    const float z = a * a;
    float p = -3.20103226e-07f;
    p = p * z + 1.36551207e-05f;
    p = p * z + 0.000412860885f;
    p = p * z + 0.0412523374f;
    p = p * z + 0.136668816f;
    p = p * z + 1.12838519f;
    float q = 0.00823616143f;
    q = q * z + 0.0879037827f;
    q = q * z + 0.454506904f;
    q = q * z + 1.0f;
    float r = a * p / q;
    r = 1.0f < r ? 1.0f : r;
    return copysignf(r, x);
}}
#endif
"""


def choice() -> tuple[str, str] | None:
    """What every GEMM kernel's ``KernelEnv.erf`` is (CpuRenderer.gemm, whether the GEMM is
    split over the team or runs as one chunk): (this function, its definition), or None for
    the prelude's erf when the fast one is off."""
    return (NAME, SOURCE) if ENABLED else None
