"""The machine's CPU ceilings: the f32 multiply-add peak (GFLOP/s) and the streaming read
bandwidth (GB/s), measured by two small generated C probes, and remembered per machine.

``fma_peak(threads)`` runs independent fused multiply-adds on register-resident vectors (no
loads, no stores) on ``threads`` OpenMP threads; ``read_bandwidth(threads)`` streams a buffer
far larger than the caches; ``fma_ports()`` divides one thread's FMA throughput by the core
clock (a chain of dependent integer adds) and the vector width: the FMA port count, measured
rather than guessed (2 on this Emerald Rapids VM: 62.4 FLOP per cycle at 3.97 GHz with
16-float zmm vectors). A kernel's FLOPs over the first and its bytes over the second are
the least time any code can take for it here (the roofline the explorer's cost overlay draws).
``machine_peaks()`` returns the peaks measured earlier on this CPU (a small JSON file in the
build cache folder), or None: nothing is measured unless ``measure_peaks()`` is called
(``rlx peaks``, ``explore(..., calibrate=True)``, benchmarks/peak.py).

The probes are compiled for this process's ISA family (isa.detect: ``RLX_CPU_ISA=avx2`` on an
AVX-512 CPU builds them without AVX-512), and so are both ceilings' meaning: the FMA peak and
the port count are those of the family's vectors (a Zen 4 core issues one 16-float FMA a cycle
but two 8-float ones). A row is therefore kept per CPU model, thread count *and* family: the
CPU's own family under the key rows always had (``<cpu>|<threads>``), a forced lower one
under ``<cpu>|<threads>|<family>`` (``_key``), so that a run forced to AVX2 neither reads nor
overwrites the AVX-512 row. The store is parsed once per version of the file (``_rows``: its
stat, and while it is younger than two seconds its bytes). A row keeps the highest FMA peak of
its quiet runs but the second-highest bandwidth (``merge``, ``kept_bandwidth``).
"""

from __future__ import annotations

import ctypes
import json
import os
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from types import MappingProxyType

from rlx_core.targets.cpu.identity import cpu_model

# GCC/Clang vector extensions, one register wide for the ISA compiled for (16 floats in a zmm,
# 8 in a ymm, 4 in an xmm), CHAINS independent accumulators so the FMA latency is hidden
# (12 chains + 2 operands fit the 16 ymm/xmm registers of AVX2 and SSE; 16-float vectors on
# AVX2 needed 24 ymm, spilled every chain to the stack, and measured 1.4 instead of ~30 GFLOP/s
# on a Zen 1). -ffp-contract (GNU C's default) makes each a * b + c one fused instruction.
SOURCE = r"""
#define _GNU_SOURCE
#include <sched.h>
#include <stdint.h>
#include <time.h>
#include <omp.h>
#if defined(__AVX512F__)
#define RLX_W 16
#elif defined(__AVX__)
#define RLX_W 8
#else
#define RLX_W 4
#endif
typedef float rlx_v16 __attribute__((vector_size(RLX_W * 4)));
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
            for (int l = 0; l < RLX_W; ++l) s += acc[i][l];
        sink[omp_get_thread_num() % 64] = s;
        total = (double)steps * CHAINS * RLX_W * 2 / dt * 1e-9;
        if (pinned) sched_setaffinity(0, sizeof old, &old);
    }
    return total;
}
/* floats per vector of the ISA compiled for (what one FMA instruction multiplies) */
int rlx_fma_lanes(void) { return RLX_W; }
/* the core clock in GHz: a chain of dependent register-register integer adds (one cycle each
   on every x86 core; an add of a register, unlike one of an immediate, is not folded away at
   rename), 64 per loop trip so the loop's own counter runs beside them; 0 off x86 */
double rlx_core_ghz(int64_t steps) {
#if defined(__x86_64__) || defined(__i386__)
    unsigned long x = 0, one = 1;
    __asm__ volatile("" : "+r"(one));
    const double t0 = rlx_peak_now();
    for (int64_t n = 0; n < steps; ++n)
        __asm__ volatile(".rept 64\n\tadd %1, %0\n\t.endr" : "+r"(x) : "r"(one));
    const double dt = rlx_peak_now() - t0;
    __asm__ volatile("" : : "r"(x));
    return (double)steps * 64 / dt * 1e-9;
#else
    (void)steps;
    return 0.0;
#endif
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

    fn = _probe_library().rlx_fma_peak
    fn.restype = ctypes.c_double
    fn.argtypes = (ctypes.c_int, ctypes.c_int64, ctypes.POINTER(ctypes.c_float))
    sink = (ctypes.c_float * 64)()
    best, done, end = 0.0, 0, time.perf_counter() + seconds
    while done < rounds or time.perf_counter() < end:
        best = max(best, fn(threads, steps, sink))
        done += 1
    return best


def _probe_library():
    from rlx_core.targets.cpu.cached_build import build_shared
    from rlx_core.targets.cpu.runtime import load_library

    return load_library(str(build_shared(SOURCE).path))


@dataclass(frozen=True)
class FmaPorts:
    """How many vector FMAs a core issues per cycle, from measured throughput and clock."""

    ports: int  # 0 where the clock could not be measured (not x86)
    ghz: float  # the core clock the integer-add chain ran at
    lanes: int  # floats per vector of the ISA path compiled for
    gflops: float  # one thread's FMA peak (fma_peak(1))

    @property
    def per_cycle(self) -> float:
        """Measured FLOP per cycle per core (2 x lanes x ports on an ideal core)."""
        return self.gflops / self.ghz if self.ghz > 0 else 0.0

    def describe(self) -> str:
        """Ports x lanes x 2 FLOP at the clock, beside the measured FLOP per cycle."""
        if not self.ports:
            return "FMA ports not measured (no cycle clock off x86)"
        return (f"{self.ports} FMA port(s) x {self.lanes} lanes x 2 FLOP at {self.ghz:.2f} GHz "
                f"(measured {self.per_cycle:.1f} FLOP/cycle/core)")


def fma_ports(gflops: float | None = None, rounds: int = 5, steps: int = 60_000) -> FmaPorts:
    """The FMA port count: one thread's FMA throughput (``gflops``, else ``fma_peak(1)``) over
    the core clock (a dependent integer-add chain: one add per cycle) and the vector width.

    A core running wide vectors may clock a little below scalar code (AVX-512 licences), so
    the ratio is rounded: 2 ports of 16 lanes measure 64 FLOP per cycle, one port 32 (or
    somewhat less), never near 48."""
    lib = _probe_library()
    lib.rlx_core_ghz.restype = ctypes.c_double
    lib.rlx_core_ghz.argtypes = (ctypes.c_int64,)
    lanes = int(lib.rlx_fma_lanes())
    flops = gflops if gflops is not None else fma_peak(1)
    ghz = max(lib.rlx_core_ghz(steps) for _ in range(max(1, rounds)))
    return FmaPorts(count_ports(flops, ghz, lanes), round(ghz, 2), lanes, flops)


def count_ports(gflops: float, ghz: float, lanes: int) -> int:
    """FMA ports from one core's GFLOP/s at ``ghz`` with ``lanes``-float vectors (each FMA 2
    FLOP per lane), rounded, at least 1; 0 when the clock is unknown."""
    if ghz <= 0 or lanes <= 0:
        return 0
    return max(1, round(gflops / (ghz * lanes * 2)))


# streaming reads: each thread sums its share of a buffer far larger than the last-level
# cache, 64 floats a step into 4 independent accumulators one register wide (the loads, not
# the adds, bound it). The vectors follow the ISA compiled for, like the FMA probe's: 16-float
# vectors on AVX2 (the AVX2 path, and Zen 1's own -march) kept the accumulators on the stack,
# a store and a load per add, and read 19.6 GB/s on a Zen 4 core that streams 29-33.
BANDWIDTH_SOURCE = r"""
#include <stdint.h>
#include <time.h>
#include <omp.h>
#if defined(__AVX512F__)
#define RLX_BW_W 16
#elif defined(__AVX__)
#define RLX_BW_W 8
#else
#define RLX_BW_W 4
#endif
typedef float rlx_bw_v __attribute__((vector_size(RLX_BW_W * 4)));
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
        rlx_bw_v a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0};
        #pragma omp barrier
        #pragma omp master
        t0 = rlx_bw_now();
        for (int64_t i = lo; i < hi; i += 64) {
            const rlx_bw_v *v = (const rlx_bw_v *)(buf + i);
            for (int j = 0; j < 64 / RLX_BW_W; j += 4) {
                a0 += v[j]; a1 += v[j + 1]; a2 += v[j + 2]; a3 += v[j + 3];
            }
        }
        #pragma omp barrier
        #pragma omp master
        t1 = rlx_bw_now();
        const rlx_bw_v s = a0 + a1 + a2 + a3;
        float x = 0.0f;
        for (int l = 0; l < RLX_BW_W; ++l) x += s[l];
        sink[t % 64] = x;
    }
    return (double)n * 4.0 / (t1 - t0) * 1e-9;
}
"""


# the bandwidth probe's buffer: each thread's share at least this many times the last-level
# cache the OS reports (sysfs, CPU 0's), as if every thread sat under an L3 of its own (a VM's
# vCPUs may sit on two CCDs), and never under BANDWIDTH_MIN_MB in all; at most an eighth of
# the machine's memory and BANDWIDTH_MAX_MB. On the Zen 4 (32 MB L3 shared by both vCPUs) one
# thread reads 256 MB and two 512 MB; 256 MB, 1 GB and 2 GB buffers read alike there (two
# threads 34-36 or 56-62 GB/s, one 29-31), 32 MB up to 42 on one thread and 64 MB up to 71 on
# two (the L3's share)
BANDWIDTH_L3_SHARE = 8
BANDWIDTH_MIN_MB = 256
BANDWIDTH_MAX_MB = 4096


def bandwidth_mbytes(threads: int, l3_bytes: int, memory_bytes: int) -> int:
    """MB of the bandwidth probe's buffer for ``threads`` threads under an ``l3_bytes`` L3 (0:
    none reported) on a machine of ``memory_bytes`` (0: unknown): BANDWIDTH_L3_SHARE times the
    L3 a thread, at least BANDWIDTH_MIN_MB, at most an eighth of the memory and
    BANDWIDTH_MAX_MB."""
    want = max(BANDWIDTH_MIN_MB, -(-BANDWIDTH_L3_SHARE * l3_bytes * max(1, threads) >> 20))
    most = min(BANDWIDTH_MAX_MB, (memory_bytes // 8) >> 20) if memory_bytes > 0 \
        else BANDWIDTH_MAX_MB
    return max(1, min(want, most))


def _memory_bytes() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 0


def read_bandwidth(threads: int, mbytes: int | None = None, rounds: int = 3) -> float:
    """GB/s of ``threads`` threads streaming a ``mbytes`` MB buffer from memory (default:
    bandwidth_mbytes, far beyond the last-level cache the OS reports, so each pass reads
    memory): the best of ``rounds`` passes. A model whose weights must be read once per call
    takes at least its weight bytes over this."""
    import numpy as np

    from rlx_core.targets.cpu.cached_build import build_shared
    from rlx_core.targets.cpu.isa import read_caches
    from rlx_core.targets.cpu.runtime import load_library

    if mbytes is None:
        mbytes = bandwidth_mbytes(threads, read_caches().l3, _memory_bytes())

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



# bumped whenever a probe changes what it measures: rows an older probe stored are not trusted
# (version 1's FMA probe spilled on AVX2 machines and stored a ceiling 5-10x too low; version
# 2's bandwidth probe spilled on AVX2 and SSE the same way and stored a bandwidth too low)
PROBE_VERSION = 3
# older versions whose rows still stand on the paths named: version 3 changed only what the
# AVX2 and SSE builds of the bandwidth probe do (the AVX-512 build's loop is the same)
STILL_TRUSTED = MappingProxyType({2: frozenset({"avx512"})})
# other processes' work during a probe, in CPUs' worth, below which the run counts as quiet
QUIET_OTHERS = 0.25


@dataclass(frozen=True)
class Peaks:
    """Measured ceilings of this CPU at ``threads`` threads, and how busy the machine was."""

    gflops: float  # f32 FMA GFLOP/s (fma_peak)
    gbps: float  # streaming read GB/s (read_bandwidth; in a kept row, kept_bandwidth's)
    threads: int
    cpu: str
    measured: str  # when, local time
    load: float = -1.0  # 1-minute load average when measured (-1: not recorded)
    others: float = -1.0  # CPUs' worth of other processes' work while measuring (-1: unknown)
    quiet: bool = False  # others (or, without /proc/stat, the load) left the probes the CPUs,
    # and n threads on n cores measured at least SCALING_MIN of n times one thread (scaled)
    probe: int = PROBE_VERSION
    fma_ports: int = 0  # vector FMAs per cycle per core (fma_ports; 0: not measured)
    ghz: float = 0.0  # the core clock it was measured at
    isa: str = ""  # the ISA family the probes ran ("": a row stored before it was recorded)
    # the two highest bandwidth readings of the runs merged into the row, highest first; empty
    # in one run's own measurement (a row's first run), and in a row stored before they were
    # kept: read as two of ``gbps`` (kept_readings)
    gbps_top: tuple[float, ...] = ()

    @property
    def ridge(self) -> float:
        """FLOP per byte where the two roofs meet: below it a kernel is memory-bound."""
        return self.gflops / self.gbps if self.gbps > 0 else 0.0

    def to_json(self) -> dict[str, object]:
        """The row's fields and its ridge point, for a results file."""
        return {**asdict(self), "ridge": self.ridge}

    def describe(self) -> str:
        """How the ceilings were measured, for a results file: load and whether it was quiet."""
        busy = f", other processes {self.others:.2f} CPUs" if self.others >= 0 else ""
        ports = f"; {self.fma_ports} FMA port(s) per core at {self.ghz:.2f} GHz" \
            if self.fma_ports else ""
        isa = f"; {self.isa} path" if self.isa else ""
        return (f"{'quiet' if self.quiet else 'LOADED'} (load average {self.load:.1f}{busy}; "
                f"{self.measured}{ports}{isa})")


def default_threads() -> int:
    """The CPUs this process may run on (the thread count a row is measured at by default)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _store() -> Path:
    from rlx_core.targets.cpu.cache import cache_dir

    return cache_dir() / "peaks.json"


def _family() -> str:
    """The ISA family the probes compile for in this process (isa.detect)."""
    from rlx_core.targets.cpu.isa import detect

    return detect().family


def _key(threads: int) -> str:
    """The store's key of this process's row: the CPU model and thread count, and the ISA
    family where RLX_CPU_ISA forced one below the CPU's own (its ceilings are that family's;
    the CPU's own family keeps the key rows had before families were told apart)."""
    from rlx_core.targets.cpu.isa import detect

    isa = detect()
    base = f"{cpu_model()}|{threads}"
    return base if isa.family == isa.native else f"{base}|{isa.family}"


_FIELDS = ("gflops", "gbps", "threads", "cpu", "measured", "load", "others", "quiet", "probe")
# added without a probe change: rows stored before lack them
_LATER = ("fma_ports", "ghz", "isa", "gbps_top")


# A file's modification time comes from the kernel's coarse clock (a tick of 1-10 ms; FAT's 2 s),
# so a rewrite in place of the same size within one tick leaves inode, size and times as they
# were. As git does with "racy" index entries, a parse is trusted on the stat alone only once the
# file was older than this when its bytes were last read; a younger file's bytes are read and
# compared again (JSON parsed only when they changed).
_RACY_NS = 2_000_000_000


@dataclass(frozen=True)
class _Parsed:
    """One store file as last read: its stat (``_version``), bytes and rows, and whether it had
    settled (was older than ``_RACY_NS``) when read, so that the stat alone now identifies it."""

    version: tuple[int, ...]
    raw: bytes
    rows: Mapping[str, object]
    settled: bool


_PARSED: dict[str, _Parsed] = {}
_PARSED_MAX = 4  # store paths remembered (one in use; tests point RLX_CACHE_DIR elsewhere)


def _version(path: Path) -> tuple[int, ...]:
    """What identifies a version of the file without reading it: device, inode (``rlx peaks``
    replaces the file: a new inode), size, and modification and change times in ns."""
    st = path.stat()
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _rows(path: Path) -> Mapping[str, object]:
    """The store's rows (read-only), parsed only when the file changed since the last read:
    every program render asks (gemv.defines), and `rlx peaks` or a benchmark in another
    process rewrites the file. OSError / ValueError where it is missing or unreadable."""
    now = time.time_ns()  # before the stat: a write after it has a later time than this tick's
    version = _version(path)
    known = _PARSED.get(str(path))
    if known is not None and known.settled and known.version == version:
        return known.rows
    raw = path.read_bytes()
    if known is not None and known.raw == raw:
        rows = known.rows
    else:
        loaded = json.loads(raw.decode("utf-8"))
        rows = MappingProxyType(loaded if isinstance(loaded, dict) else {})
    if len(_PARSED) >= _PARSED_MAX and str(path) not in _PARSED:
        _PARSED.clear()  # one call, safe beside another thread's read
    _PARSED[str(path)] = _Parsed(version, raw, rows, now - version[3] > _RACY_NS)
    return rows


def trusted_probe(probe: object, isa: object) -> bool:
    """Was a row with this probe version, measured on the ``isa`` path, stored by probes that
    measure what today's do (PROBE_VERSION, or an older one STILL_TRUSTED on that path)?"""
    return probe == PROBE_VERSION or (isinstance(probe, int)
                                      and isa in STILL_TRUSTED.get(probe, ()))


def _row(data: object) -> Peaks | None:
    """A stored row as Peaks, or None when it is unusable or an older probe wrote it."""
    if not isinstance(data, dict) or not trusted_probe(data.get("probe"), data.get("isa")):
        return None
    try:
        later = {k: data[k] for k in _LATER if k in data}
        if "gbps_top" in later:  # a JSON list
            later["gbps_top"] = tuple(float(g) for g in later["gbps_top"])[:2]
        return Peaks(**{k: data[k] for k in _FIELDS}, **later)
    except (KeyError, TypeError, ValueError):
        return None


def machine_peaks(threads: int | None = None) -> Peaks | None:
    """The peaks measured earlier on this CPU model at ``threads`` (default: every CPU this
    process may use) with this process's ISA family (``_key``: under ``RLX_CPU_ISA=avx2`` the
    AVX2 row), or None when they were never measured so by the current probes."""
    n = threads or default_threads()
    try:
        return _row(_rows(_store()).get(_key(n)))
    except (OSError, ValueError):
        return None
    except Exception:  # an unusable cache folder (CacheDirError): simply not calibrated
        return None


def measured_fma_ports() -> int:
    """One core's FMA ports at this process's ISA family's vector width, as measured here:
    the one-thread row's count, else the one `rlx peaks` stores by default (every CPU); 0 where
    neither row holds one (never measured, or an unreadable store). The count is per vector
    width (a Zen 4 issues one 16-float FMA a cycle but two 8-float ones), so under
    ``RLX_CPU_ISA=avx2`` the AVX2 row decides (``_key``). Kernels that gate a software prefetch
    on it (gemv.prefetch, sgemm.panel_prefetch) read it at render time."""
    return next((p.fma_ports for p in (machine_peaks(1), machine_peaks())
                 if p is not None and p.fma_ports), 0)


def load_average() -> float:
    """The 1-minute load average (-1 where the OS has none)."""
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return -1.0


def _cpu_seconds() -> tuple[float, float] | None:
    """(busy CPU-seconds of the whole machine, CPU-seconds of this process) so far, or None
    without /proc/stat. Their growth over a probe, less this process's, is the other
    processes' share of the CPUs while it measured: the load average lags a minute behind."""
    try:
        with open("/proc/stat", encoding="ascii") as f:
            fields = f.readline().split()[1:]
        ticks = [int(x) for x in fields[:8]]
        busy = sum(ticks) - ticks[3] - ticks[4]  # all but idle and iowait
        t = os.times()
        return busy / os.sysconf("SC_CLK_TCK"), t.user + t.system
    except (OSError, ValueError, IndexError, AttributeError):
        return None


def is_quiet(others: float, load: float, cpus: int, threads: int) -> bool:
    """Whether a probe run had the CPUs to itself: other processes used under a quarter of a
    CPU while it ran, or, where that is unknown, the load average left ``threads`` CPUs free
    (this process counts one)."""
    if others >= 0:
        return others < QUIET_OTHERS
    return 0 <= load <= max(1.0, cpus - threads + 1.0)


def merge(before: Peaks | None, new: Peaks) -> Peaks:
    """What the store keeps of a stored row and a new measurement.

    A busy machine measures less than its CPU can do, so a loaded run must never become the
    ceiling over a quiet one: quiet against quiet keeps the higher FMA peak and the
    second-highest bandwidth reading (kept_bandwidth); a quiet run replaces a loaded (or
    unlabelled) row outright, even a higher one; a loaded run never changes a quiet row;
    loaded against loaded keeps the same (still labelled loaded, so the next quiet run
    replaces it). ``new`` is one run: its ``gbps`` is one reading."""
    if before is None or (new.quiet and not before.quiet):
        return new  # its one reading stands for two (kept_readings)
    if before.quiet and not new.quiet:
        return before
    top = kept_readings(before, new.gbps)
    best, other = (before, new) if before.gflops >= new.gflops else (new, before)
    # the port count and clock describe the run whose FMA peak is kept (a slower quiet run, on
    # a throttled host or with two threads contending, measured fma_ports=1 beside a kept 2),
    # unless only the other run's ISA family is known: a row stored before the family was
    # recorded may hold a forced AVX2 run's count (2 on a Zen 4, whose AVX-512 path has 1)
    trusted = bool(best.fma_ports) and (bool(best.isa) or not other.isa)
    src = best if trusted or not other.fma_ports else other
    return Peaks(best.gflops, kept_bandwidth(top), new.threads, new.cpu,
                 best.measured, best.load, best.others, new.quiet, fma_ports=src.fma_ports,
                 ghz=src.ghz, isa=new.isa or before.isa, gbps_top=top)


def kept_readings(before: Peaks, gbps: float) -> tuple[float, float]:
    """The two highest bandwidth readings of a row's runs and a new run's ``gbps``, highest
    first. A row's first run stands for two readings (nothing to hold it against, and a later
    run never lowers it), as does a row stored before the readings were kept (its ``gbps``, the
    highest it had seen)."""
    seen = before.gbps_top if len(before.gbps_top) == 2 else (before.gbps, before.gbps)
    top = sorted((*seen, gbps), reverse=True)
    return top[0], top[1]


def kept_bandwidth(top: tuple[float, float]) -> float:
    """The bandwidth a row keeps: the second-highest reading of its runs, a rate two runs
    reached. The FMA ceiling is the highest run's, but a bandwidth reading is a pass over
    memory that a host's neighbours and placement move by 2x (the Zen 4 VM read 34-36 or 56-62
    GB/s on two threads minutes apart, its FMA peak level at 235 GFLOP/s): one reading above
    every other raises the ceiling only once a second run reaches it too, and a run below it
    lowers nothing (a floor from too low a bandwidth would read as rlx near it)."""
    return top[1]


# n threads on n separate cores measure about n times one thread's FMA peak; below this share
# of that, a thread did not run beside the others for the whole probe (the VM's scheduler held
# one vCPU, or both shared a CPU): a forced-AVX2 two-thread run on the Zen 4 measured 118
# GFLOP/s, one core's worth, and was stored as the ceiling (bench_mnist_mlp printed "161% of
# peak"). Such a run counts as loaded, so it never replaces a quiet row.
SCALING_MIN = 0.8


def separate_cores(threads: int) -> bool | None:
    """Whether the first ``threads`` CPUs this process may use are on as many physical cores
    (sysfs topology: package and core id); None where that cannot be read. Two hyperthreads
    of one core share its FMA units, so their sum is one core's peak even on a quiet machine."""
    try:
        cpus = sorted(os.sched_getaffinity(0))[:threads]
        root = Path("/sys/devices/system/cpu")
        cores = {((root / f"cpu{c}/topology/physical_package_id").read_text().strip(),
                  (root / f"cpu{c}/topology/core_id").read_text().strip()) for c in cpus}
    except (OSError, AttributeError):
        return None
    return len(cpus) == threads and len(cores) == threads


def scaled(gflops: float, one: float, threads: int) -> bool:
    """Whether ``threads`` threads' summed FMA peak ran side by side: at least SCALING_MIN of
    ``threads`` times one thread's (``one``), where the threads have cores of their own."""
    if threads <= 1 or one <= 0 or not separate_cores(threads):
        return True
    return gflops >= SCALING_MIN * threads * one


def measure(threads: int | None = None) -> Peaks:
    """Run both probes once (about 1-2 s), recording how busy the machine was meanwhile."""
    n = threads or default_threads()
    load, start = load_average(), _cpu_seconds()
    t0 = time.perf_counter()
    gflops, gbps = fma_peak(n), read_bandwidth(n)
    # one core's throughput over its clock: n threads' sum over n reads low when another
    # process shares a core (2 threads measured 171 GFLOP/s, '1 port' beside a clock of
    # 2.25 GHz, where one thread measured 2); for n > 1 the port probe times one thread
    ports = fma_ports(gflops if n == 1 else None)
    wall, end = time.perf_counter() - t0, _cpu_seconds()
    others = -1.0
    if start is not None and end is not None and wall > 0:
        others = max(0.0, ((end[0] - start[0]) - (end[1] - start[1])) / wall)
    cpus = os.cpu_count() or n
    return Peaks(round(gflops, 1), round(gbps, 1), n, cpu_model(), time.strftime("%Y-%m-%d %H:%M:%S"),
                 round(load, 2), round(others, 2),
                 is_quiet(others, load, cpus, n) and scaled(gflops, ports.gflops, n),
                 fma_ports=ports.ports, ghz=ports.ghz, isa=_family())


@dataclass(frozen=True)
class PeakRun:
    """One probe run beside the ceiling the store keeps: what the host gives now against the
    best quiet run of this CPU. A throttled or shared VM measures below its stored ceiling;
    a benchmark says so instead of letting every "% of peak" read low without a reason."""

    now: Peaks  # this run's measurement (measure)
    kept: Peaks  # what the store keeps of it and the rows before (merge): the ceiling

    @property
    def host_fraction(self) -> float:
        """This run's FMA peak over the kept one (1.0: the host as fast as its best run)."""
        return self.now.gflops / self.kept.gflops if self.kept.gflops > 0 else 0.0

    @property
    def bandwidth_fraction(self) -> float:
        """This run's read bandwidth over the kept one."""
        return self.now.gbps / self.kept.gbps if self.kept.gbps > 0 else 0.0

    def summary(self) -> str:
        """This run's measurement and its ratio to the kept ceiling, in one clause."""
        return (f"this run {self.now.gflops:.0f} GFLOP/s and {self.now.gbps:.1f} GB/s, host at "
                f"{self.host_fraction:.2f} (FMA) and {self.bandwidth_fraction:.2f} (bandwidth) "
                f"of its stored peak {self.kept.gflops:.0f} GFLOP/s and {self.kept.gbps:.1f} GB/s")

    def describe(self) -> str:
        """How the kept ceiling was measured, then this run's figures (for a results file)."""
        return f"{self.kept.describe()}; {self.summary()}"

    def to_json(self) -> dict[str, object]:
        """The kept row, with this run's own row and both ratios beside it."""
        return {**self.kept.to_json(), "this_run": self.now.to_json(),
                "host_fraction": round(self.host_fraction, 3),
                "bandwidth_fraction": round(self.bandwidth_fraction, 3)}


def measure_peaks(threads: int | None = None, save: bool = True) -> Peaks:
    """Measure the peaks (``measure``) and return what the store keeps of them and the row
    measured before (``merge``), remembering that for ``machine_peaks`` when ``save``."""
    return measure_peak_run(threads, save).kept


def measure_peak_run(threads: int | None = None, save: bool = True) -> PeakRun:
    """``measure_peaks``, returning this run's own measurement beside what the store keeps."""
    n = threads or default_threads()
    new = measure(n)
    return PeakRun(new, _remember(n, new, save))


def _remember(n: int, new: Peaks, save: bool) -> Peaks:
    """What the store keeps of ``new`` and the row before it (saved when ``save``)."""
    try:
        path = _store()
        try:
            rows = dict(_rows(path))
        except (OSError, ValueError):
            rows = {}
        kept = merge(_row(rows.get(_key(n))), new)
        if save:
            rows[_key(n)] = asdict(kept)
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")
            os.replace(tmp, path)
        return kept
    except OSError:
        return new  # measured but not remembered: the next session measures again
    except Exception:  # an unusable cache folder (CacheDirError): this run's figures only
        return new
