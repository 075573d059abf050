"""Shared helpers of the side-by-side benchmarks: thread pinning, interleaved timing, reports.

Every benchmark runs its peers in one process on the same inputs. Peers are timed in rounds
(``interleaved``): each round runs every peer once, in an order that rotates, so a burst of
load from other processes on a shared machine hits all peers alike instead of whichever one
happened to be running. A figure is the median (p50) of a peer's per-call times after
warm-up; p10/p90 are reported next to it so a noisy run shows as one.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import platform
import re
import shlex
import statistics
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported where used: limit_threads must run before numpy is imported
    from rlx_core.targets.cpu.placement import Placement

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"


def limit_threads(n: int) -> dict[str, str]:
    """Give every peer the same ``n`` threads: env (before pools start), torch, BLAS, rlx.

    Must run before numpy, torch or onnxruntime start their thread pools for the env vars to
    count; the explicit calls below cover pools that already exist.
    """
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                "RLX_NUM_THREADS"):
        os.environ[var] = str(n)
    # one wait policy for every pool: idle workers spin about 0.3 ms, then sleep. That is what
    # a loop of back-to-back calls sees (its pool still awake at the next call), and it ends
    # long before another peer's timed calls (turns start settled, see interleaved).
    # - libgomp (rlx's and torch's OpenMP): PASSIVE, but 10,000 spins first (GOMP_SPINCOUNT
    #   overrides PASSIVE's zero; 10,000 pause instructions took 0.28-0.34 ms here). rlx sets
    #   the same by itself when nobody set OMP_WAIT_POLICY (runtime.openmp_defaults); with
    #   PASSIVE alone every call of a program woke its workers from sleep: the MLP step took
    #   0.34 instead of 0.30 ms.
    # - OpenBLAS (numpy's, and the one rlx can call) is not OpenMP: its idle workers spin for
    #   2^N cycles of the 2.6 GHz TSC, N = OPENBLAS_THREAD_TIMEOUT (default 28, ~0.1 s):
    #   2^20 is ~0.4 ms. At 4 (sleep at once) numpy's MLP step took 0.56 instead of 0.47 ms.
    # - onnxruntime spins or not (session option), with no duration to set: bench_minilm
    #   times it both ways and keeps the faster.
    os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
    os.environ.setdefault("GOMP_SPINCOUNT", "10000")
    os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "20")
    done = {"threads": str(n)}
    try:
        from threadpoolctl import threadpool_limits

        threadpool_limits(n)  # numpy's own OpenBLAS (and any other BLAS already loaded)
        done["threadpoolctl"] = "yes"
    except ImportError:
        done["threadpoolctl"] = "not installed (numpy BLAS follows OPENBLAS_NUM_THREADS)"
    from rlx_core.targets.cpu.threads import set_num_threads

    set_num_threads(n)
    start_placement()  # where the CPUs sit as the run starts (machine() records it)
    return done


def torch_threads(torch: Any, n: int) -> None:
    torch.set_num_threads(n)
    try:
        torch.set_num_interop_threads(1)  # intra-op parallelism only, as every other peer
    except RuntimeError:
        pass  # already set (the interop pool starts on first use)


@dataclass(frozen=True)
class Run:
    """A side-by-side run's set-up (``start_run``): the threads every peer got, PyTorch held
    to them (None without a PyTorch peer), and the machine stamp (CPU, ISA, load at the
    start; ``finish_run`` adds the end)."""

    limits: dict[str, str]
    torch: Any
    machine: dict[str, Any]


def start_run(threads: int | None, with_torch: bool = True) -> Run:
    """``limit_threads(threads)`` before any pool starts, then PyTorch on the same threads, and
    ``machine()`` with the ISA: the set-up every torch-peer benchmark opens with. Prints the
    CPUs' placement as the run starts (placement_line), as the benchmarks that limit their
    threads themselves do.

    ``with_torch=False`` for a benchmark without a PyTorch peer (``Run.torch`` is None; torch
    is not imported); ``threads=None`` leaves every pool at its default, for one whose figures
    are not peers timed side by side (bench_fpga: cycles, synthesis reports)."""
    limits = limit_threads(threads) if threads is not None else {"threads": "default"}
    torch = None
    if with_torch:
        import torch

        if threads is not None:
            torch_threads(torch, threads)
    run = Run(limits, torch, {**machine(), "isa": isa()})
    say(placement_line())
    return run


def save_run(base: str, clock: str, data: dict[str, Any], markdown: str,
             threads: int = 1) -> tuple[Path, Path]:
    """``results/<base>-<cpu slug>[-<n>thread][-threadcpu].{json,md}``: a run on ``threads``
    > 1 and a ``--clock thread`` run are each kept beside the one-thread wall-clock one."""
    stem = machine_stem(base, threads if threads > 1 else None) + \
        ("-threadcpu" if clock == "thread" else "")
    return write_results(stem, data, markdown)


def finish_run(run: Run) -> dict[str, Any]:
    """The machine stamp with the load average and the placement at the end set (for
    ``stamp``: end_of_run)."""
    return end_of_run(run.machine)


def end_of_run(info: dict[str, Any]) -> dict[str, Any]:
    """``info`` (a ``machine()`` stamp) with the end of the run recorded: the load average
    (``load_average_end``) and the CPUs' placement measured again (``placement_end``), so a
    host that moved the vCPUs mid-run shows as two placements. Returns ``info``."""
    from rlx_core.targets.cpu.placement import measure_placement

    info["load_average_end"] = load_now()
    info["placement_end"] = measure_placement().to_json()
    return info


@functools.cache
def start_placement() -> Placement:
    """Where this process's first two CPUs sat at the start of the run: measured once, at
    the first call (limit_threads makes it, before the peers' pools start), and recorded by
    every ``machine()`` stamp as ``placement``. The 2-vCPU Zen 4 VM switched between one L3
    and two minutes apart, moving bandwidth and small-batch times with it
    (rlx_core/targets/cpu/placement.py); a figure is comparable only with its placement."""
    from rlx_core.targets.cpu.placement import measure_placement

    return measure_placement()


def placement_line() -> str:
    """What a benchmark prints as it starts: ``placement at the start: shared L3 (58 ns round
    trip CPU 0-1)`` (start_placement)."""
    return f"placement at the start: {start_placement().describe()}"


def placement_text(info: dict[str, Any]) -> str:
    """The placement a stamp recorded, for a results file's header line: ``CPUs on a shared
    L3 (58 ns round trip CPU 0-1)``, with the end's where it was measured (``at the start,
    ... at the end``); empty for a stamp without one (a file written before it was kept)."""
    start, end = info.get("placement"), info.get("placement_end")
    if not isinstance(start, dict):
        return ""
    text = f"CPUs on a {describe_placement(start)}"
    if isinstance(end, dict):
        text += f" at the start, {describe_placement(end)} at the end"
    return text


def describe_placement(p: dict[str, Any]) -> str:
    """A recorded placement (``Placement.to_json``) in words (``Placement.describe``)."""
    from rlx_core.targets.cpu.placement import Placement

    return Placement.from_json(p).describe()


@dataclass(frozen=True)
class Stats:
    """Per-call seconds of one peer: median and spread over ``runs`` timed calls."""

    p50: float
    p10: float
    p90: float
    runs: int

    @staticmethod
    def of(times: Sequence[float]) -> Stats:
        xs = sorted(times)
        # inclusive: p10/p90 stay within the observed calls (the default, exclusive method
        # extrapolates past them for few runs: a negative p10 from 3 calls)
        q = statistics.quantiles(xs, n=10, method="inclusive") if len(xs) >= 2 else [xs[0]] * 9
        return Stats(statistics.median(xs), q[0], q[-1], len(xs))


# seconds of untimed calls before each turn (interleaved's settle_s), the benchmarks' default
SETTLE_S = 0.3


def add_turn_args(ap: argparse.ArgumentParser, block: int) -> None:
    """``--block`` (consecutive calls per peer per turn, default ``block``) and ``--settle``
    (untimed seconds before each turn, default SETTLE_S): interleaved's turns, as the
    benchmarks that time peers in turns take them."""
    ap.add_argument("--block", type=int, default=block,
                    help="consecutive calls per peer per turn (see common.interleaved)")
    ap.add_argument("--settle", type=float, default=SETTLE_S,
                    help="seconds of untimed calls before each turn, so no peer's idle "
                         "thread pool spins into the next peer's timed calls (default "
                         f"{SETTLE_S:g})")


def interleaved(peers: dict[str, Callable[[], Any]], runs: int, warmup: int,
                budget_s: float | None = None, block: int = 1,
                settle_s: float = 0.0,
                thread_cpu: dict[str, Stats] | None = None, gap_s: float = 0.0,
                vary_order: bool = False,
                on_turn: Callable[[str, str, list[float] | None], None] | None = None,
                setup: Callable[[str], None] | None = None,
                pre: Callable[[], Any] | None = None,
                ) -> dict[str, Stats]:
    """Time each zero-argument callable ``runs`` times, ``block`` calls per peer per turn.

    ``warmup`` calls of each peer come first (compilation, caches, allocator). Turns rotate
    through the peers so load that drifts over the run reaches all of them, and a peer's
    calls within a turn run back to back, as in a real loop (caches and its own thread pool
    stay warm). Each turn starts with ``settle_s`` seconds of untimed calls of the peer
    about to be timed (benchmarks pass SETTLE_S), so the previous peer's pool has stopped
    spinning by the first timed call and every peer is timed in its own steady state, as in
    a loop that runs alone: onnxruntime with spinning on kept spinning into the next turn
    (MiniLM batch 1: rlx 20.5 ms unsettled, 14.7 ms settled). A pause instead of the calls
    left this VM's idle vCPUs slow to ramp up again: every peer ran slower. With
    ``budget_s`` a turn stops being started once the budget is spent and at least
    ``min(runs, 20)`` calls ran, so a slow machine still finishes.

    Given a ``thread_cpu`` dict, each timed call's CPU time of the calling thread is recorded
    too and its Stats put there: for peers that compute on the calling thread alone (one
    thread), a figure that time slices taken by other processes do not inflate, so a loaded
    machine still compares the kernels (cache pollution by those processes remains).

    ``gap_s``: a pause before each turn's settle calls, so the previous peer's idle threads
    stop spinning before this peer starts (onnxruntime's spinning pool burns ~50 ms of CPU
    after its last run: settle calls alone shared a core with it for their first ~50 ms, and
    a peer's own load balancing, such as rlx's team judge, reacted to it); the settle calls
    then wake the idle vCPUs again. ``vary_order``: odd turns run the rotation backwards, so
    a peer does not always follow the same one (a rotation keeps the cyclic order: with
    bench_minilm's peers rlx always came right after numpy). ``on_turn(name, previous peer,
    None)`` is called right before a turn's timed calls and ``on_turn(name, previous peer,
    their seconds)`` right after (a peer's own counters over its timed calls). ``setup(name)``
    runs before a turn's settle calls (bench_contention: the rlx peer's thread count), and
    ``pre()``, untimed, before every timed call (bench_contention: another library's pool
    runs right before each call).
    """
    names = list(peers)
    for name in names:
        for _ in range(warmup):
            peers[name]()
    times: dict[str, list[float]] = {n: [] for n in names}
    cpu_times: dict[str, list[float]] = {n: [] for n in names}
    clock, tclock = time.perf_counter, time.thread_time
    start = clock()
    block = max(1, block)
    turns = -(-runs // block)
    previous = ""
    for r in range(turns):
        ring = names[::-1] if vary_order and r % 2 else names
        order = ring[r % len(ring):] + ring[:r % len(ring)]
        for name in order:
            fn = peers[name]
            if gap_s > 0:
                time.sleep(gap_s)  # the previous peer's spinning threads go to sleep
            if setup is not None:
                setup(name)
            t_in = clock()
            while clock() - t_in < settle_s:  # untimed calls until the cores are this peer's
                fn()
            if on_turn is not None:
                on_turn(name, previous, None)
            turn: list[float] = []
            for _ in range(min(block, runs - r * block)):
                if pre is not None:
                    pre()
                c0, t0 = tclock(), clock()
                fn()
                turn.append(clock() - t0)
                cpu_times[name].append(tclock() - c0)
            times[name] += turn
            if on_turn is not None:
                on_turn(name, previous, turn)
            previous = name
        done = (r + 1) * block
        if budget_s is not None and done >= min(runs, 20) and clock() - start > budget_s:
            break
    if thread_cpu is not None:
        thread_cpu.update({n: Stats.of(ts) for n, ts in cpu_times.items()})
    return {n: Stats.of(ts) for n, ts in times.items()}


def in_fixed_batches(fn: Callable[[Any], Any], x: Any, batch: int) -> Any:
    """``fn`` (compiled for exactly ``batch`` rows) applied to all of ``x``, ``batch`` rows a
    call: a last, shorter chunk is padded with zero rows and the padding dropped. Right only
    where each row's result depends on that row alone (e.g. a statically quantized model).
    Returns one array, or a tuple of arrays when ``fn`` returns several outputs."""
    import numpy as np

    parts: list[Any] = []
    for s in range(0, len(x), batch):
        chunk = x[s:s + batch]
        pad = np.zeros((batch - len(chunk), *chunk.shape[1:]), chunk.dtype)
        out = fn(np.concatenate([chunk, pad]))
        outs = out if isinstance(out, (tuple, list)) else (out,)
        parts.append([np.asarray(o)[:len(chunk)] for o in outs])
    joined = tuple(np.concatenate(col) for col in zip(*parts, strict=True))
    return joined if len(joined) > 1 else joined[0]


def machine() -> dict[str, Any]:
    """What the numbers were measured on (the load average says how shared the machine was)."""
    from rlx_core.targets.cpu.identity import cpu_model

    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 0
    load = os.getloadavg() if hasattr(os, "getloadavg") else (0.0, 0.0, 0.0)
    return {"cpu": cpu_model(), "cores": cores, "machine": platform.machine(),
            "python": platform.python_version(), "load_average_1m": round(load[0], 2),
            "when": time.strftime("%Y-%m-%d %H:%M:%S"), **rlx_path(),
            "placement": start_placement().to_json()}


def rlx_path() -> dict[str, Any]:
    """The cpu target's ISA path for this run (``rlx_path``) and whether ``RLX_CPU_ISA`` forced
    it below the CPU's own (``rlx_path_forced``): a forced AVX2 run on an AVX-512 machine is a
    proxy for another machine, not this machine's figure (cpu_goals leaves such files out)."""
    from rlx_core.targets.cpu.isa import detect

    path = detect()
    return {"rlx_path": path.family, "rlx_path_forced": path.forced}


def forced_path_tag() -> str:
    """``-isa-<family>`` for a run on a path RLX_CPU_ISA forced below the CPU's own, so its
    results sit beside the default run's instead of overwriting them; else empty."""
    path = rlx_path()
    return f"-isa-{path['rlx_path']}" if path["rlx_path_forced"] else ""


def isa() -> str:
    """The vector ISA flags the CPU reports (what the generated C and the peers' kernels use):
    rlx_core.targets.cpu.isa.vector_isa, AVX-512 subsets, VNNI / BF16 / FP16 and AMX included."""
    from rlx_core.targets.cpu.isa import vector_isa

    return vector_isa()


def cpu_slug(cpu: str) -> str:
    """The CPU model as a file-name part (``AMD EPYC 7B13`` -> ``amd-epyc-7b13``, ``AMD EPYC
    (Zen 1)`` -> ``amd-epyc-zen-1``: see rlx_core/targets/cpu/identity.py), so results
    measured on different machines sit side by side instead of overwriting each other.
    Trademark marks and the words "Processor" / "CPU" carry nothing and are dropped
    (``Intel(R) Xeon(R) Processor (Emerald Rapids)`` -> ``intel-xeon-emerald-rapids``)."""
    name = re.sub(r"\((r|tm)\)|\b(processor|cpu)\b", " ", cpu.lower())
    return re.sub(r"[^a-z0-9]+", "-", name).strip("-") or "cpu"


def command_text(script: str, argv: Sequence[str] | None) -> str:
    """The command that ran ``script`` (``benchmarks/x.py``) with ``argv`` (a main's argument;
    None: this process's ``sys.argv[1:]``), for a results file: every argument as given, not
    a list of the flags its writer thought to add (cpu_goals.py shows it beside each goal)."""
    args = list(sys.argv[1:] if argv is None else argv)
    return " ".join(["python", script, *(shlex.quote(a) for a in args)])


def stamp(info: dict[str, Any], placement: bool = True) -> str:
    """One line for a results file: CPU model and ISA, cores, the load average at the start
    (and at the end, once ``info['load_average_end']`` is set), the CPUs' placement (and at
    the end, once ``end_of_run`` set it: placement_text), when. ``placement=False`` leaves the
    placement out: a line printed as the run starts, after start_run's placement_line."""
    end = info.get("load_average_end")
    load = f"load average {info['load_average_1m']} at the start" + \
        (f", {end} at the end" if end is not None else "")
    where = placement_text(info) if placement else ""
    return (f"{info['cpu']} (ISA: {info.get('isa') or isa()}), {info['cores']} cores, {load}, "
            f"{where + ', ' if where else ''}{info['when']}{policy()}")


def policy() -> str:
    """How this process was scheduled, when not the default (a run under ``chrt -f 1`` on a
    shared machine: real-time, so the other jobs' load could not preempt it)."""
    try:
        policy = os.sched_getscheduler(0)
    except (AttributeError, OSError):
        return ""
    names = {getattr(os, n): n for n in ("SCHED_FIFO", "SCHED_RR", "SCHED_BATCH", "SCHED_IDLE")
             if hasattr(os, n)}
    if policy not in names:
        return ""
    rt = " (real-time: the machine's other jobs could not preempt it)" if \
        names[policy] in ("SCHED_FIFO", "SCHED_RR") else ""
    return f", run under {names[policy]}{rt}"


@contextlib.contextmanager
def fifo_held(lock_path: str, pids: Sequence[int] = (0,)) -> Iterator[bool]:
    """Run the block with ``pids`` (0: the calling thread) under SCHED_FIFO priority 1 while
    holding the flock on ``lock_path``, the one lock that keeps a shared machine to one
    real-time run at a time; back to SCHED_OTHER after. An empty ``lock_path`` does nothing
    (yields False). Time only short runs so: a FIFO task starves the other jobs on its core,
    and the compilers a FIFO process starts inherit it, so compile before."""
    if not lock_path:
        yield False
        return
    import fcntl

    with open(lock_path, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        for pid in pids:
            os.sched_setscheduler(pid, os.SCHED_FIFO, os.sched_param(1))
        try:
            yield True
        finally:
            for pid in pids:
                os.sched_setscheduler(pid, os.SCHED_OTHER, os.sched_param(0))


def load_now() -> float:
    return round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else 0.0


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    out = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    out += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(out) + "\n"


def result_stem(base: str, threads: int | None, settle_s: float) -> str:
    """File stem of a run's results: ``base``, ``-<n>thread`` for an explicit ``--threads``
    run and ``-settle<S>s`` for a ``--settle`` other than SETTLE_S, each kept beside the
    default run."""
    stem = base if threads is None else f"{base}-{threads}thread"
    return stem + ("" if settle_s == SETTLE_S else f"-settle{settle_s:g}s")


def machine_stem(base: str, threads: int | None = None, settle_s: float = -1.0) -> str:
    """``result_stem`` with this machine's CPU slug after ``base`` (``minilm-amd-epyc-zen-1``),
    so each machine's results sit beside the others' instead of overwriting them (the files
    without a slug, ``minilm.md`` ..., came from the 2-core Zen 4 VM; benchmarks/README.md),
    and ``-isa-<family>`` after it for a path RLX_CPU_ISA forced (forced_path_tag)."""
    from rlx_core.targets.cpu.identity import cpu_model

    return result_stem(f"{base}-{cpu_slug(cpu_model())}{forced_path_tag()}", threads,
                       SETTLE_S if settle_s < 0 else settle_s)


def turns_text(block: int, settle_s: float, gap_s: float = 0.0) -> str:
    """How the calls were timed, for a results table's caption."""
    text = f"turns of {block} per peer, interleaved"
    if gap_s > 0:
        text += f", each turn after a {gap_s:g} s pause"
    if settle_s > 0:
        text += (" and" if gap_s > 0 else ", each turn after") + \
            f" {settle_s:g} s of untimed calls"
    return text


def write_results(stem: str, data: dict[str, Any], markdown: str) -> tuple[Path, Path]:
    """``results/<stem>.json`` and ``results/<stem>.md``."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    js, md = RESULTS / f"{stem}.json", RESULTS / f"{stem}.md"
    js.write_text(json.dumps(data, indent=2, default=_plain) + "\n")
    md.write_text(markdown)
    return js, md


def _plain(obj: Any) -> Any:
    if isinstance(obj, Stats):
        return asdict(obj)
    if hasattr(obj, "tolist"):
        return obj.tolist()
    return str(obj)


def fmt_ms(seconds: float) -> str:
    return f"{seconds * 1e3:.2f}"


def say(text: str) -> None:
    print(text, flush=True)
    sys.stdout.flush()
