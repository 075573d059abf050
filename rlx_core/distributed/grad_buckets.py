"""Data parallelism's gradient all-reduce inside the traced training step, in buckets.

Called between the backward pass and the optimizer update of a step being traced
(``optim.train_step.step_function``'s ``reduce`` hook), it records, per bucket::

    b  = concat(reshape(g_i, (-1,)) for g_i in the bucket)   # one flat buffer
    b' = all_reduce(b) {op="mean"}                            # ONE collective per bucket
    g_i' = reshape(b'[at_i : at_i + size_i], shape_i)         # the update reads these

Gradients go into buckets in the order the backward pass produces them (the last layer's
first), one dtype per bucket, a bucket closing once it holds ``bucket_bytes``; a bucket of one
gradient all-reduces it as it is. The loss rides in the first bucket of its dtype (it is
ready before any gradient), so the step returns the global batch's loss at no extra
collective. ``issue_early`` (rlx_core/distributed/overlap.py) then moves each bucket's
collective to just after the gradients it needs, so the runtime can start it while the
backward pass goes on.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

DEFAULT_BUCKET_BYTES = 4 << 20  # PyTorch DDP uses 25 MB; small models still get >1 bucket


@dataclass(frozen=True)
class Bucket:
    """One all-reduce of the step: which leaves it carries (indices into the reduced list:
    the gradients in order, then the loss) and its size."""

    members: tuple[int, ...]
    dtype: str
    nbytes: int
    value: str = ""  # the all_reduce's result in the traced graph


def plan_buckets(leaves: list[tuple[int, str, int]], bucket_bytes: int) -> list[Bucket]:
    """Buckets for ``leaves`` given as (ready position, dtype, bytes), in leaf order.

    Leaves are taken in ready order (ties: leaf order); a bucket holds one dtype and closes
    once it reaches ``bucket_bytes``; the buckets come back in the order they are ready."""
    order = sorted(range(len(leaves)), key=lambda i: (leaves[i][0], i))
    open_: dict[str, list[int]] = {}
    done: list[tuple[int, Bucket]] = []

    def close(dtype: str) -> None:
        members = open_.pop(dtype)
        ready = max(leaves[i][0] for i in members)
        done.append((ready, Bucket(tuple(members), dtype, sum(leaves[i][2] for i in members))))

    for i in order:
        _, dtype, nbytes = leaves[i]
        open_.setdefault(dtype, []).append(i)
        if sum(leaves[j][2] for j in open_[dtype]) >= bucket_bytes:
            close(dtype)
    for dtype in list(open_):
        close(dtype)
    done.sort(key=lambda rb: (rb[0], rb[1].members))
    return [b for _, b in done]


def all_reduce_buckets(loss: Any, grads: list[Any], ranks: int,
                       bucket_bytes: int = DEFAULT_BUCKET_BYTES,
                       record: list[Bucket] | None = None) -> tuple[Any, list[Any]]:
    """The mean over ``ranks`` of ``loss`` and every gradient, as bucketed ``all_reduce`` ops
    recorded into the active trace (``record`` receives the buckets, in issue order)."""
    from rlx_core.distributed.ops import all_reduce
    from rlx_core.frontend import ops
    from rlx_core.frontend.ops import _value
    from rlx_core.frontend.tracer import block, current

    if bucket_bytes <= 0:
        from rlx_core.distributed.errors import CollectiveArgumentError

        raise CollectiveArgumentError(f"bucket_bytes={bucket_bytes} must be positive",
                                      hint="use e.g. 4 << 20 (4 MB, the default)")
    position = {n.name: i for i, n in enumerate(current().builder.nodes)}
    facts = []
    for x in [*grads, loss]:
        v = _value(x)
        facts.append((position.get(v.name, -1), v.type.dtype.name, v.type.nbytes))
    leaves = [*grads, ops.reshape(loss, (1,))]
    out: list[Any] = list(leaves)
    for k, bucket in enumerate(plan_buckets(facts, bucket_bytes)):
        with block(f"dp_bucket{k}"):
            parts = [leaves[i] for i in bucket.members]
            if len(parts) == 1:
                reduced = all_reduce(parts[0], "mean", ranks=ranks)
                out[bucket.members[0]] = reduced
            else:
                flat = ops.concat([ops.reshape(p, (-1,)) for p in parts])
                reduced = all_reduce(flat, "mean", ranks=ranks)
                at = 0
                for i, p in zip(bucket.members, parts, strict=True):
                    size = _value(p).type.size
                    out[i] = ops.reshape(reduced[at:at + size], _value(p).type.shape)
                    at += size
        if record is not None:
            record.append(Bucket(bucket.members, bucket.dtype, bucket.nbytes,
                                 _value(reduced).name))
    return ops.reshape(out[-1], ()), out[:-1]
