"""Run fuzz cases in a worker process with a deadline, so a graph that hangs a target (a
compiler that never returns, a kernel that loops) or kills it (SIGSEGV, SIGABRT in a driver)
is a finding of the run instead of the end of it.

One worker per run serves every target (devices and compiled kernels stay warm between packs).
A pack of ``n`` cases gets ``case_timeout * (1 + n / 10)`` seconds; past it the worker is
killed, a fresh one starts, and the pack is split in halves until the case that hangs alone is
found: its outcome is ``timeout`` (RLX-Z003). The deadline starts once the worker has
imported rlx (a start on a loaded machine is not a hang).

The deadline is CPU time where Linux reports it (``/proc``: the worker, its finished children
and its live ones, such as a compiler it waits for): on a machine shared with other jobs, or
under ``nice -n 19``, a pack can wait minutes for a core without hanging. A case that burns no
CPU at all (a deadlock on a fence) is caught by wall time, ``WALL_FACTOR`` times the deadline. A worker that dies is bisected the same way; the
case that kills it alone is a ``crash`` (RLX-Z004, with the signal).

A runner may give its worker environment variables of its own (``env``: a value of None unsets
one): a driver's setting such as ``--driver-fast-compile``'s reaches only the worker that runs
under it, so a second runner in the same process can run a case with the driver's defaults.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from rlx_core.errors import RlxError
from rlx_core.testing.generator import Case
from rlx_core.testing.runner import CRASH, TIMEOUT, Outcome, run_batch


class FuzzTimeoutError(RlxError):
    """A fuzz case ran past its deadline on a target (a hang of the compiler or the kernel)."""

    code = "RLX-Z003"


class FuzzWorkerDiedError(RlxError):
    """The worker process running fuzz cases died (a signal from a driver or the compiled
    code, or killed from outside) instead of answering."""

    code = "RLX-Z004"


STARTUP_S = 300.0  # a worker's imports on a loaded machine
WALL_FACTOR = 10.0  # wall-clock deadline (a hang that burns no CPU), in CPU deadlines
_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def cpu_seconds(pid: int) -> float | None:
    """CPU seconds of ``pid``, its waited-for children and its live children (None without
    /proc: the deadline is wall time then)."""
    total = _ticks(pid)
    if total is None:
        return None
    try:
        children = [c for task in Path(f"/proc/{pid}/task").iterdir()
                    for c in (task / "children").read_text().split()]
    except OSError:  # a kernel without CONFIG_PROC_CHILDREN: finished children only
        children = []
    return (total + sum(_ticks(int(c)) or 0 for c in children)) / _TICK


def _ticks(pid: int) -> int | None:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return sum(int(x) for x in fields[11:15])  # utime stime cutime cstime
    except (OSError, IndexError, ValueError):
        return None

# (status, detail, output, known, extra) per case, in the order sent
Result = tuple[str, str, int, str, dict[str, Any]]


def _serve(conn: Any) -> None:
    """The worker's loop: (target, cases) in, (compiles, results) out, until None."""
    warnings.simplefilter("ignore", RuntimeWarning)  # inf/NaN inputs: expected, not news
    conn.send("ready")  # imports done: deadlines start counting from here
    while True:
        msg = conn.recv()
        if msg is None:
            return
        target, cases = msg
        compiles = 0

        def count() -> None:
            nonlocal compiles
            compiles += 1

        where = {id(c): i for i, c in enumerate(cases)}
        results: list[Result | None] = [None] * len(cases)
        for o in run_batch(target, cases, count):
            results[where[id(o.case)]] = (o.status, o.detail, o.output, o.known, o.extra)
        conn.send((compiles, results))


def pack_deadline(case_timeout: float, n: int) -> float:
    """Seconds a pack of ``n`` cases may take (one compile of all of them, then one run)."""
    return case_timeout * (1 + n / 10)


@contextmanager
def environment(env: dict[str, str | None]) -> Iterator[None]:
    """``os.environ`` with ``env`` applied (None unsets a variable), restored afterwards: what a
    worker started inside it inherits."""
    before = {k: os.environ.get(k) for k in env}
    try:
        _apply(env)
        yield
    finally:
        _apply(before)


def _apply(env: dict[str, str | None]) -> None:
    """Set each variable of ``env`` in ``os.environ``, unsetting those that are None."""
    for k, v in env.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


class Worker:
    """One worker process; ``call`` raises FuzzTimeoutError / FuzzWorkerDiedError (and the
    worker is gone: the next call starts a new one). ``env``: variables of its own (None
    unsets one), given to every worker it starts."""

    def __init__(self, env: dict[str, str | None] | None = None) -> None:
        self._proc: Any = None
        self._conn: Any = None
        self.restarts = 0
        self.env = dict(env or {})

    def _start(self) -> None:
        ctx = mp.get_context("spawn")  # never fork a process that holds GPU devices
        parent, child = ctx.Pipe()
        self._proc = ctx.Process(target=_serve, args=(child,), daemon=True,
                                 name="rlx-fuzz-worker")
        with environment(self.env):  # a spawned process inherits the environment at its start
            self._proc.start()
        child.close()
        self._conn = parent
        try:
            ok = parent.poll(STARTUP_S) and parent.recv() == "ready"
        except (EOFError, OSError):
            ok = False
        if not ok:
            code = self._proc.exitcode
            self.stop(kill=True)
            raise FuzzWorkerDiedError(f"the fuzz worker did not start (exit status {code})",
                                      hint="run `python -c 'import rlx_core.testing.runner'` "
                                           "to see why the import fails")

    def call(self, target: str, cases: list[Case], deadline: float) -> tuple[int, list[Result]]:
        if self._proc is None:
            self._start()
        try:
            self._conn.send((target, cases))
            ready = self._wait(deadline)
            if ready:
                return self._conn.recv()
        except (EOFError, OSError, BrokenPipeError):
            ready = True  # the worker is gone: say how below
        proc = self._proc
        self.stop(kill=True)
        if not ready:
            raise FuzzTimeoutError(
                f"{len(cases)} case(s) on {target} ran past their deadline of {deadline:.0f} s "
                f"of CPU time (or {WALL_FACTOR * deadline:.0f} s of wall time)",
                hint="a hang of the target's compiler or kernel: the case is saved; raise "
                     "--case-timeout if the machine is only slow")
        code = proc.exitcode
        how = (f"signal {signal.Signals(-code).name}" if code is not None and code < 0
               and -code in signal.valid_signals() else f"exit status {code}")
        raise FuzzWorkerDiedError(
            f"the fuzz worker died running {len(cases)} case(s) on {target} ({how})",
            hint="a crash of the target's runtime, driver or compiled code: the case is saved; "
                 "run it alone with rlx_core.testing.runner.run_one to see the fault")

    def _wait(self, deadline: float) -> bool:
        """True once the worker answers (or dies); False past ``deadline`` CPU seconds (or
        WALL_FACTOR times that in wall time)."""
        pid = self._proc.pid
        cpu0, t0 = cpu_seconds(pid), time.monotonic()
        while True:
            wall = time.monotonic() - t0
            if cpu0 is None:  # no /proc: wall time only
                return bool(self._conn.poll(max(0.0, deadline - wall)))
            if self._conn.poll(1.0):
                return True
            cpu = cpu_seconds(pid)
            if cpu is None:  # it died: the recv reports it
                return True
            if cpu - cpu0 >= deadline or wall >= WALL_FACTOR * deadline:
                return False

    def stop(self, kill: bool = False) -> None:
        if self._proc is None:
            return
        if kill:
            self._proc.kill()
            self.restarts += 1
        else:
            try:
                self._conn.send(None)
            except (OSError, BrokenPipeError):
                self._proc.kill()
        self._proc.join(10)
        if self._proc.is_alive():
            self._proc.kill()
            self._proc.join()
        self._conn.close()
        self._proc = self._conn = None


class GuardedRunner:
    """``run_batch`` and ``run_one`` of the runner, in a worker, under deadlines; ``env``: the
    worker's own environment variables (None unsets one)."""

    def __init__(self, case_timeout: float = 60.0,
                 env: dict[str, str | None] | None = None) -> None:
        self.case_timeout = case_timeout
        self.worker = Worker(env)
        self.compiles = 0

    def batch(self, target: str, cases: list[Case]) -> list[Outcome]:
        if not cases:
            return []
        try:
            compiles, results = self.worker.call(
                target, cases, pack_deadline(self.case_timeout, len(cases)))
        except (FuzzTimeoutError, FuzzWorkerDiedError) as err:
            if len(cases) == 1:
                status = TIMEOUT if isinstance(err, FuzzTimeoutError) else CRASH
                return [Outcome(cases[0], status, str(err).splitlines()[0])]
            half = len(cases) // 2
            return self.batch(target, cases[:half]) + self.batch(target, cases[half:])
        self.compiles += compiles
        return [Outcome(c, *r) for c, r in zip(cases, results, strict=True)]

    def one(self, target: str, case: Case) -> Outcome:
        return self.batch(target, [case])[0]

    def close(self) -> None:
        self.worker.stop()

    def __enter__(self) -> GuardedRunner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
