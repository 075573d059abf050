"""Where the process's first two CPUs sit: on one L3 or on two, from a core-to-core round trip.

A VM's vCPUs are threads on the host, and the host may move them between its cores. The 2-vCPU
Zen 4 VM the benchmarks run on switched, minutes apart, between two placements: a round trip
between threads pinned to CPUs 0 and 1 took 52-64 ns (both vCPUs under one L3: two threads
read 35-37 GB/s, MiniLM batch 1 s8 1.04-1.12 ms) or 292-321 ns (two L3s: 60-65 GB/s, 1.19-1.30
ms, the thread team's waits 4x longer). Inside the VM the OS reports one L3 either way
(``/sys/devices/system/cpu/cpu*/cache/index3/shared_cpu_list`` read 0-1), so the latency is
the evidence; the OS topology decides only where it reports two L3s (bare metal across CCDs
or sockets) or where the latency is inconclusive.

``measure_placement()`` runs the probe (a few ms: two threads of a generated C probe pinned to
the first two CPUs of this process's affinity set bounce a cache line, ROUNDS batches of TRIPS
round trips, the median batch's mean) and returns a ``Placement``; on one CPU it returns one
whose ``kind`` is ``unknown`` and whose ``reason`` says why, and so on any failure (no compiler,
a CPU that never answers): it never raises. The benchmarks record it at the start and end of
every run (benchmarks/common.py ``machine`` and ``end_of_run``).
"""

from __future__ import annotations

import ctypes
import os
import statistics
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

SHARED = "shared L3"
SPLIT = "split L3"
UNKNOWN = "unknown"

# round-trip nanoseconds below which two CPUs count as sharing an L3, and above which as on two
# L3s (the Zen 4 VM: this probe 62-65 and 300-330, a plain C ping-pong 50-64 and 292-321);
# between the two the OS topology decides, else unknown.
# A large mesh (a many-core Xeon) has a slower round trip inside one L3 than a Zen CCD, hence
# the band rather than one threshold.
SHARED_BELOW_NS = 150.0
SPLIT_ABOVE_NS = 250.0
# batches of round trips, and round trips a batch: ~5 ms at 320 ns, ~1.5 ms at 90 ns
ROUNDS = 15
TRIPS = 1000
# a probe that has not finished by then (a CPU the host does not run) gives up
GIVE_UP_S = 1.0

SOURCE = r"""
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>
/* a pause in the spin: without it the -O3 -march=native build (the target's flags) read 84-92
   ns on one L3 where the same loop at -O2 read 51-54 and a plain C ping-pong 50-52; with it
   62-65 at either, so the figure does not hang on how the compiler unrolled the spin */
#if defined(__x86_64__) || defined(__i386__)
#define RLX_PP_PAUSE() __builtin_ia32_pause()
#elif defined(__aarch64__)
#define RLX_PP_PAUSE() __asm__ volatile("yield")
#else
#define RLX_PP_PAUSE() ((void)0)
#endif
static double rlx_pp_now(void) {
    struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}
struct rlx_pp {
    _Alignas(64) atomic_long flag;   /* the bounced line: odd = ping pending, even = answered */
    _Alignas(64) atomic_int abort;
    int rounds, trips;
    double give_up;
    double *ns;                        /* per-round mean round trip, ns */
};
/* waits until flag == want; 0, or 1 once the deadline passed or the other side gave up */
static int rlx_pp_wait(struct rlx_pp *p, long want, double deadline) {
    for (unsigned spin = 1;; ++spin) {
        if (atomic_load_explicit(&p->flag, memory_order_acquire) == want) return 0;
        RLX_PP_PAUSE();
        if ((spin & 4095) == 0 && (atomic_load_explicit(&p->abort, memory_order_relaxed) ||
                                   rlx_pp_now() > deadline)) {
            atomic_store(&p->abort, 1);
            return 1;
        }
    }
}
static void *rlx_pp_answer(void *arg) {
    struct rlx_pp *p = arg;
    const long total = (long)p->rounds * p->trips;
    for (long i = 0; i < total; ++i) {
        if (rlx_pp_wait(p, 2 * i + 1, p->give_up)) return 0;
        atomic_store_explicit(&p->flag, 2 * i + 2, memory_order_release);
    }
    return 0;
}
static void *rlx_pp_ask(void *arg) {
    struct rlx_pp *p = arg;
    long i = 0;
    for (int r = 0; r < p->rounds; ++r) {
        const double t0 = rlx_pp_now();
        for (int k = 0; k < p->trips; ++k, ++i) {
            atomic_store_explicit(&p->flag, 2 * i + 1, memory_order_release);
            if (rlx_pp_wait(p, 2 * i + 2, p->give_up)) return 0;
        }
        p->ns[r] = (rlx_pp_now() - t0) * 1e9 / p->trips;
    }
    return 0;
}
static int rlx_pp_start(pthread_t *t, int cpu, void *(*fn)(void *), void *arg) {
    pthread_attr_t a;
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(cpu, &s);
    if (pthread_attr_init(&a)) return -1;
    int rc = pthread_attr_setaffinity_np(&a, sizeof s, &s);
    if (!rc) rc = pthread_create(t, &a, fn, arg);
    pthread_attr_destroy(&a);
    return rc ? -1 : 0;
}
/* `rounds` batches of `trips` round trips between a thread on `cpu_a` and one on `cpu_b`
   (two new threads: the caller's affinity is untouched); ns[r] is batch r's mean round trip.
   0 when done; -1 when a thread could not start on its CPU; -2 when it took over give_up_s */
int rlx_round_trip(int cpu_a, int cpu_b, int rounds, int trips, double give_up_s, double *ns) {
    struct rlx_pp p;
    atomic_init(&p.flag, 0);
    atomic_init(&p.abort, 0);
    p.rounds = rounds; p.trips = trips; p.ns = ns;
    p.give_up = rlx_pp_now() + give_up_s;
    pthread_t ta, tb;
    if (rlx_pp_start(&tb, cpu_b, rlx_pp_answer, &p)) return -1;
    if (rlx_pp_start(&ta, cpu_a, rlx_pp_ask, &p)) {
        atomic_store(&p.abort, 1);
        pthread_join(tb, 0);
        return -1;
    }
    pthread_join(ta, 0);
    pthread_join(tb, 0);
    return atomic_load(&p.abort) ? -2 : 0;
}
"""


@dataclass(frozen=True)
class Placement:
    """Where the first two CPUs of the process sat when measured.

    ``kind``: SHARED, SPLIT or UNKNOWN. ``round_trip_ns``: the median batch's mean round trip
    (0 where not measured). ``os_l3``: what sysfs reports of the two CPUs (SHARED, SPLIT or
    UNKNOWN; in a VM it may say shared for vCPUs on two host L3s). ``reason``: why the kind is
    unknown or how it was decided."""

    kind: str
    round_trip_ns: float
    cpus: tuple[int, ...]
    os_l3: str
    reason: str = ""

    def describe(self) -> str:
        """``shared L3 (58 ns round trip CPU 0-1)`` or ``unknown (one CPU)``."""
        if not self.round_trip_ns:
            return f"{self.kind} ({self.reason})" if self.reason else self.kind
        pair = "-".join(str(c) for c in self.cpus)
        return f"{self.kind} ({self.round_trip_ns:.0f} ns round trip CPU {pair})"

    def to_json(self) -> dict[str, object]:
        """The fields as a results file records them (``machine.placement``; cpus a list)."""
        d = asdict(self)
        d["cpus"] = list(self.cpus)
        return d

    @staticmethod
    def from_json(d: Mapping[str, Any]) -> Placement:
        """The placement a results file recorded (``to_json``'s fields); a field the file lacks
        (one written before it was kept) reads as unknown, 0 ns, no CPUs or no reason."""
        return Placement(str(d.get("kind", UNKNOWN)), float(d.get("round_trip_ns") or 0.0),
                         tuple(int(c) for c in d.get("cpus") or ()),
                         str(d.get("os_l3", UNKNOWN)), str(d.get("reason", "")))


def classify(round_trip_ns: float, os_l3: str) -> tuple[str, str]:
    """(kind, how decided) from a round trip (0: not measured) and the OS's L3 report.

    The latency decides where it is clear (below SHARED_BELOW_NS or above SPLIT_ABOVE_NS): in
    a VM the OS may report one L3 for vCPUs the host put on two. Between the bands, or
    without a latency, the OS decides where it reports anything."""
    if round_trip_ns > 0 and round_trip_ns < SHARED_BELOW_NS:
        return SHARED, "round trip"
    if round_trip_ns > SPLIT_ABOVE_NS:
        return SPLIT, "round trip" + (" (the OS reports one L3)" if os_l3 == SHARED else "")
    if os_l3 != UNKNOWN:
        return os_l3, "OS topology" + (" (round trip in between)" if round_trip_ns > 0 else "")
    return UNKNOWN, "round trip in between, no OS topology" if round_trip_ns > 0 \
        else "not measured, no OS topology"


def os_l3(a: int, b: int, root: Path = Path("/sys/devices/system/cpu")) -> str:
    """SHARED where sysfs lists ``b`` among the CPUs sharing ``a``'s L3, SPLIT where it does
    not, UNKNOWN where it reports no L3 (or cannot be read)."""
    try:
        text = (root / f"cpu{a}/cache/index3/shared_cpu_list").read_text().strip()
    except OSError:
        return UNKNOWN
    cpus: set[int] = set()
    try:
        for part in text.split(","):
            lo, _, hi = part.partition("-")
            cpus.update(range(int(lo), int(hi or lo) + 1))
    except ValueError:
        return UNKNOWN
    return SHARED if b in cpus else SPLIT


def first_cpus(n: int = 2) -> tuple[int, ...]:
    """The first ``n`` CPUs of this process's affinity set (fewer where it has fewer)."""
    try:
        return tuple(sorted(os.sched_getaffinity(0))[:n])
    except (AttributeError, OSError):
        return ()


def round_trips(a: int, b: int, rounds: int = ROUNDS, trips: int = TRIPS) -> list[float]:
    """Each batch's mean round trip in ns between threads pinned to CPUs ``a`` and ``b``;
    raises RuntimeError where a thread could not start there or it took over GIVE_UP_S."""
    from rlx_core.targets.cpu.cached_build import build_shared
    from rlx_core.targets.cpu.runtime import load_library

    fn = load_library(str(build_shared(SOURCE).path)).rlx_round_trip
    fn.restype = ctypes.c_int
    fn.argtypes = (ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_double,
                   ctypes.POINTER(ctypes.c_double))
    ns = (ctypes.c_double * rounds)()
    rc = fn(a, b, rounds, trips, GIVE_UP_S, ns)
    if rc == -1:
        raise RuntimeError(f"could not start a thread on CPU {a} or {b}")
    if rc:
        raise RuntimeError(f"no answer within {GIVE_UP_S:g} s")
    return list(ns)


def measure_placement(cpus: tuple[int, ...] | None = None) -> Placement:
    """The placement of ``cpus`` (default: the first two of this process's affinity set): the
    median of ROUNDS batches' mean round trip, classified (``classify``). Never raises: one
    CPU, or a probe that fails, gives an UNKNOWN (or OS-reported) kind with the reason."""
    pair = first_cpus(2) if cpus is None else tuple(cpus)[:2]
    if len(pair) < 2:
        return Placement(UNKNOWN, 0.0, pair, UNKNOWN,
                         "one CPU in this process's affinity set: no pair to place")
    report = os_l3(*pair)
    try:
        ns = statistics.median(round_trips(*pair))
    except Exception as e:  # no compiler, a thread that never ran: say so, do not fail a run
        kind, how = classify(0.0, report)
        return Placement(kind, 0.0, pair, report, f"probe failed ({e}); {how}")
    kind, how = classify(ns, report)
    return Placement(kind, round(ns, 1), pair, report, how)
