"""Waiting on non-blocking MPI requests with a deadline, so that no rank ever hangs.

    start = now
    while not Test(requests):             # progress the operations, as MPI_Wait's loop does
        every 16th turn (and every turn once sleeping):
            a peer's failure notice?      raise PeerFailedError (RLX-N009)
            now - start > timeout?        raise CollectiveTimeoutError (RLX-N001)
        past 50 ms: sleep 1/64 of the time waited so far (at most 1 ms)

For its first 50 ms the loop is MPI's own blocking wait, turn for turn: each ``Test``
progresses the operation and, where Open MPI yields when idle (``mpi_yield_when_idle``:
its choice for oversubscribed ranks, and what ``rlx run`` sets, launch.launch_env), gives
the core to a rank that wants it, in C. rlx adds nothing to a turn but the Python of the
loop: a yield of its own on top of MPI's made a 16-byte all-reduce on 4 ranks of 2 loaded
cores 1.5x slower, and sleeping early (the earlier 20 us .. 1 ms back-off after 200 turns, or
sleeps from 2 ms on) up to 2-3x on 1-4 MB, as a woken rank queues for a core again. Past
50 ms (a peer still computing) the wait sleeps a fixed fraction of its wait so far: at most
~1.6% added, and an idle core instead of a spinning one. Notices and the deadline are
checked every 16th turn, which keeps a turn short (a completed request is seen one ``Test``
after it completes).
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
_SPIN_S = 0.05  # test back to back (as MPI_Wait does) for this long, then sleep
_CHECK_EVERY = 16  # turns between notice and deadline checks while spinning
_SLEEP_FRACTION = 1 / 64  # of the time waited so far: the overshoot this adds, at most
_MAX_SLEEP_S = 1e-3


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
            sleeping = waited >= _SPIN_S
        if sleeping:
            sleep(min(waited * _SLEEP_FRACTION, _MAX_SLEEP_S))
