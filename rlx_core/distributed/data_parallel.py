"""Data-parallel training: each rank runs ONE compiled step on its shard of the global batch,
with the gradients averaged over the ranks inside the step, before the optimizer's update.

    per step, on every rank, one executable (the numpy target's arena runner):
        forward, backward                         # as optim.compile_step
        per bucket of gradients, as soon as the backward pass has produced them:
            all_reduce(concat(bucket), mean)      # started non-blocking, backward goes on
        update                                    # waits for each bucket where it reads it

``rlx_core/distributed/grad_buckets.py`` records the bucketed all-reduces in the traced step,
``overlap.issue_early`` moves each right after the gradients it needs, and the numpy runner
starts an all-reduce where the program has it and completes it (with the deadline) at the
first kernel that reads it. With a loss that is a mean over the batch and equal shards, the
averaged gradient is the gradient of the global batch, so DP=N gives the parameters of
single-process training. The CPU target does not claim the collective IR ops (only the
numpy reference runs them, rlx_core/ir/ops/collective.py), so the step runs there.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rlx_core.autodiff.pytree import flatten, unflatten
from rlx_core.distributed.collective_exec import use_communicator
from rlx_core.distributed.communicator import Communicator, init
from rlx_core.distributed.errors import ShardError
from rlx_core.distributed.grad_buckets import DEFAULT_BUCKET_BYTES, Bucket, all_reduce_buckets
from rlx_core.distributed.overlap import issue_early
from rlx_core.distributed.tensor_parallel import RankProgram
from rlx_core.optim.train_step import CompiledStep, step_function


def shard_batch(x: Any, rank: int, size: int) -> Any:
    """Rank ``rank``'s contiguous slice (axis 0) of a global batch split ``size`` ways."""
    n = len(x)
    if n % size:
        raise ShardError(f"a global batch of {n} rows does not split over {size} ranks",
                         hint=f"use a global batch that is a multiple of {size}")
    per = n // size
    return x[rank * per:(rank + 1) * per]


class DataParallelStep(CompiledStep):
    """A compiled training step whose gradients are averaged over the communicator's ranks
    inside the step (one all-reduce per bucket of about ``bucket_bytes``).

    ``step(*local_batch)`` runs one step on this rank's shard and returns the loss averaged
    over the ranks (the global batch's loss); ``step.params`` are the parameters, identical
    on every rank (rank 0's initial values are broadcast at construction). ``step.buckets``
    lists the all-reduces in the order they are issued; ``step.graph`` is the traced step
    (its ``all_reduce`` nodes are the buckets')."""

    def __init__(self, loss_fn: Callable[..., Any], optimizer: Any, params: Any,
                 *local_batch: Any, comm: Communicator | None = None, target: str = "numpy",
                 bucket_bytes: int = DEFAULT_BUCKET_BYTES, overlap: bool = True):
        import numpy as np

        import rlx_core.api as api
        from rlx_core.frontend.tracer import trace

        self.comm = init() if comm is None else comm
        state = optimizer.init(params)
        p_leaves, p_def = flatten(params)
        s_leaves, s_def = flatten(state)
        p = [np.ascontiguousarray(x) for x in p_leaves]
        self.comm.check_same("the training step", _signature(
            loss_fn, optimizer, p, local_batch, target, bucket_bytes))
        for leaf in p:  # every rank starts from rank 0's parameters
            self.comm.broadcast(leaf, root=0)
        self.buckets: list[Bucket] = []
        ranks = self.comm.size

        def reduce(loss: Any, grads: list[Any]) -> tuple[Any, list[Any]]:
            self.buckets.clear()
            return all_reduce_buckets(loss, grads, ranks, bucket_bytes, self.buckets)

        fn = step_function(loss_fn, optimizer, p_def, s_def, len(p), len(s_leaves), reduce)
        fn.__name__ = f"dp_{fn.__name__}"
        graph = trace(fn, *p, *s_leaves, *local_batch)
        if overlap:  # else the buckets stay after the whole backward pass (the A/B baseline)
            graph = issue_early(graph)
        exe = api.compile(graph, *p, *s_leaves, *local_batch, target=target)
        super().__init__(exe, unflatten(p_def, p), state)
        self._n_batch = len(local_batch)

    def rank_program(self) -> RankProgram:
        """This rank's step as a ``RankProgram`` (the batch inputs split along axis 0, the
        buckets' all-reduces as its collectives, with their bytes), for the explorer's
        distributed view (``rlx_explorer.views.distributed.partition_view``)."""
        names = [v.name for v in self.graph.inputs]
        cut = len(names) - self._n_batch
        return RankProgram(self.graph, self.comm.rank, self.comm.size,
                           {name: (0 if i >= cut else None) for i, name in enumerate(names)},
                           [(b.value, "all_reduce(mean)", b.nbytes) for b in self.buckets],
                           kind="data parallel")

    def __call__(self, *local_batch: Any) -> float:
        with use_communicator(self.comm):  # the step's collectives run on this group
            return super().__call__(*local_batch)


def _signature(loss_fn: Any, optimizer: Any, params: list[Any], batch: tuple[Any, ...],
               target: str, bucket_bytes: int) -> str:
    import numpy as np

    def spec(x: Any) -> str:
        a = np.asarray(x)
        return f"{a.dtype}{list(a.shape)}"

    return (f"{getattr(loss_fn, '__qualname__', loss_fn)} {optimizer!r} target={target} "
            f"bucket_bytes={bucket_bytes} params=[{', '.join(spec(p) for p in params)}] "
            f"batch=[{', '.join(spec(b) for b in batch)}]")


def data_parallel_step(loss_fn: Callable[..., Any], optimizer: Any, params: Any,
                       *local_batch: Any, comm: Communicator | None = None,
                       target: str = "numpy", bucket_bytes: int = DEFAULT_BUCKET_BYTES,
                       overlap: bool = True) -> DataParallelStep:
    """Compile ``loss_fn(params, *batch)``'s step for data parallelism over ``comm``'s ranks
    (``local_batch``: this rank's shard, as an example of the shapes); gradients are
    all-reduced inside the step in buckets of about ``bucket_bytes``, each issued as soon as
    its gradients exist (``overlap=False``: all after the backward pass)."""
    return DataParallelStep(loss_fn, optimizer, params, *local_batch, comm=comm, target=target,
                            bucket_bytes=bucket_bytes, overlap=overlap)
