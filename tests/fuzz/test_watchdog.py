"""The fuzzer's per-case deadline (rlx_core/testing/watchdog.py): a case that hangs a target is a
``timeout`` finding with RLX-Z003 and the cases packed with it still run; a worker that dies is
a typed RLX-Z004, and the next call starts a fresh worker."""

from __future__ import annotations

import numpy as np

from rlx_core.testing.generator import Case, generate
from rlx_core.testing.profile import profile_for
from rlx_core.testing.runner import OK, TIMEOUT
from rlx_core.testing.watchdog import FuzzTimeoutError, FuzzWorkerDiedError, GuardedRunner, Worker
from tests.dispatch.graphs import GraphMaker


def slow_case(n: int = 2000, chain: int = 60) -> Case:
    """60 chained n x n matmuls: about 1 TFLOP in the reference and again in the target, far
    past a 2 s deadline on any machine this suite runs on, in 16 MB of memory."""
    m = GraphMaker()
    x = m.input("x", "f32", (n, n))
    y = x
    for _ in range(chain):
        y = m.op("linear", [y, x])
    return Case(m.graph(y), [np.full((n, n), 1e-3, np.float32)], seed=("slow",))


def test_a_hanging_case_is_a_timeout_and_the_run_goes_on() -> None:
    profile = profile_for("numpy")
    quick = [generate(profile, (31, i)) for i in range(3)]
    with GuardedRunner(case_timeout=2.0) as guard:
        outcomes = guard.batch("numpy", [quick[0], slow_case(), quick[1]])
        after = guard.batch("numpy", [quick[2]])  # a fresh worker after the kill
        restarts = guard.worker.restarts
    slow = outcomes[1]
    assert slow.status == TIMEOUT and "[RLX-Z003]" in slow.detail, slow.detail
    assert slow.case.seed == ("slow",)
    assert [o.status for o in (outcomes[0], outcomes[2], *after)] == [OK] * 3
    assert restarts >= 2  # the pack, then the slow case alone


def test_a_dead_worker_is_typed_and_replaced() -> None:
    worker = Worker()
    profile = profile_for("numpy")
    case = generate(profile, (32, 0))
    worker.call("numpy", [case], 60)  # started, answered
    worker._proc.kill()  # what a SIGSEGV in a driver does to it
    worker._proc.join()
    try:
        worker.call("numpy", [case], 60)
    except FuzzWorkerDiedError as err:
        assert err.code == "RLX-Z004" and "SIGKILL" in str(err)
    else:
        raise AssertionError("a dead worker answered")
    _, results = worker.call("numpy", [case], 60)  # a new worker
    worker.stop()
    assert results[0][0] == OK


def test_a_hang_that_burns_no_cpu_is_caught_by_wall_time() -> None:
    """The deadline is CPU time (a starved pack is not a hang), so a deadlock that burns none
    (here: the worker stopped with SIGSTOP) falls to the wall-clock limit, WALL_FACTOR times
    the deadline."""
    import os
    import signal

    worker = Worker()
    case = generate(profile_for("numpy"), (33, 0))
    worker.call("numpy", [case], 60)
    os.kill(worker._proc.pid, signal.SIGSTOP)
    try:
        worker.call("numpy", [case], 0.3)
    except FuzzTimeoutError as err:
        assert err.code == "RLX-Z003" and "wall time" in str(err)
    else:
        raise AssertionError("a stopped worker answered")
    finally:
        worker.stop()
