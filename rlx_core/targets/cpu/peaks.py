"""The machine's CPU ceilings: the f32 multiply-add peak (GFLOP/s) and the streaming read
bandwidth (GB/s), measured by two small generated C probes, and remembered per machine.

``fma_peak(threads)`` runs independent fused multiply-adds on register-resident vectors (no
loads, no stores) on ``threads`` OpenMP threads; ``read_bandwidth(threads)`` streams a buffer
far larger than the caches. A kernel's FLOPs over the first and its bytes over the second are
the least time any code can take for it here (the roofline the explorer's cost overlay draws).
``machine_peaks()`` returns the peaks measured earlier on this CPU (a small JSON file in the
build cache folder), or None: nothing is measured unless ``measure_peaks()`` is called
(``rlx peaks``, ``explore(..., calibrate=True)``, benchmarks/peak.py).
"""

from __future__ import annotations

import ctypes
import json
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from rlx_core.targets.cpu.identity import cpu_model

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



@dataclass(frozen=True)
class Peaks:
    """Measured ceilings of this CPU at ``threads`` threads."""

    gflops: float  # f32 FMA GFLOP/s (fma_peak)
    gbps: float  # streaming read GB/s (read_bandwidth)
    threads: int
    cpu: str
    measured: str  # when, local time

    @property
    def ridge(self) -> float:
        """FLOP per byte where the two roofs meet: below it a kernel is memory-bound."""
        return self.gflops / self.gbps if self.gbps > 0 else 0.0

    def to_json(self) -> dict[str, object]:
        return {**asdict(self), "ridge": self.ridge}


def default_threads() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _store() -> Path:
    from rlx_core.targets.cpu.cache import cache_dir

    return cache_dir() / "peaks.json"


def _key(threads: int) -> str:
    return f"{cpu_model()}|{threads}"


def machine_peaks(threads: int | None = None) -> Peaks | None:
    """The peaks measured earlier on this CPU model at ``threads`` (default: every CPU this
    process may use), or None when they were never measured here."""
    n = threads or default_threads()
    try:
        rows = json.loads(_store().read_text(encoding="utf-8"))
        row = rows.get(_key(n))
        return Peaks(**{k: row[k] for k in ("gflops", "gbps", "threads", "cpu", "measured")}) \
            if row else None
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    except Exception:  # an unusable cache folder (CacheDirError): simply not calibrated
        return None


def measure_peaks(threads: int | None = None, save: bool = True) -> Peaks:
    """Run both probes (about 1-2 s) and remember the result for ``machine_peaks`` (each
    ceiling the higher of this run and the remembered one)."""
    n = threads or default_threads()
    p = Peaks(round(fma_peak(n), 1), round(read_bandwidth(n), 1), n, cpu_model(),
              time.strftime("%Y-%m-%d %H:%M:%S"))
    if save:
        try:
            path = _store()
            try:
                rows = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                rows = {}
            # a ceiling only rises: a probe run on a busy machine measures less than the CPU
            # can do, and must not lower what a quieter run found
            before = rows.get(_key(n)) or {}
            if before.get("gflops", 0) > p.gflops or before.get("gbps", 0) > p.gbps:
                p = Peaks(max(p.gflops, before.get("gflops", 0)), max(p.gbps, before.get("gbps", 0)),
                          n, p.cpu, p.measured)
            rows[_key(n)] = asdict(p)
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")
            os.replace(tmp, path)
        except OSError:
            pass  # measured but not remembered: the next session measures again
    return p
