"""Waiting on non-blocking MPI requests with a deadline, so that no rank ever hangs.

    start = now
    while not Test(requests):             # progress the operations
        every 16th turn (and every turn once sleeping):
            a peer's failure notice?      raise PeerFailedError (RLX-N009)
            now - start > timeout?        raise CollectiveTimeoutError (RLX-N001)
        the first 50 ms: sched_yield()    # MPI's own blocking wait, with a yield per turn
        then: sleep 1/64 of the time waited so far (at most 1 ms)

Yielding costs one system call and returns at once when no other process wants the core, so
on dedicated cores this is MPI's busy wait; on shared cores (ranks oversubscribed, a loaded
machine) it lets the peer rank this one waits for run, as Open MPI's blocking wait does with
``mpi_yield_when_idle`` (launch.launch_env sets it). A sleep, by contrast, gives the core up
until a timer fires, and on a loaded machine the woken rank then queues for a core again: a
1 MB all-reduce on 2 ranks of the loaded 2-core machine took ~2x as long as MPI's blocking
wait when rlx slept after 2 ms, and ~15 ms with the earlier 20 us .. 1 ms sleeps. A wait past
50 ms (a peer still computing) sleeps a fixed fraction of its wait so far: at most ~1.6%
added, and an idle core instead of a spinning one. The notice and deadline checks every 16th
turn keep a turn short (a completed request is seen within one Test and one yield).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from typing import Any

from rlx_core.distributed.errors import CollectiveArgumentError, CollectiveTimeoutError
from rlx_core.distributed.faults import WAITING, check_notices

TIMEOUT_ENV = "RLX_DIST_TIMEOUT"
DEFAULT_TIMEOUT_S = 60.0
_YIELD_S = 0.05  # yield (not sleep) between tests for this long
_CHECK_EVERY = 16  # turns between notice and deadline checks while yielding
_SLEEP_FRACTION = 1 / 64  # of the time waited so far: the overshoot this adds, at most
_MAX_SLEEP_S = 1e-3
# os.sched_yield is POSIX; elsewhere a zero sleep is the nearest thing
yield_core = getattr(os, "sched_yield", lambda: time.sleep(0))


def default_timeout() -> float:
    """The deadline in seconds: ``$RLX_DIST_TIMEOUT`` if set, else 60."""
    raw = os.environ.get(TIMEOUT_ENV)
    if raw is None:
        return DEFAULT_TIMEOUT_S
    return check_timeout(raw, source=f"${TIMEOUT_ENV}")


def check_timeout(value: Any, source: str = "timeout") -> float:
    """A positive finite number of seconds, or a typed error."""
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        seconds = float("nan")
    if not (0.0 < seconds < float("inf")):
        raise CollectiveArgumentError(f"{source}={value!r} is not a positive number of seconds",
                                      hint="use e.g. 60 (the default) or 5 in tests")
    return seconds


def wait_all(mpi: Any, requests: Sequence[Any], timeout: float, what: str, rank: int) -> None:
    """Complete ``requests`` or raise RLX-N001 once ``timeout`` seconds have passed, or
    RLX-N009 as soon as another rank reports that it failed (distributed/faults.py)."""
    pending = list(requests)
    test = (pending[0].Test if len(pending) == 1
            else lambda: mpi.Request.Testall(pending))
    if test():  # done already: the common case of small messages
        return
    WAITING.append(what)
    try:
        _wait(mpi, test, timeout, what, rank)
    finally:
        WAITING.pop()


def wait_one(mpi: Any, request: Any, timeout: float, what: str, rank: int) -> None:
    """``wait_all`` of one request (the collectives' hot path: no list, no Testall)."""
    if request.Test():
        return
    WAITING.append(what)
    try:
        _wait(mpi, request.Test, timeout, what, rank)
    finally:
        WAITING.pop()


def _wait(mpi: Any, test: Callable[[], bool], timeout: float, what: str, rank: int) -> None:
    clock, sleep = time.monotonic, time.sleep
    start = clock()
    turns, waited, sleeping = 0, 0.0, False
    while not test():
        turns += 1
        if sleeping or turns % _CHECK_EVERY == 0:
            check_notices(mpi)
            waited = clock() - start
            if waited > timeout:
                raise CollectiveTimeoutError(
                    f"rank {rank}: {what} did not complete within {timeout:g} s; a peer rank "
                    "died, hung or raised before reaching it",
                    hint="look at the other ranks' output for their error; raise the deadline "
                         f"with ${TIMEOUT_ENV} or timeout= if a rank is legitimately slow")
            sleeping = waited >= _YIELD_S
        if sleeping:
            sleep(min(waited * _SLEEP_FRACTION, _MAX_SLEEP_S))
        else:
            yield_core()
