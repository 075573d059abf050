"""Waiting on non-blocking MPI requests with a deadline, so that no rank ever hangs.

    start = now
    while not Testall(requests):          # progress the operations
        if now - start > timeout: raise CollectiveTimeoutError (RLX-N001)
        back off: spin briefly, then sleep 1/64 of the time waited so far (20 us .. 1 ms)

The sleep is a fixed fraction of the wait so far, so it adds at most ~1.6% (+20 us) to a
collective however long it takes, yet gives the core away to a peer rank that shares it
(oversubscribed ranks); a fixed 50 us .. 1 ms back-off added up to 20% to a 1 MB all-reduce.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from typing import Any

from rlx_core.distributed.errors import CollectiveArgumentError, CollectiveTimeoutError
from rlx_core.distributed.faults import WAITING, check_notices

TIMEOUT_ENV = "RLX_DIST_TIMEOUT"
DEFAULT_TIMEOUT_S = 60.0
_SPINS = 200  # tests without sleeping first: a small collective finishes in microseconds
_SLEEP_FRACTION = 1 / 64  # of the time waited so far: the overshoot this adds, at most
_MIN_SLEEP_S, _MAX_SLEEP_S = 2e-5, 1e-3


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
    if mpi.Request.Testall(pending):  # done already: the common case of small messages
        return
    WAITING.append(what)
    try:
        _wait(mpi, pending, timeout, what, rank)
    finally:
        WAITING.pop()


def _wait(mpi: Any, pending: list[Any], timeout: float, what: str, rank: int) -> None:
    start = time.monotonic()
    spins = 0
    while not mpi.Request.Testall(pending):
        check_notices(mpi)
        waited = time.monotonic() - start
        if waited > timeout:
            raise CollectiveTimeoutError(
                f"rank {rank}: {what} did not complete within {timeout:g} s; a peer rank "
                "died, hung or raised before reaching it",
                hint="look at the other ranks' output for their error; raise the deadline "
                     f"with ${TIMEOUT_ENV} or timeout= if a rank is legitimately slow")
        spins += 1
        if spins > _SPINS:
            time.sleep(min(max(waited * _SLEEP_FRACTION, _MIN_SLEEP_S), _MAX_SLEEP_S))
