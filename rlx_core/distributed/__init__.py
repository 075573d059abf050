"""Distributed execution on MPI (``rlx.distributed``): a communicator with deadline-bounded
collectives over mpi4py's buffer API, and data-parallel training.

mpi4py is imported lazily: importing this package needs only the standard library; making a
Communicator needs mpi4py. Run a script on N ranks with
``mpiexec -n N python -m rlx_core.distributed FILE`` (docs/distributed.md).
"""

from rlx_core.distributed.communicator import REDUCE_OPS, Communicator, init
from rlx_core.distributed.data_parallel import DataParallelStep, data_parallel_step, shard_batch
from rlx_core.distributed.deadline import DEFAULT_TIMEOUT_S, TIMEOUT_ENV
from rlx_core.distributed.errors import (
    CollectiveArgumentError,
    CollectiveTimeoutError,
    MPIUnavailableError,
    PipelineError,
    RankCountError,
    RankMismatchError,
    ShardError,
    ShardingError,
)
from rlx_core.distributed.ops import (
    all_gather,
    all_reduce,
    broadcast,
    recv,
    reduce_scatter,
    replicate,
    send,
)
from rlx_core.distributed.pipeline import (
    PipelineInference,
    PipelineStep,
    ideal_bubble,
    schedule,
    split_layers,
)
from rlx_core.distributed.tensor_parallel import (
    RankProgram,
    TensorParallelPlan,
    auto_plan,
    bert_plan,
    partition,
    with_gradients,
)

__all__ = ["REDUCE_OPS", "Communicator", "init", "DataParallelStep", "data_parallel_step",
           "shard_batch", "DEFAULT_TIMEOUT_S", "TIMEOUT_ENV", "CollectiveArgumentError",
           "CollectiveTimeoutError", "MPIUnavailableError", "RankMismatchError", "ShardError",
           "RankCountError", "ShardingError", "PipelineError", "PipelineStep",
           "PipelineInference",
           "ideal_bubble", "schedule", "split_layers", "TensorParallelPlan", "RankProgram", "auto_plan", "bert_plan",
           "partition", "with_gradients", "all_reduce", "replicate",
           "all_gather", "reduce_scatter", "broadcast", "send", "recv"]
