"""Team mode: one OpenMP parallel region per program call, kernels separated by spin barriers.

A parallel region per kernel (``#pragma omp parallel for`` in each loop nest) costs a wake-up
of the sleeping workers every time: MiniLM runs ~170 kernels per call, an MLP training step
~20, and with ``OMP_WAIT_POLICY=PASSIVE`` (idle workers must not spin on cores that other
code needs; they spin only briefly first, see runtime.openmp_defaults) each wake-up is a futex
round trip. In team mode the entry point opens one region;
every thread runs every *team kernel*, whose loops are orphaned worksharing loops
(``#pragma omp for nowait``) or, when too small to split, ``#pragma omp single nowait``; GEMMs
take a row block per thread. Between kernels the threads meet at ``rlx_team_sync``, a barrier
that spins up to ~1.5 ms (the other thread is usually microseconds away) and then yields. Only the region's
start sleeps and wakes, once per call.

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
FOR_PRAGMA = "#pragma omp for schedule(static) nowait"
SINGLE_PRAGMA = "#pragma omp single nowait"

# C for the barrier: a generation counter; the last thread to arrive starts the next
# generation. Spins with the CPU's pause hint, then yields, so a loaded machine is not held.
BARRIER_C = r"""
#ifndef RLX_TEAM_SYNC_H
#define RLX_TEAM_SYNC_H
#include <stdatomic.h>
#include <sched.h>
#if defined(__x86_64__) || defined(__i386__)
#define RLX_CPU_RELAX() __builtin_ia32_pause()
#elif defined(__aarch64__) || defined(__arm__)
#define RLX_CPU_RELAX() __asm__ __volatile__("yield")
#else
#define RLX_CPU_RELAX() ((void)0)
#endif
typedef struct { atomic_int count; atomic_int gen; } rlx_team_barrier;
static rlx_team_barrier rlx_team_bar;  /* one program call runs at a time (the runtime's lock) */
/* the next piece of a kernel whose pieces threads claim: each such kernel call has a counter
   of its own (<prefix>_work[kernel]), zeroed by the entry point before the region starts */
static inline int rlx_team_claim(atomic_int *work) {
    return atomic_fetch_add_explicit(work, 1, memory_order_relaxed);
}
static inline void rlx_team_sync(int team) {
    if (team <= 1) return;
    const int g = atomic_load_explicit(&rlx_team_bar.gen, memory_order_acquire);
    if (atomic_fetch_add_explicit(&rlx_team_bar.count, 1, memory_order_acq_rel) == team - 1) {
        atomic_store_explicit(&rlx_team_bar.count, 0, memory_order_relaxed);
        atomic_store_explicit(&rlx_team_bar.gen, g + 1, memory_order_release);
        return;
    }
    /* spin ~1.5 ms (2^16 pauses of ~25 ns), then yield. Shorter spins lost to the guest
       scheduler after an idle spell: the woken worker shared a CPU with the waiting thread
       until load balancing moved it (about a millisecond), and every early yield handed the
       core back and forth (2 threads at 2^10 spins ran 2x slower than at 2^16) */
    for (int spins = 0; atomic_load_explicit(&rlx_team_bar.gen, memory_order_acquire) == g;) {
        if (++spins < (1 << 16)) RLX_CPU_RELAX(); else sched_yield();
    }
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
        elif body == GEMM_BLOCK:
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
    """``long long <prefix>_regions(void)``: team regions (one per call) this program has
    opened so far, always 0 for a program that runs on the calling thread alone; tests read
    it to check that tiny work wakes no thread."""
    value = (f"atomic_load_explicit(&{prefix}_region_count, memory_order_relaxed)"
             if team_mode else "0")
    return f"long long {prefix}_regions(void) {{\n    return {value};\n}}\n"


def region(calls: list[str], timed: bool = False, prefix: str = "rlx",
           kernels: int = 0) -> list[str]:
    """The entry point's body: the claim counters zeroed, then one parallel region around the
    kernel calls."""
    clock = ["        double rlx_team_t0 = 0.0;", "        (void)rlx_team_t0;"] if timed else []
    return [f"    atomic_fetch_add_explicit(&{prefix}_region_count, 1, memory_order_relaxed);",
            f"    for (int i = 0; i < {max(kernels, 1)}; ++i)  /* nothing is claimed yet */",
            f"        atomic_store_explicit(&{prefix}_work[i], 0, memory_order_relaxed);",
            "    #pragma omp parallel num_threads(RLX_TEAM)",
            "    {",
            "        const int rlx_team_tid = omp_get_thread_num();",
            "        (void)rlx_team_tid;",
            *clock,
            *calls,
            "    }"]
