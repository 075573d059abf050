"""The distributed runtime's typed errors (codes RLX-N001..N029)."""

from __future__ import annotations

from rlx_core.errors import RlxError


class CollectiveTimeoutError(RlxError):
    """A collective did not complete within its deadline: a peer rank died, hung or raised.

    MPI collectives have no timeout of their own, so every collective is started
    non-blocking and waited with a deadline; once one times out the communicator is broken
    (the pending operation cannot be cancelled) and later collectives raise this too."""

    code = "RLX-N001"


class CollectiveArgumentError(RlxError):
    """A collective was called with a buffer or option it cannot take (no copy is guessed)."""

    code = "RLX-N002"


class MPIUnavailableError(RlxError):
    """mpi4py (and an MPI library under it) is not installed in this environment."""

    code = "RLX-N003"


class RankMismatchError(RlxError):
    """The ranks disagree on what they run (program, parameter shapes or dtypes)."""

    code = "RLX-N004"


class ShardError(RlxError):
    """A global batch cannot be split evenly over the ranks."""

    code = "RLX-N005"


class RankCountError(RlxError):
    """A program's collectives were built for one group size and run on another."""

    code = "RLX-N006"


class ShardingError(RlxError):
    """A tensor-parallel plan does not fit the model: it matches no layer, a width does not
    split over the ranks, or a sharded value reaches an op the partition pass cannot split."""

    code = "RLX-N007"


class PipelineError(RlxError):
    """A pipeline-parallel configuration is unusable: stages vs ranks, a batch that does not
    split into the micro-batches, an unknown schedule or stage split."""

    code = "RLX-N008"


class PeerFailedError(RlxError):
    """Another rank raised and reported it (the failure notice of distributed/faults.py):
    this rank stops too, naming that rank and its error, instead of waiting for a deadline."""

    code = "RLX-N009"


class RankStoppedError(RlxError):
    """The launcher (mpiexec, srun) stopped this rank with SIGTERM, because another rank died
    (killed, crashed) or aborted, or the job was cancelled; printed as the rank exits."""

    code = "RLX-N010"
