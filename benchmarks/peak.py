"""The machine's f32 multiply-add ceiling: what no implementation of a benchmark can beat.

``fma_peak(threads)`` compiles a loop of independent fused multiply-adds on register-resident
vectors (no loads, no stores) with the CPU target's compiler, runs it on ``threads`` OpenMP
threads at once and returns the summed GFLOP/s (the best of a few rounds). A benchmark's FLOP
count divided by it is the least time any code can take on this machine, so a ratio target
can be checked against arithmetic before anyone profiles: at 784-128-10/128 the MLP training
step is 52.4 MFLOP, which at 2 x 116 GFLOP/s (this 2-core Zen 4 VM) is 0.226 ms.

    python benchmarks/peak.py [--threads N]
"""

from __future__ import annotations

import argparse
import ctypes
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

# GCC/Clang vector extensions: 16 floats per vector (one zmm with AVX-512, two ymm with AVX2),
# CHAINS independent accumulators so the FMA latency is hidden; -ffp-contract (GNU C's
# default) makes each a * b + c one fused instruction
SOURCE = r"""
#define _GNU_SOURCE
#include <sched.h>
#include <stdint.h>
#include <time.h>
#include <omp.h>
typedef float rlx_v16 __attribute__((vector_size(64)));
#define CHAINS 12
static double rlx_peak_now(void) {
    struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}
/* GFLOP/s summed over `threads` threads, each running `steps` x CHAINS vector FMAs;
   sink keeps the results alive */
double rlx_fma_peak(int threads, int64_t steps, float *sink) {
    double total = 0.0;
    #pragma omp parallel num_threads(threads) reduction(+:total)
    {
        /* each thread on a CPU of its own for the measurement (the t-th of the thread's mask),
           its own mask restored after: the pool's threads serve every later peer */
        cpu_set_t old, mine;
        const int pinned = sched_getaffinity(0, sizeof old, &old) == 0 && CPU_COUNT(&old) > 0;
        if (pinned) {
            int want = omp_get_thread_num() % CPU_COUNT(&old), cpu = 0;
            for (; cpu < CPU_SETSIZE; ++cpu)
                if (CPU_ISSET(cpu, &old) && want-- == 0) break;
            CPU_ZERO(&mine);
            CPU_SET(cpu, &mine);
            sched_setaffinity(0, sizeof mine, &mine);
        }
        rlx_v16 acc[CHAINS];
        const rlx_v16 b = (rlx_v16){0} + 0.9999f, c = (rlx_v16){0} + 1e-4f;
        for (int i = 0; i < CHAINS; ++i) acc[i] = (rlx_v16){0} + 0.001f * (float)i;
        #pragma omp barrier
        const double t0 = rlx_peak_now();
        for (int64_t n = 0; n < steps; ++n)
            for (int i = 0; i < CHAINS; ++i) acc[i] = acc[i] * b + c;
        const double dt = rlx_peak_now() - t0;
        float s = 0.0f;
        for (int i = 0; i < CHAINS; ++i)
            for (int l = 0; l < 16; ++l) s += acc[i][l];
        sink[omp_get_thread_num() % 64] = s;
        total = (double)steps * CHAINS * 16 * 2 / dt * 1e-9;
        if (pinned) sched_setaffinity(0, sizeof old, &old);
    }
    return total;
}
"""


def fma_peak(threads: int, rounds: int = 5, steps: int = 20_000_000 // 16,
             seconds: float = 0.5) -> float:
    """Summed f32 FMA GFLOP/s of ``threads`` threads: the best of at least ``rounds`` rounds
    (~4 ms each), taken for at least ``seconds``.

    Each thread is pinned to a CPU of its own while it measures (its affinity restored
    after). Unpinned, a woken OpenMP worker can share the first thread's CPU until the
    kernel's load balancing moves it, which here took longer than five rounds and at times
    longer than half a second: a MiniLM run measured 117 GFLOP/s on two threads, one core's
    worth, and printed floors twice too long."""
    import time

    from rlx_core.targets.cpu.runtime import load_library
    from rlx_core.targets.cpu.toolchain import build_shared

    lib = load_library(str(build_shared(SOURCE).path))
    fn = lib.rlx_fma_peak
    fn.restype = ctypes.c_double
    fn.argtypes = (ctypes.c_int, ctypes.c_int64, ctypes.POINTER(ctypes.c_float))
    sink = (ctypes.c_float * 64)()
    best, done, end = 0.0, 0, time.perf_counter() + seconds
    while done < rounds or time.perf_counter() < end:
        best = max(best, fn(threads, steps, sink))
        done += 1
    return best


def floor_fields(gflop: float, peak: float, rlx_s: float) -> dict[str, float]:
    """A result row's floor (``gflop`` at ``peak`` GFLOP/s, nothing else) and the fraction
    of the peak that rlx, taking ``rlx_s`` seconds, reached."""
    return {"floor_s": gflop / peak, "rlx_fraction_of_peak": round(gflop / peak / rlx_s, 3)}


def caption(peak: float, threads: int, flops: str) -> str:
    """The sentence a results table's caption gives the peak and its floor column."""
    return (f"f32 FMA peak at {threads} thread(s): {peak:.0f} GFLOP/s (`benchmarks/peak.py`); "
            f"*floor*: {flops} at that peak, a time no implementation beats here.")


def main(argv: list[str] | None = None) -> int:
    import os

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    args = ap.parse_args(argv)
    one, all_ = fma_peak(1), fma_peak(args.threads)
    print(f"f32 FMA peak: {one:.1f} GFLOP/s on 1 thread, {all_:.1f} on {args.threads}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
