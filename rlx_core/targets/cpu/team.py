"""Team mode: one team call per program call; kernels hand their work out as chunks that the
threads claim.

A parallel region per kernel (``#pragma omp parallel for`` in each loop nest) costs a wake-up
of the sleeping workers every time: MiniLM runs ~170 kernels per call, an MLP training step
~20, and idle workers must not spin on cores that other code needs, so each wake-up is a futex
round trip. In team mode the entry point starts the team once per call and every thread runs
every *team kernel*.

Dynamic hand-out (``claimed``). An emitter writes a team kernel's loops as orphaned
worksharing loops (``#pragma omp for nowait``; ``#pragma omp single nowait`` when too small to
split) and a GEMM as a loop over chunks marked CHUNKS (blas._team_gemm: row blocks, batches or
column chunks). ``claimed`` rewrites them into loops over chunks that each thread claims from
the kernel call's counter (``rlx_team_take``, ~16 chunks per loop; each thread starts on its
own half, the same chunks every call, then steals what is left), and ends the kernel in
``rlx_team_done``: the thread adds the chunks it ran to the call's *done* counter and waits
until all chunks are done. A barrier inside the kernel (a GEMM, then an epilogue over the
whole result) becomes the end of a phase the same way. So a wait lasts only while some thread
holds a claimed chunk; a thread the OS deschedules between chunks (another process took its
core) simply claims fewer of them, and when it comes back it finds the chunks of the kernels
it missed claimed and done and skips through them (one atomic operation and one load each). A
run of serial kernels is one chunk: whichever thread gets there first runs it (team_calls).
The chunks compute every element as the static split did (GEMM row blocks are multiples of 16
rows, the kernel's blocking and k order do not depend on them), so a result has the same bits
whoever ran which chunk.

The team. A program whose kernels all claim their work runs on the translation unit's own
worker pool (``rlx_team_call``, team_runtime.BARRIER_C): the caller posts the call (a new
*generation*, which the claim counters carry, so a worker still inside an earlier call claims
nothing of this one), runs the body itself and returns as soon as every chunk is done. It never
waits for a worker that has not come yet or has not left: OpenMP's region joins every thread at
its end, and a worker woken but not yet scheduled cost a busy machine's MLP step 10-40 ms
there. Workers spin briefly for the next call (back-to-back calls find them awake), then sleep.
What has no claimed form (a TEAM_BLOCK kernel: the Krylov solvers, whose steps meet at their
own barrier; a worksharing loop with clauses or bounds ``claimed`` does not parse) keeps its
static shares in one OpenMP parallel region per call, and the threads meet at ``rlx_team_sync``
after it.

On a busy machine the waits of thread 0 that outlast what the work explains are counted as late
arrivals (team_runtime.BARRIER_C), and what they cost past that is the call's lost time. A team
call that lost over a quarter of its wall time, or in which no worker ran a chunk (it came when
the work was done), or in which thread 0 itself ran under 80% of the time it was not asleep in
a wait (its thread CPU clock: the machine has no core to spare) is *bad*. A program that keeps
making bad calls runs its next calls on the calling thread alone (while those are starved too),
then tries the team again, so the team is never much slower than one thread whatever the load
(benchmarks/bench_contention.py); a late wait that costs little does not shrink it
(rlx_team_judge; a call is judged when the next one begins, rlx_team_settle: thread 0's CPU
clock is a system call, where the scheduler would preempt it inside the call).
``<prefix>_team_chunks`` counts the chunks each thread ran.

A kernel whose rendered body has any other top-level statement (a serial loop, a memcpy, an
index check) is not team-safe: it is rendered again without pragmas and runs as a serial
kernel. ``team_safe`` decides that from the rendered lines, so a new emitter that writes
something unexpected falls back to a correct serial kernel instead of racing.

This module rewrites rendered kernels and the entry point's body into that form. The C they
call into (the generation, the claim counters' waits, the barrier, the worker pool, the judge
and the shrink state) is team_runtime.py's, with the comments that explain it; which waits a
claimed kernel may leave to a later kernel, and what a waiting thread prefetches, is
team_waits.py's.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from rlx_core.targets.cpu.team_waits import (
    Footprint,
    Stream,
    phases,
    prefetch_hints,
    wait_prefetch_lines,
)

SYNC = "rlx_team_sync(omp_get_num_threads());"
GEMM_BLOCK_HEAD = "/* team gemm */"  # opens the block every thread runs (blas._team_gemm)
GEMM_BLOCK = GEMM_BLOCK_HEAD + " {"
TEAM_BLOCK = "/* team block */ {"  # any block every thread runs (a Krylov solver, cpu/sparse.py)
FOR_PRAGMA = "#pragma omp for schedule(static) nowait"
SINGLE_PRAGMA = "#pragma omp single nowait"

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


def team_calls(
    calls: list[str],
    team: list[bool],
    timer: Callable[[int], tuple[str, str]] | None = None,
    claims: list[bool] | None = None,
    prefix: str = "rlx",
    feet: list[Footprint | None] | None = None,
    ends: list[int | None] | None = None,
    streams: list[Stream | None] | None = None,
) -> list[str]:
    """Kernel calls inside the region, with what makes each wait for the work it reads.

    ``claims[i]``: kernel i hands its work out as claimed chunks and returns only when all of
    them are done (claimed()); it needs no barrier. Another team kernel (static shares) is
    followed by a barrier (SYNC). A run of serial kernels is claimed as one chunk: the first
    thread to get there runs them in order while the others wait for that chunk alone
    (``rlx_team_serial``, on the first kernel's counters). Without ``claims`` (none claimed)
    serial kernels run on thread 0, with a barrier wherever a team kernel is involved.

    With ``timer`` (kernel index -> C statements that start and stop its clock) thread 0
    times each kernel from its start to the barrier after it, so a team kernel's time is its
    wall time across the team, the wait for the slowest thread included (every team kernel
    then ends in a barrier, the last one too).

    With ``feet`` (each kernel's Footprint, None where unknown) and ``ends`` (a claimed
    kernel's chunk count, its last rlx_team_done_last), a claimed kernel that the next kernel
    neither reads nor overwrites does not wait for the other threads' chunks at its end: the
    wait (rlx_team_finish) comes before the first later kernel that conflicts with it, or at
    the body's end (``team_waits.phases``).

    With ``streams`` (each kernel's prepacked weight that it streams from memory, None where
    it reads none) each kernel is preceded by the hint of the next such weight after it
    (rlx_team_hint), which the threads prefetch while they wait
    (``team_waits.wait_prefetch_lines``).
    """
    if len(team) != len(calls):
        raise ValueError(f"{len(calls)} kernel calls but {len(team)} team flags")
    out: list[str] = []
    # an empty call is a kernel with nothing to run (an aliased reshape): no barrier either
    live = [i for i, call in enumerate(calls) if call.strip()]
    if claims is not None:
        defer: set[int] = set()
        waits: dict[int, list[str]] = {}
        if feet and ends and not timer:  # the timed build times each kernel to its end
            defer, finish = phases(live, team, claims, feet, ends)
            waits = {
                at: [
                    f"        rlx_team_finish({prefix}_work + {2 * k}, {ends[k] or 1});" for k in ks
                ]
                for at, ks in finish.items()
            }
        hints = prefetch_hints(live, team, streams) if streams and wait_prefetch_lines() else {}
        return _claimed_calls(calls, team, claims, live, timer, prefix, defer, waits, hints)
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


def _claimed_calls(
    calls: list[str],
    team: list[bool],
    claims: list[bool],
    live: list[int],
    timer: Callable[[int], tuple[str, str]] | None,
    prefix: str,
    defer: set[int] = frozenset(),
    finish: dict[int, list[str]] | None = None,
    hints: dict[int, str] | None = None,
) -> list[str]:
    """The calls of a program whose team kernels claim their work; kernels in ``defer`` run
    under rlx_team_defer, ``finish[i]`` (lines) comes before kernel i (-1: at the end), and
    so does ``hints[i]`` (a line)."""
    out: list[str] = []
    finish = finish or {}
    hints = hints or {}
    pos = 0
    while pos < len(live):
        i = live[pos]
        out += finish.get(i, [])
        if i in hints:
            out.append(hints[i])
        if not team[i]:  # a run of serial kernels: one claimed chunk
            run = [i]
            while pos + 1 < len(live) and not team[live[pos + 1]]:
                pos += 1
                run.append(live[pos])
            work = f"{prefix}_work + {2 * i}"
            out.append(f"        {{ int rlx_g = rlx_team_serial({work});")
            out.append("          if (rlx_g) {")
            for j in run:
                if timer:
                    out.append("            " + timer(j)[0])
                out.append("            " + calls[j].strip())
                if timer:
                    out.append("            " + timer(j)[1])
            out.append("          }")
            if i in defer:  # only report the chunk: the wait is a later rlx_team_finish
                out.append(
                    f"          rlx_team_defer = 1; rlx_team_done_last({work}, &rlx_g, 1);"
                    " rlx_team_defer = 0; }"
                )
            else:
                out.append(f"          rlx_team_done({work}, &rlx_g, 1); }}")
        else:
            if timer:
                out.append("        if (rlx_team_tid == 0) " + timer(i)[0])
            if i in defer:
                out.append(f"        rlx_team_defer = 1; {calls[i].strip()} rlx_team_defer = 0;")
            else:
                out.append("        " + calls[i].strip())
            if not claims[i] and (pos + 1 < len(live) or timer):
                out.append("        " + SYNC)
            if timer:
                out.append("        if (rlx_team_tid == 0) " + timer(i)[1])
        pos += 1
    return out + finish.get(-1, [])


def work_counters(prefix: str, kernels: int) -> str:
    """The claim counters of a program's kernels (rlx_team_claim), two per kernel (chunks
    claimed, chunks done, each with the call's generation in its high half), and the count of
    team calls the program made (``<prefix>_regions``, see ``team_runtime.team_functions``)."""
    return (
        f"static atomic_llong {prefix}_work[{2 * max(kernels, 1)}];\n"
        f"static atomic_llong {prefix}_region_count;\n"
    )


ENTRY_PARAMS = (
    "const void* const* inputs",
    "const void* const* params",
    "void* const* outputs",
    "unsigned char* arena",
)  # the entry point's (c_common renderer.entry)


def body_function(calls: list[str], prefix: str, timed: bool = False) -> str:
    """The pool's body of a program whose kernels all claim their work (``region`` with
    ``pool``): the kernel calls as a function every thread of the team runs, taking the entry
    point's arguments as an array (rlx_team_call)."""
    names = [p.rsplit(" ", 1)[1] for p in ENTRY_PARAMS]
    head = [f"static void {prefix}_body(void* const* rlx_a, int rlx_team_tid, int rlx_team_n) {{"]
    head += [f"    {p} = ({p.rsplit(' ', 1)[0]})rlx_a[{i}];" for i, p in enumerate(ENTRY_PARAMS)]
    head.append("    " + " ".join(f"(void){n};" for n in names) + " (void)rlx_team_n;")
    head.append("    if (rlx_team_n > 1) rlx_team_maybe_delay(rlx_team_tid);")
    if timed:
        head += ["    double rlx_team_t0 = 0.0;", "    (void)rlx_team_t0;"]
    return "\n".join([*head, *(c[4:] if c.startswith("    ") else c for c in calls), "}"]) + "\n"


POOL_CALL = "/* the team's call */"
REGION_MARKS = ("#pragma omp parallel num_threads", POOL_CALL)  # a team call, either form


def region(
    calls: list[str],
    timed: bool = False,
    prefix: str = "rlx",
    kernels: int = 0,
    claimed_only: bool = False,
) -> list[str]:
    """The entry point's body: a new generation on the claim counters, then the kernel calls
    on a team of the size ``rlx_team_begin`` allows (1 while shrunk: the calling thread alone).

    With ``claimed_only`` (every kernel's work is claimed, team_calls) the team is the pool
    (``rlx_team_call`` runs ``body_function``, which the caller writes before the entry): the
    call returns when every chunk is done, without waiting for a worker to come or leave, and
    a call (of over 1 ms) in which no worker ran a chunk counts as a late arrival (the worker
    came when the work was done). Otherwise one OpenMP parallel region, which joins every thread at its end:
    a wait there past the spin budget is a late arrival too."""
    counters = 2 * max(kernels, 1)
    head = [
        f"    const long long rlx_team_g = rlx_team_next({prefix}_work, {counters});",
        "    const int rlx_team_n = rlx_team_begin(RLX_TEAM);",
        "    if (rlx_team_n > 1)",
        f"        atomic_fetch_add_explicit(&{prefix}_region_count, 1, memory_order_relaxed);",
    ]
    if claimed_only:
        names = ", ".join(f"(void*){p.rsplit(' ', 1)[1]}" for p in ENTRY_PARAMS)
        return [
            *head,
            f"    {{ void* const rlx_a[4] = {{{names}}};",
            f"      rlx_team_call({prefix}_body, rlx_a, rlx_team_n, rlx_team_g); }}  {POOL_CALL}",
            "    rlx_team_end(rlx_team_n);",
        ]
    clock = ["        double rlx_team_t0 = 0.0;", "        (void)rlx_team_t0;"] if timed else []
    return [
        *head,
        "    atomic_store_explicit(&rlx_pool_n, 1, memory_order_relaxed);  /* not the pool's */",
        "    atomic_store_explicit(&rlx_team_gen, rlx_team_g, memory_order_seq_cst);",
        "    long long rlx_team_body_end = 0;",
        "    #pragma omp parallel num_threads(rlx_team_n) if (rlx_team_n > 1)",
        "    {",
        "        const int rlx_team_tid = omp_get_thread_num();",
        "        rlx_team_enter(rlx_team_tid, rlx_team_n, rlx_team_g);",
        "        if (rlx_team_n > 1) rlx_team_maybe_delay(rlx_team_tid);",
        *clock,
        *calls,
        "        if (rlx_team_tid == 0) rlx_team_body_end = rlx_team_clock_ns();",
        "    }",
        "    if (rlx_team_n > 1 && rlx_team_clock_ns() - rlx_team_body_end > RLX_TEAM_SPIN_NS) {",
        "        atomic_fetch_add_explicit(&rlx_team_late, 1, memory_order_relaxed);",
        "        rlx_team_lost += rlx_team_clock_ns() - rlx_team_body_end;",
        "    }",
        "    rlx_team_end(rlx_team_n);",
    ]


# ---- claimed chunks --------------------------------------------------------------------------
# A team kernel's work is handed out as chunks that threads claim from the kernel's counter
# (rlx_team_claim) instead of static shares. An emitter marks a loop over chunks it wants
# claimed with CHUNKS (``/* team chunks */ for (int64_t ch = 0; ch < N; ++ch) {``, reached by
# every thread); claimed() turns those and the worksharing loops into claim loops. A thread the
# OS deschedules then claims fewer chunks and the others run the rest.
CHUNKS = "/* team chunks */"
LOOP_CHUNKS = 16  # chunks of a worksharing loop (at most; fewer when it has fewer iterations)
CLAIM = "atomic_llong* rlx_work"  # the counters' kernel parameter (blas.emit_gemm names it too)
_CHUNK_FOR = re.compile(r"^( *)/\* team chunks \*/ for \(int64_t ch = 0; ch < (\d+); \+\+ch\) \{$")
_FOR = re.compile(r"^for \(int64_t (\w+) = 0; \1 < (\d+); (?:\+\+\1|\1 \+= (\d+))\) \{$")


TAKE_CHUNKS, TAKE_LOOPS = 4096, 256  # claim loops' limits (rlx_team_take's fields)


def _claim_loop(indent: str, loop: int, chunks: int) -> list[str]:
    """The head of claim loop ``loop`` (1, 2, ... in the kernel) over ``chunks`` chunks in the
    affine order (rlx_team_take: thread 0 starts on the first half, thread 1 on the rest);
    ``ch`` is the chunk's index within the loop."""
    half = (chunks + 1) // 2
    return [
        f"{indent}for (int rlx_c; (rlx_c = rlx_team_take(rlx_work, {loop}, {half}, "
        f"{chunks})) >= 0; ++rlx_got) {{",
        f"{indent}    const int64_t ch = rlx_c;",
        f"{indent}    (void)ch;",
    ]


def _shift(lines: list[str], levels: int) -> list[str]:
    if levels >= 0:
        return [("    " * levels + ln) if ln else ln for ln in lines]
    cut = 4 * -levels
    return [ln[cut:] if ln.startswith(" " * cut) else ln.lstrip() for ln in lines]


def _claimed_for(
    lines: list[str], i: int, collapse: int, loop: int
) -> tuple[list[str], int, int] | None:
    """A worksharing loop nest (``collapse`` perfectly nested loops from 0 to a literal
    extent, by 1 or a literal step; heads at lines[i:]) as claim loops over its flattened
    iterations. Returns (lines,
    index after the nest, chunks), None for any other shape."""
    heads = []
    for j in range(collapse):
        ln = lines[i + j] if i + j < len(lines) else ""
        pad = "    " * (1 + j)
        m = _FOR.match(ln[len(pad) :]) if ln.startswith(pad) else None
        if m is None:
            return None
        step = int(m.group(3) or 1)
        if step < 1:
            return None
        heads.append((m.group(1), -(-int(m.group(2)) // step), step))  # name, count, step
    end = _skip_block(lines, i)
    if end < 0:
        return None
    for j in range(1, collapse):  # the inner loops close just before the outer one
        if lines[end - 1 - j] != "    " * (1 + j) + "}":
            return None
    body = lines[i + collapse : end - collapse]
    total = 1
    for _, count, _ in heads:
        total *= count
    if total == 0:
        return [], end, 0
    size = -(-total // min(total, LOOP_CHUNKS))
    chunks = -(-total // size)
    out = _claim_loop("    ", loop, chunks)
    out.append(
        f"        const int64_t rlx_i0 = ch * {size}, "
        f"rlx_i1 = rlx_i0 + {size} < {total} ? rlx_i0 + {size} : {total};"
    )
    if collapse == 1 and heads[0][2] == 1:
        v = heads[0][0]
        out.append(f"        for (int64_t {v} = rlx_i0; {v} < rlx_i1; ++{v}) {{")
    else:
        out.append("        for (int64_t rlx_it = rlx_i0; rlx_it < rlx_i1; ++rlx_it) {")
        inner, parts = 1, []
        for j in range(collapse - 1, -1, -1):  # innermost first: index = it / inner % count
            name, count, step = heads[j]
            idx = f"rlx_it / {inner}" if inner > 1 else "rlx_it"
            idx = idx if j == 0 else f"{idx} % {count}"
            parts.append(f"{name} = {idx}" if step == 1 else f"{name} = ({idx}) * {step}")
            inner *= count
        out.append("            const int64_t " + ", ".join(reversed(parts)) + ";")
    out += _shift(body, 3 - (1 + collapse))
    out += ["        }", "    }"]
    return out, end, chunks


_DONE = re.compile(r"^ *rlx_team_done(?:_last)?\(rlx_work, &rlx_got, (\d+)\);$")
LAST_DONE = "rlx_team_done_last(rlx_work, &rlx_got, "  # a claimed kernel's last line


def last_done(body: list[str] | None) -> int | None:
    """The chunk count a claimed kernel body (claimed()) waits for at its end, or None."""
    m = _DONE.match(body[-1]) if body else None
    return int(m.group(1)) if m else None


def one_chunk(body: list[str] | None) -> bool:
    """Is ``body`` (claimed()'s form of a kernel) one claimed chunk in all, so one thread runs
    it whole while the others wait? Such a kernel is rendered serial instead (CpuRenderer):
    consecutive serial kernels are claimed as ONE chunk (team_calls), where each would end a
    phase of its own. In the MLP step (784-128-10/128, 2 threads, Emerald Rapids) the nine
    small kernels of the softmax cross-entropy and its gradient (128 x 10 each) ran as nine
    phases, each on whichever thread came first, reading the other's cache; as one chunk the
    step's team region took 169.0 / 168.1 instead of 171.3 / 171.0 us (both builds in one
    process, in turns, SCHED_FIFO, per-call medians)."""
    end = last_done(body)
    return end is not None and end <= 1


def claimed(lines: list[str]) -> list[str] | None:
    """A team-safe kernel body (lines at depth 1) with its work handed out as claimed chunks,
    or None when some part of it has no claimed form (a TEAM_BLOCK, a GEMM block without
    CHUNKS loops, a worksharing loop of another shape): it then keeps its static shares and
    the barrier after it.

    Each loop's chunks are claimed in the affine order (rlx_team_take), on the kernel's one
    claim counter; a barrier inside the body (SYNC) becomes the end of a phase,
    ``rlx_team_done``: a thread waits there until every chunk before it is done, and the body
    ends in one for all its chunks. So when any thread returns from the kernel its work is
    complete, and no thread waits for another that holds no chunk."""
    out = ["    int rlx_got = 0;"]
    start, loops, i, n = 0, 0, 0, len(lines)
    while i < n:
        body = lines[i][4:]
        if body == FOR_PRAGMA or body.startswith(FOR_PRAGMA + " "):
            rest = body[len(FOR_PRAGMA) :].strip()
            m = re.fullmatch(r"collapse\((\d+)\)", rest) if rest else None
            if rest and m is None:
                return None
            got = _claimed_for(lines, i + 1, int(m.group(1)) if m else 1, loops + 1)
            if got is None:
                return None
            block, i, chunks = got
            out += block
            start += chunks
            loops += chunks > 0
        elif body == SINGLE_PRAGMA:
            end = _skip_block(lines, i + 1)
            loops += 1
            out += _claim_loop("    ", loops, 1) + _shift(lines[i + 1 : end], 1) + ["    }"]
            start += 1
            i = end
        elif body == GEMM_BLOCK:
            end = _skip_block(lines, i)
            found = 0
            for ln in lines[i:end]:
                m = _CHUNK_FOR.match(ln)
                if m is None:
                    out.append(ln)
                    continue
                chunks = int(m.group(2))
                if chunks >= TAKE_CHUNKS:
                    return None
                loops += 1
                out += _claim_loop(m.group(1), loops, chunks)
                start += chunks
                found += 1
            if not found:
                return None
            i = end
        elif body == SYNC:
            out.append(f"    rlx_team_done(rlx_work, &rlx_got, {start});")
            i += 1
        elif body == TEAM_BLOCK:
            return None
        else:  # a declaration (team_safe checked)
            out.append(lines[i])
            i += 1
    if loops >= TAKE_LOOPS:
        return None
    out.append(f"    {LAST_DONE}{start});")
    return out
