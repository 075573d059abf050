"""The machine's f32 multiply-add ceiling: what no implementation of a benchmark can beat.

``fma_peak(threads)`` compiles a loop of independent fused multiply-adds on register-resident
vectors (no loads, no stores) with the CPU target's compiler, runs it on ``threads`` OpenMP
threads at once and returns the summed GFLOP/s (the best of a few rounds). A benchmark's FLOP
count divided by it is the least time any code can take on this machine, so a ratio target
can be checked against arithmetic before anyone profiles: at 784-128-10/128 the MLP training
step is 52.4 MFLOP, which at 2 x 116 GFLOP/s (this 2-core Zen 4 VM) is 0.226 ms.

``read_bandwidth(threads)`` is the memory-side ceiling beside it: GB/s of streaming reads of a
buffer far larger than the caches. A small batch's floor is the larger of its FLOPs at the
FMA peak and its weights read once at that bandwidth (``floor_fields``).

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


# streaming reads: each thread sums its share of a buffer far larger than the last-level
# cache, 16 floats a step in 4 independent accumulators (the loads, not the adds, bound it)
BANDWIDTH_SOURCE = r"""
#include <stdint.h>
#include <time.h>
#include <omp.h>
typedef float rlx_bw_v16 __attribute__((vector_size(64)));
static double rlx_bw_now(void) {
    struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}
/* GB/s of `threads` threads reading `n` floats (n a multiple of 64 * threads) once */
double rlx_read_bandwidth(int threads, const float *buf, int64_t n, float *sink) {
    double t0 = 0.0, t1 = 0.0;
    #pragma omp parallel num_threads(threads)
    {
        const int t = omp_get_thread_num(), nt = omp_get_num_threads();
        const int64_t per = n / nt, lo = t * per, hi = lo + per;
        rlx_bw_v16 a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0};
        #pragma omp barrier
        #pragma omp master
        t0 = rlx_bw_now();
        for (int64_t i = lo; i < hi; i += 64) {
            const rlx_bw_v16 *v = (const rlx_bw_v16 *)(buf + i);
            a0 += v[0]; a1 += v[1]; a2 += v[2]; a3 += v[3];
        }
        #pragma omp barrier
        #pragma omp master
        t1 = rlx_bw_now();
        const rlx_bw_v16 s = a0 + a1 + a2 + a3;
        float x = 0.0f;
        for (int l = 0; l < 16; ++l) x += s[l];
        sink[t % 64] = x;
    }
    return (double)n * 4.0 / (t1 - t0) * 1e-9;
}
"""


def read_bandwidth(threads: int, mbytes: int = 256, rounds: int = 3) -> float:
    """GB/s of ``threads`` threads streaming a ``mbytes`` MB buffer from memory: the best of
    ``rounds`` passes (the buffer is far beyond the last-level cache, so each pass reads
    memory). A model whose weights must be read once per call takes at least its weight bytes
    over this."""
    import numpy as np

    from rlx_core.targets.cpu.runtime import load_library
    from rlx_core.targets.cpu.toolchain import build_shared

    lib = load_library(str(build_shared(BANDWIDTH_SOURCE).path))
    fn = lib.rlx_read_bandwidth
    fn.restype = ctypes.c_double
    fn.argtypes = (ctypes.c_int, ctypes.c_void_p, ctypes.c_int64, ctypes.POINTER(ctypes.c_float))
    n = (mbytes << 20) // 4 // (64 * threads) * (64 * threads)
    raw = np.ones(n + 16, np.float32)  # touched (written), so every page is mapped
    off = (-raw.ctypes.data % 64) // 4
    buf = raw[off:off + n]
    sink = (ctypes.c_float * 64)()
    return max(fn(threads, buf.ctypes.data, n, sink) for _ in range(max(1, rounds)))


def floor_fields(gflop: float, peak: float, rlx_s: float, gbytes: float = 0.0,
                 bandwidth: float = 0.0) -> dict[str, float]:
    """A result row's floor and the fraction of the peak that rlx, taking ``rlx_s`` seconds,
    reached. The floor is ``gflop`` at ``peak`` GFLOP/s, or, with ``gbytes`` and a measured
    ``bandwidth`` (GB/s, read_bandwidth), the larger of that and the bytes streamed once at
    the bandwidth (a small batch: the weights dominate); ``rlx_over_floor`` is rlx's time
    over it."""
    out = {"floor_s": gflop / peak, "rlx_fraction_of_peak": round(gflop / peak / rlx_s, 3)}
    if gbytes and bandwidth:
        out["bandwidth_floor_s"] = gbytes / bandwidth
        out["floor_s"] = max(out["floor_s"], out["bandwidth_floor_s"])
        out["rlx_over_floor"] = round(rlx_s / out["floor_s"], 3)
    return out


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
    bw1, bw = read_bandwidth(1), read_bandwidth(args.threads)
    print(f"memory read bandwidth: {bw1:.1f} GB/s on 1 thread, {bw:.1f} on {args.threads}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
