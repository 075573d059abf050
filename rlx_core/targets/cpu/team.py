"""Team mode: one OpenMP parallel region per program call, kernels separated by spin barriers.

A parallel region per kernel (``#pragma omp parallel for`` in each loop nest) costs a wake-up
of the sleeping workers every time: MiniLM runs ~170 kernels per call, an MLP training step
~20, and with ``OMP_WAIT_POLICY=PASSIVE`` (idle workers must not spin on cores that other
code needs; they spin only briefly first, see runtime.openmp_defaults) each wake-up is a futex
round trip. In team mode the entry point opens one region;
every thread runs every *team kernel*, whose loops are orphaned worksharing loops
(``#pragma omp for nowait``) or, when too small to split, ``#pragma omp single nowait``; GEMMs
take a row block per thread. Between kernels the threads meet at ``rlx_team_sync``, a barrier
that spins up to 0.1 ms (the other thread is usually microseconds away) and then sleeps on a
futex. Only the region's start sleeps and wakes, once per call.

On a busy machine (other processes on the cores, another library's thread pool still
spinning) a team thread gets descheduled for whole time slices, and every barrier waits for
it. Such waits are counted as late arrivals (BARRIER_C); a program that keeps seeing them
runs its next calls on the calling thread alone, then tries the team again, so the team is
never much slower than one thread whatever the load (benchmarks/bench_contention.py).

A kernel whose rendered body has any other top-level statement (a serial loop, a memcpy, an
index check) is not team-safe: it is rendered again without pragmas and runs on thread 0
only. ``team_safe`` decides that from the rendered lines, so a new emitter that writes
something unexpected falls back to a correct serial kernel instead of racing.
"""

from __future__ import annotations

import re
from collections.abc import Callable

SYNC = "rlx_team_sync(omp_get_num_threads());"
GEMM_BLOCK_HEAD = "/* team gemm */"  # opens the block every thread runs (blas._team_gemm)
GEMM_BLOCK = GEMM_BLOCK_HEAD + " {"
TEAM_BLOCK = "/* team block */ {"  # any block every thread runs (a Krylov solver, cpu/sparse.py)
FOR_PRAGMA = "#pragma omp for schedule(static) nowait"
SINGLE_PRAGMA = "#pragma omp single nowait"

# C for the barrier and the team's size. The barrier is a generation counter; the last thread to
# arrive starts the next generation. A waiting thread spins with the CPU's pause hint for at
# most RLX_TEAM_SPIN_NS (read from the clock every 256 pauses), then sleeps on a futex that the
# last arrival wakes: a thread the OS descheduled (another process took its core) then costs
# the waiting one no CPU time, and the core goes to whoever can use it. Such a wait is a *late
# arrival*; a call with two of them, or one in each of two calls in a row, means the machine is
# oversubscribed, and the program's next calls run on the calling thread alone (no region):
# first for 2 calls and 5 ms, both doubling while the next team call is late again (at most
# 64 calls and 1 s), back to the first spell after a call on time. One late arrival alone is tolerated: after an idle spell the
# woken worker may share a CPU with thread 0 until the scheduler moves it (a millisecond).
BARRIER_C = r"""
#ifndef RLX_TEAM_SYNC_H
#define RLX_TEAM_SYNC_H
#include <stdatomic.h>
#include <limits.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>
#if defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#endif
#if defined(__x86_64__) || defined(__i386__)
#define RLX_CPU_RELAX() __builtin_ia32_pause()
#elif defined(__aarch64__) || defined(__arm__)
#define RLX_CPU_RELAX() __asm__ __volatile__("yield")
#else
#define RLX_CPU_RELAX() ((void)0)
#endif
#define RLX_TEAM_SPIN_NS 100000LL    /* 0.1 ms: intra-call imbalance is microseconds */
#define RLX_TEAM_MAX_SHRINK 64       /* calls on one thread at most before the team is tried */
#define RLX_TEAM_MIN_SHRINK_NS 5000000LL     /* and time: 5 ms first, */
#define RLX_TEAM_MAX_SHRINK_NS 1000000000LL  /* 1 s at most */
typedef struct { atomic_int count; atomic_int gen; atomic_int sleepers; } rlx_team_barrier;
static rlx_team_barrier rlx_team_bar;  /* one program call runs at a time (the runtime's lock) */
/* per program (translation unit): late arrivals in this call, the shrink state, counters */
static atomic_int rlx_team_late;
static int rlx_team_prev_late, rlx_team_shrink_left, rlx_team_shrink_next = 2;
static long long rlx_team_shrink_until, rlx_team_shrink_ns = RLX_TEAM_MIN_SHRINK_NS;
static long long rlx_team_stat[4];  /* team calls, late arrivals, calls shrunk, shrink spells */
static atomic_int rlx_team_delay_tid = -1, rlx_team_delay_us;  /* tests: a descheduled thread */
static inline long long rlx_team_clock_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}
/* the next piece of a kernel whose pieces threads claim: each such kernel call has a counter
   of its own (<prefix>_work[kernel]), zeroed by the entry point before the region starts */
static inline int rlx_team_claim(atomic_int *work) {
    return atomic_fetch_add_explicit(work, 1, memory_order_relaxed);
}
static inline void rlx_team_sleep(const int g) {
#if defined(__linux__)
    atomic_fetch_add_explicit(&rlx_team_bar.sleepers, 1, memory_order_seq_cst);
    while (atomic_load_explicit(&rlx_team_bar.gen, memory_order_seq_cst) == g)
        syscall(SYS_futex, (int*)&rlx_team_bar.gen, FUTEX_WAIT_PRIVATE, g, NULL, NULL, 0);
    atomic_fetch_sub_explicit(&rlx_team_bar.sleepers, 1, memory_order_relaxed);
#else
    while (atomic_load_explicit(&rlx_team_bar.gen, memory_order_acquire) == g) sched_yield();
#endif
}
static inline void rlx_team_sync(int team) {
    if (team <= 1) return;
    const int g = atomic_load_explicit(&rlx_team_bar.gen, memory_order_acquire);
    if (atomic_fetch_add_explicit(&rlx_team_bar.count, 1, memory_order_acq_rel) == team - 1) {
        atomic_store_explicit(&rlx_team_bar.count, 0, memory_order_relaxed);
        atomic_store_explicit(&rlx_team_bar.gen, g + 1, memory_order_seq_cst);
#if defined(__linux__)
        if (atomic_load_explicit(&rlx_team_bar.sleepers, memory_order_seq_cst) > 0)
            syscall(SYS_futex, (int*)&rlx_team_bar.gen, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
#endif
        return;
    }
    long long t0 = 0;
    for (unsigned spins = 1; atomic_load_explicit(&rlx_team_bar.gen, memory_order_acquire) == g;
         ++spins) {
        RLX_CPU_RELAX();
        if ((spins & 255) == 0) {
            const long long now = rlx_team_clock_ns();
            if (t0 == 0) {
                t0 = now;
            } else if (now - t0 > RLX_TEAM_SPIN_NS) {
                atomic_fetch_add_explicit(&rlx_team_late, 1, memory_order_relaxed);
                rlx_team_sleep(g);
                return;
            }
        }
    }
}
/* the team size of this call: 1 (no region) while the program is shrunk: for a number of
   calls and a time, both doubling per spell in a row (a probe of the team on a busy machine
   cost 10x a one-thread call of the MLP step here: spells must grow long to amortise it) */
static inline int rlx_team_begin(int want) {
    if (want <= 1) return 1;
    if (rlx_team_shrink_left > 0
        || (rlx_team_shrink_until && rlx_team_clock_ns() < rlx_team_shrink_until)) {
        if (rlx_team_shrink_left > 0) --rlx_team_shrink_left;
        ++rlx_team_stat[2];
        return 1;
    }
    rlx_team_shrink_until = 0;
    atomic_store_explicit(&rlx_team_late, 0, memory_order_relaxed);
    ++rlx_team_stat[0];
    return want;
}
static inline void rlx_team_end(int used) {
    if (used <= 1) return;
    const int late = atomic_load_explicit(&rlx_team_late, memory_order_relaxed);
    rlx_team_stat[1] += late;
    if (late >= 2 || (late && rlx_team_prev_late)) {
        rlx_team_shrink_left = rlx_team_shrink_next;
        rlx_team_shrink_until = rlx_team_clock_ns() + rlx_team_shrink_ns;
        ++rlx_team_stat[3];
        if (rlx_team_shrink_next < RLX_TEAM_MAX_SHRINK) rlx_team_shrink_next *= 2;
        if (rlx_team_shrink_ns < RLX_TEAM_MAX_SHRINK_NS) rlx_team_shrink_ns *= 2;
        rlx_team_prev_late = 0;
    } else {
        if (!late) {
            rlx_team_shrink_next = 2;
            rlx_team_shrink_ns = RLX_TEAM_MIN_SHRINK_NS;
        }
        rlx_team_prev_late = late > 0;
    }
}
/* tests: thread `tid` sleeps `us` microseconds at the start of the next team call */
static inline void rlx_team_maybe_delay(int tid) {
    if (atomic_load_explicit(&rlx_team_delay_tid, memory_order_relaxed) != tid) return;
    const int us = atomic_exchange_explicit(&rlx_team_delay_us, 0, memory_order_relaxed);
    atomic_store_explicit(&rlx_team_delay_tid, -1, memory_order_relaxed);
    if (us > 0) usleep((useconds_t)us);
}
#endif
"""

# A barrier of a kernel's own, for a team block whose steps wait on each other (the Krylov
# solvers, cpu/sparse.py; the splatting rasterizer, cpu/splat_source.py). The waits there are
# the kernel's (row-block imbalance, thread 0 binning alone), so they must not count as the
# team's late arrivals (rlx_team_sync would shrink a program whose calls see those): it spins,
# then yields. Also the thread's index and the team's size, 0 and 1 without OpenMP.
WORK_SYNC_C = r"""
#ifndef RLX_WORK_SYNC_H
#define RLX_WORK_SYNC_H
#include <stdatomic.h>
#include <sched.h>
#ifdef _OPENMP
#include <omp.h>
#endif
typedef struct { atomic_int count; atomic_int gen; } rlx_work_barrier;
static rlx_work_barrier rlx_work_bar;  /* one program call runs at a time */
static inline void rlx_work_sync(int team) {
    if (team <= 1) return;
    const int g = atomic_load_explicit(&rlx_work_bar.gen, memory_order_acquire);
    if (atomic_fetch_add_explicit(&rlx_work_bar.count, 1, memory_order_acq_rel) == team - 1) {
        atomic_store_explicit(&rlx_work_bar.count, 0, memory_order_relaxed);
        atomic_store_explicit(&rlx_work_bar.gen, g + 1, memory_order_release);
        return;
    }
    for (unsigned spins = 1; atomic_load_explicit(&rlx_work_bar.gen, memory_order_acquire) == g;
         ++spins) {
#if defined(__x86_64__) || defined(__i386__)
        if (spins < (1u << 14)) { __builtin_ia32_pause(); continue; }
#else
        if (spins < (1u << 14)) continue;
#endif
        sched_yield();
    }
}
static inline int rlx_work_tid(void) {
#ifdef _OPENMP
    return omp_get_thread_num();
#else
    return 0;
#endif
}
static inline int rlx_work_team(void) {
#ifdef _OPENMP
    return omp_get_num_threads();
#else
    return 1;
#endif
}
#endif
"""

_DECL = re.compile(r"^[A-Za-z_][\w ]*\*? *(const )?restrict \w+ = [^;]*;$")


def team_safe(lines: list[str]) -> bool:
    """Is a kernel body (lines at depth 1) made only of statements every thread may run?

    Allowed at the top level: worksharing / single loops (a pragma line, then a ``for``
    block), team GEMM blocks, barriers and local pointer declarations.
    """
    i, n = 0, len(lines)
    while i < n:
        body = lines[i][4:] if lines[i].startswith("    ") else None
        if body is None or body.startswith(" "):
            return False
        if body in (FOR_PRAGMA, SINGLE_PRAGMA) or body.startswith(FOR_PRAGMA + " "):
            if i + 1 >= n or not lines[i + 1].startswith("    for ("):
                return False
            i = _skip_block(lines, i + 1)
        elif body in (GEMM_BLOCK, TEAM_BLOCK):
            i = _skip_block(lines, i)
        elif body == SYNC or body == "(void)scratch;" or _DECL.match(body):
            i += 1
        else:
            return False
        if i < 0:
            return False
    return True


def _skip_block(lines: list[str], start: int) -> int:
    """The index after the ``}`` that closes the block opened on line ``start``."""
    if not lines[start].endswith("{"):
        return -1
    for j in range(start + 1, len(lines)):
        if lines[j] == "    }":
            return j + 1
    return -1


def team_calls(calls: list[str], team: list[bool],
               timer: Callable[[int], tuple[str, str]] | None = None) -> list[str]:
    """Kernel calls inside the region: serial kernels on thread 0, barriers where needed.

    Two serial kernels in a row need no barrier (thread 0 runs both in order); any pair with
    a team kernel does, since the later one may read what another thread wrote.

    With ``timer`` (kernel index -> C statements that start and stop its clock) thread 0
    times each kernel from its start to the barrier after it, so a team kernel's time is its
    wall time across the team, the wait for the slowest thread included (every team kernel
    then ends in a barrier, the last one too).
    """
    if len(team) != len(calls):
        raise ValueError(f"{len(calls)} kernel calls but {len(team)} team flags")
    out: list[str] = []
    # an empty call is a kernel with nothing to run (an aliased reshape): no barrier either
    live = [i for i, call in enumerate(calls) if call.strip()]
    for pos, i in enumerate(live):
        call, is_team = calls[i], team[i]
        nxt = live[pos + 1] if pos + 1 < len(live) else None
        if timer:
            out.append("        if (rlx_team_tid == 0) " + timer(i)[0])
        body = call.strip()
        out.append("        " + body if is_team else "        if (rlx_team_tid == 0) " + body)
        if (nxt is not None and (is_team or team[nxt])) or (timer and is_team):
            out.append("        " + SYNC)
        if timer:
            out.append("        if (rlx_team_tid == 0) " + timer(i)[1])
    return out


def work_counters(prefix: str, kernels: int) -> str:
    """The claim counters of a program's kernels (rlx_team_claim), one per kernel, and the
    count of regions the program opened (``<prefix>_regions``, see ``team_functions``)."""
    return (f"static atomic_int {prefix}_work[{max(kernels, 1)}];\n"
            f"static atomic_llong {prefix}_region_count;\n")


def team_functions(prefix: str, team_mode: bool) -> str:
    """Exported helpers of a program, for tests and benchmarks.

    ``long long <prefix>_regions(void)``: team regions (one per call) opened so far, always 0
    for a program that runs on the calling thread alone. In team mode also
    ``<prefix>_team_stats(long long out[4])`` (team calls, late arrivals, calls shrunk to one
    thread, shrink spells), ``<prefix>_team_reset()`` (forget the shrink state: the next call
    is a team call) and ``<prefix>_team_delay(tid, us)`` (thread ``tid`` sleeps ``us``
    microseconds at the start of the next team call: a descheduled thread, simulated).
    """
    if not team_mode:
        return f"long long {prefix}_regions(void) {{\n    return 0;\n}}\n"
    return (f"long long {prefix}_regions(void) {{\n"
            f"    return atomic_load_explicit(&{prefix}_region_count, memory_order_relaxed);\n}}\n"
            f"void {prefix}_team_stats(long long* out) {{\n"
            "    for (int i = 0; i < 4; ++i) out[i] = rlx_team_stat[i];\n}\n"
            f"void {prefix}_team_reset(void) {{\n"
            "    rlx_team_shrink_left = 0; rlx_team_shrink_until = 0; rlx_team_prev_late = 0;\n"
            "    rlx_team_shrink_next = 2; rlx_team_shrink_ns = RLX_TEAM_MIN_SHRINK_NS;\n}\n"
            f"void {prefix}_team_delay(int tid, int us) {{\n"
            "    atomic_store_explicit(&rlx_team_delay_us, us, memory_order_relaxed);\n"
            "    atomic_store_explicit(&rlx_team_delay_tid, tid, memory_order_relaxed);\n}\n")


def region(calls: list[str], timed: bool = False, prefix: str = "rlx",
           kernels: int = 0) -> list[str]:
    """The entry point's body: the claim counters zeroed, then one parallel region around the
    kernel calls, of the team size ``rlx_team_begin`` allows (1 while shrunk: no region)."""
    clock = ["        double rlx_team_t0 = 0.0;", "        (void)rlx_team_t0;"] if timed else []
    return [f"    for (int i = 0; i < {max(kernels, 1)}; ++i)  /* nothing is claimed yet */",
            f"        atomic_store_explicit(&{prefix}_work[i], 0, memory_order_relaxed);",
            "    const int rlx_team_n = rlx_team_begin(RLX_TEAM);",
            "    if (rlx_team_n > 1)",
            f"        atomic_fetch_add_explicit(&{prefix}_region_count, 1, memory_order_relaxed);",
            "    #pragma omp parallel num_threads(rlx_team_n) if (rlx_team_n > 1)",
            "    {",
            "        const int rlx_team_tid = omp_get_thread_num();",
            "        (void)rlx_team_tid;",
            "        if (rlx_team_n > 1) rlx_team_maybe_delay(rlx_team_tid);",
            *clock,
            *calls,
            "    }",
            "    rlx_team_end(rlx_team_n);"]
