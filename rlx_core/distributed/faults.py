"""Fault notices between ranks, so that every rank of a failing job ends with a typed error.

    rank k raises          notify_failure(): a short message to every other rank (world
                           communicator, tag NOTICE_TAG), a grace period, then MPI_Abort
    a rank that waits      wait_all polls the notice channel next to its requests: a notice
                           is PeerFailedError (RLX-N009) naming rank k and its error
    rank k dies (SIGKILL)  the launcher (mpiexec, srun) stops the other ranks with SIGTERM;
                           install_stop_handler() prints RankStoppedError (RLX-N010), saying
                           what the rank was waiting in, before the rank exits
    rank k hangs           the others' deadline: CollectiveTimeoutError (RLX-N001)

MPI itself has no failure notification (without ULFM), so these are the pieces rlx adds: a
point-to-point message on a reserved tag (no other rlx message uses it) and a signal handler
installed only by the ``python -m rlx_core.distributed`` entry point.
"""

from __future__ import annotations

import atexit
import os
import signal
import sys
import time
from typing import Any

from rlx_core.distributed.errors import PeerFailedError, RankStoppedError

NOTICE_TAG = 32000  # below MPI_TAG_UB's guaranteed 32767; pipeline tags stay below 3 << 12
_NOTICE_BYTES = 2048
GRACE_S = 2.0  # how long a failing rank lets the others report before it aborts the job


class _Channel:
    """The posted receive for failure notices from any rank of the world."""

    def __init__(self, mpi: Any):
        import numpy as np

        self.mpi = mpi
        self.world = mpi.COMM_WORLD
        self.buf = np.zeros(_NOTICE_BYTES, dtype=np.uint8)
        self.status = mpi.Status()
        self.request = self.world.Irecv(self.buf, source=mpi.ANY_SOURCE, tag=NOTICE_TAG)
        # a receive still posted at MPI_Finalize is an error in some MPI libraries: cancel it
        # first (atexit runs this before mpi4py's own finalize, registered earlier)
        atexit.register(self.close)

    def close(self) -> None:
        """Cancel the posted receive (at exit) unless a notice completed it."""
        if not self.request.Test():
            self.request.Cancel()
            self.request.Wait()

    def check(self) -> None:
        """Raise PeerFailedError if a notice has arrived."""
        if not self.request.Test(self.status):
            return
        text = bytes(self.buf[:self.status.Get_count()]).decode(errors="replace")
        raise PeerFailedError(
            f"rank {self.world.Get_rank()}: rank {self.status.Get_source()} failed: {text}",
            hint="that rank's own output has its traceback; fix its error (this rank stopped "
                 "because the job cannot go on without it)")


_CHANNEL: _Channel | None = None
WAITING: list[str] = []  # what this rank is waiting in now (deadline.wait_all; the stop message)


def check_notices(mpi: Any) -> None:
    """Raise PeerFailedError (RLX-N009) if another rank reported a failure; a no-op on one
    rank. The first call posts the notice receive."""
    global _CHANNEL
    if _CHANNEL is None:
        if mpi.COMM_WORLD.Get_size() == 1:
            return
        _CHANNEL = _Channel(mpi)
    _CHANNEL.check()


def notify_failure(mpi: Any, error: BaseException, grace: float = GRACE_S) -> None:
    """Tell every other rank of the world that this one failed with ``error``, then give them
    up to ``grace`` seconds to report it before the caller aborts the job."""
    import numpy as np

    world = mpi.COMM_WORLD
    rank, size = world.Get_rank(), world.Get_size()
    if size == 1:
        return
    text = f"{type(error).__name__}: {error}".encode()[:_NOTICE_BYTES]
    buf = np.frombuffer(text, dtype=np.uint8).copy()
    requests = [world.Isend(buf, dest=peer, tag=NOTICE_TAG) for peer in range(size)
                if peer != rank]
    end = time.monotonic() + grace
    while not mpi.Request.Testall(requests) and time.monotonic() < end:
        time.sleep(1e-3)
    # the others abort the job once they have printed the notice (which ends this rank too);
    # a rank busy computing reads it only at its next collective, hence the bounded wait
    time.sleep(max(0.0, min(grace, end - time.monotonic())))


def stop_error(rank: int, size: int, signum: int) -> RankStoppedError:
    """The typed error of a rank the launcher stopped with ``signum``."""
    where = f"while waiting in {WAITING[-1]}" if WAITING else "while computing"
    name = signal.Signals(signum).name
    return RankStoppedError(
        f"rank {rank}/{size}: stopped by the launcher ({name}) {where}: another rank died or "
        "aborted, or the job was cancelled",
        hint="the launcher's message names the rank that ended first; its output (or a "
             "killed process: the system log, the scheduler's OOM report) says why")


def install_stop_handler(rank: int, size: int) -> None:
    """On SIGTERM (the launcher stopping the job), print RLX-N010 and exit at once.

    The handler exits from the signal (os._exit) rather than raising, so no ``finally``
    block can start another collective that would wait for a dead rank."""

    def stop(signum: int, _frame: Any) -> None:
        err = stop_error(rank, size, signum)
        sys.stderr.write(f"rlx.distributed rank {rank}/{size} stopped:\n{err}\n")
        sys.stderr.flush()
        sys.stdout.flush()
        os._exit(128 + signum)

    signal.signal(signal.SIGTERM, stop)
