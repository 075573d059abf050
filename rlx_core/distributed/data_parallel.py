"""Data-parallel training: each rank runs the compiled step on its shard of the global batch
and the gradients are averaged over the ranks (one all-reduce per dtype bucket) before the
optimizer's update.

    per step, on every rank:
        loss, grads = grad_exe(params, local_batch)       # compiled forward + backward
        bucket = concat(grads); all_reduce(bucket, mean)   # one collective, in place
        params, state = update_exe(params, state, grads)   # compiled optimizer update

With a loss that is a mean over the batch and equal shards, the averaged gradient is the
gradient of the global batch, so DP=N gives the parameters of single-process training.
The step is two executables (not the fused one of ``optim.compile_step``) because the
all-reduce runs between the backward pass and the update, outside the graph: the CPU
target, which compiles the step, does not claim the collective IR ops (only the numpy
reference runs them, rlx_core/ir/ops/collective.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rlx_core.autodiff.api import value_and_grad
from rlx_core.autodiff.pytree import flatten, unflatten
from rlx_core.distributed.communicator import Communicator, init
from rlx_core.distributed.errors import ShardError


def shard_batch(x: Any, rank: int, size: int) -> Any:
    """Rank ``rank``'s contiguous slice (axis 0) of a global batch split ``size`` ways."""
    n = len(x)
    if n % size:
        raise ShardError(f"a global batch of {n} rows does not split over {size} ranks",
                         hint=f"use a global batch that is a multiple of {size}")
    per = n // size
    return x[rank * per:(rank + 1) * per]


def _grad_function(loss_fn: Callable[..., Any], p_def: Any, n_params: int) -> Callable:
    def grad_step(*flat: Any) -> tuple[Any, ...]:
        params = unflatten(p_def, list(flat[:n_params]))
        loss, grads = value_and_grad(loss_fn)(params, *flat[n_params:])
        return (loss, *flatten(grads)[0])

    grad_step.__name__ = f"grad_step_{getattr(loss_fn, '__name__', 'loss')}"
    return grad_step


def _update_function(optimizer: Any, p_def: Any, s_def: Any, n_params: int,
                     n_state: int) -> Callable:
    def update_step(*flat: Any) -> tuple[Any, ...]:
        params = unflatten(p_def, list(flat[:n_params]))
        state = unflatten(s_def, list(flat[n_params:n_params + n_state]))
        grads = unflatten(p_def, list(flat[n_params + n_state:]))
        new_params, new_state = optimizer.update(params, grads, state)
        return (*flatten(new_params)[0], *flatten(new_state)[0])

    update_step.__name__ = f"update_step_{getattr(optimizer, 'name', 'opt')}"
    return update_step


class DataParallelStep:
    """A compiled training step whose gradients are averaged over the communicator's ranks.

    ``step(*local_batch)`` runs one step on this rank's shard and returns the loss averaged
    over the ranks (the global batch's loss); ``step.params`` are the parameters, identical
    on every rank (rank 0's initial values are broadcast at construction)."""

    def __init__(self, loss_fn: Callable[..., Any], optimizer: Any, params: Any,
                 *local_batch: Any, comm: Communicator | None = None, target: str = "numpy"):
        import numpy as np

        import rlx_core.api as api

        self.comm = init() if comm is None else comm
        p_leaves, self._p_def = flatten(params)
        s_leaves, self._s_def = flatten(optimizer.init(params))
        self._p = [np.ascontiguousarray(p) for p in p_leaves]
        self._s = [np.ascontiguousarray(s) for s in s_leaves]
        n, m = len(self._p), len(self._s)
        self.comm.check_same("the training step", _signature(loss_fn, optimizer, self._p,
                                                             local_batch, target))
        for leaf in self._p:  # every rank starts from rank 0's parameters
            self.comm.broadcast(leaf, root=0)
        self.grad_exe = api.compile(_grad_function(loss_fn, self._p_def, n),
                                    *self._p, *local_batch, target=target)
        self.update_exe = api.compile(
            _update_function(optimizer, self._p_def, self._s_def, n, m),
            *self._p, *self._s, *self._p, target=target)
        self.steps = 0
        self.losses: list[float] = []
        # one gradient bucket per dtype, kept from step to step: its pages are touched once
        # (a new bucket each step page-faulted in MPI: 2x the all-reduce at 4-64 MB), and the
        # communicator's checks of the (bucket, bucket) pair are made once
        self._buckets: dict[Any, Any] = {}

    @property
    def params(self) -> Any:
        return unflatten(self._p_def, list(self._p))

    @property
    def state(self) -> Any:
        return unflatten(self._s_def, list(self._s))

    def __call__(self, *local_batch: Any) -> float:
        import numpy as np

        outs = self.grad_exe(*self._p, *local_batch)
        loss, grads = np.asarray(outs[0]), [np.asarray(g) for g in outs[1:]]
        grads = self._average(grads, loss)
        new = self.update_exe(*self._p, *self._s, *grads)
        n = len(self._p)
        self._p = [np.ascontiguousarray(x) for x in new[:n]]
        self._s = [np.ascontiguousarray(x) for x in new[n:]]
        self.steps += 1
        self.losses.append(self._loss)
        return self._loss

    def _average(self, grads: list[Any], loss: Any) -> list[Any]:
        """The mean over ranks of every gradient: one in-place all-reduce per dtype bucket
        (the loss rides in its dtype's bucket)."""
        import numpy as np

        leaves = [*grads, loss.reshape(1)]
        out: list[Any] = [None] * len(leaves)
        for dtype in dict.fromkeys(g.dtype for g in leaves):  # first-seen order, same on all
            idx = [i for i, g in enumerate(leaves) if g.dtype == dtype]
            size = sum(leaves[i].size for i in idx)
            bucket = self._buckets.get(dtype)
            if bucket is None or bucket.size != size:
                bucket = self._buckets[dtype] = np.empty(size, dtype)
            np.concatenate([leaves[i].ravel() for i in idx], out=bucket)
            self.comm.all_reduce(bucket, "mean", out=bucket)
            at = 0
            for i in idx:
                size = leaves[i].size
                out[i] = bucket[at:at + size].reshape(leaves[i].shape)
                at += size
        self._loss = float(out[-1][0])
        return out[:-1]


def _signature(loss_fn: Any, optimizer: Any, params: list[Any], batch: tuple[Any, ...],
               target: str) -> str:
    import numpy as np

    def spec(x: Any) -> str:
        a = np.asarray(x)
        return f"{a.dtype}{list(a.shape)}"

    return (f"{getattr(loss_fn, '__qualname__', loss_fn)} {optimizer!r} target={target} "
            f"params=[{', '.join(spec(p) for p in params)}] "
            f"batch=[{', '.join(spec(b) for b in batch)}]")


def data_parallel_step(loss_fn: Callable[..., Any], optimizer: Any, params: Any,
                       *local_batch: Any, comm: Communicator | None = None,
                       target: str = "numpy") -> DataParallelStep:
    """Compile ``loss_fn(params, *batch)``'s step for data parallelism over ``comm``'s ranks
    (``local_batch``: this rank's shard, as an example of the shapes)."""
    return DataParallelStep(loss_fn, optimizer, params, *local_batch, comm=comm, target=target)
