"""Running the collective IR ops (rlx_core/ir/ops/collective.py) on host arrays.

The numpy reference target evaluates a collective node by calling this with the operands
it read from its arena; each op becomes one deadline-bounded mpi4py buffer operation of the
world communicator (``rlx.distributed.init()``), so a program's collectives fail with
RLX-N001 instead of hanging, and no array is pickled. The arena runner passes the result's
own buffer (its arena slot, or the output array) as ``out``, so MPI receives into it.
"""

from __future__ import annotations

from typing import Any

from rlx_core.distributed.communicator import (
    Communicator,
    PendingReduce,
    host_numpy,
    init,
    is_host_buffer,
)
from rlx_core.distributed.errors import RankCountError

_ACTIVE: list[Communicator] = []


class use_communicator:  # noqa: N801 - a context manager, read as a statement
    """Run the collective ops of programs called inside the block on ``comm`` (the world by
    default); pipelines and tests use it for sub-communicators."""

    def __init__(self, comm: Communicator):
        self.comm = comm

    def __enter__(self) -> Communicator:
        _ACTIVE.append(self.comm)
        return self.comm

    def __exit__(self, *exc: object) -> None:
        _ACTIVE.pop()


def active() -> Communicator:
    """The communicator collective ops run on now."""
    return _ACTIVE[-1] if _ACTIVE else init()


def _group(op: str, a: dict[str, Any]) -> Communicator:
    """The active communicator, checked against the rank count the op was built for."""
    comm = _ACTIVE[-1] if _ACTIVE else init()
    if a["ranks"] != comm.size:
        raise RankCountError(
            f"{op} was built for {a['ranks']} rank(s) but runs on {comm.size}",
            hint=f"launch with mpiexec -n {a['ranks']} (or rlx run --ranks {a['ranks']}), or "
                 f"partition the program for {comm.size} ranks")
    return comm


def start_all_reduce(a: dict[str, Any], x: Any, out: Any) -> PendingReduce | None:
    """An ``all_reduce`` node started into ``out`` and not waited for (the runner waits at
    the first kernel that reads the result), or None where ``x`` is not a C-contiguous host
    array (``run_collective`` then runs it whole)."""
    comm = _group("all_reduce", a)
    if not is_host_buffer(x):
        return None
    return comm.all_reduce_start(x, a["op"], out=out)


def run_collective(op: str, a: dict[str, Any], args: list[Any], out_type: Any,
                   out: Any = None) -> Any:
    """The value of collective ``op`` on this rank (every rank calls it in the same order).

    ``out`` (a C-contiguous host array of ``out_type``: an arena slot, the caller's output
    buffer) receives the result where the op can write it there directly (the MPI call's
    receive buffer, no copy; ``out`` is then returned); otherwise a new array is returned."""
    comm = _group(op, a)
    x = args[0] if args else None
    if op == "all_reduce" and is_host_buffer(x):
        return comm.all_reduce(x, a["op"], out=out)  # the hot path: no copy, no dispatch
    np = host_numpy()
    if op == "rank":
        return np.array(comm.rank, dtype=np.int32)
    if op == "recv":
        buf = np.empty(out_type.shape, dtype=_host(out_type)) if out is None else out
        return comm.recv(buf, a["peer"], a["tag"])
    x = np.ascontiguousarray(args[0])
    if op == "replicate":
        return x
    if op == "send":
        comm.send(x, a["peer"], a["tag"])
        return x
    if op == "all_reduce":
        return comm.all_reduce(x, a["op"], out=out)
    if op == "broadcast":
        buf = x.copy() if out is None else out
        if out is not None:
            np.copyto(buf, x)  # Ibcast works in place: the root's value starts in the result
        return comm.broadcast(buf, a["root"])
    axis = a["axis"]
    if axis == 0:  # MPI chunks the leading axis: the result buffer takes the data directly
        if op == "all_gather":
            return comm.all_gather(x, out=out).reshape(out_type.shape)
        if op == "reduce_scatter":
            return comm.reduce_scatter(x, a["op"], out=out).reshape(out_type.shape)
    front = np.ascontiguousarray(np.moveaxis(x, axis, 0))
    if op == "all_gather":
        stacked = comm.all_gather(front)  # (ranks, *front.shape)
        joined = stacked.reshape(-1, *front.shape[1:])
        return np.ascontiguousarray(np.moveaxis(joined, 0, axis))
    if op == "reduce_scatter":
        return np.ascontiguousarray(np.moveaxis(comm.reduce_scatter(front, a["op"]), 0, axis))
    raise AssertionError(f"not a collective op: {op}")  # the op table and this agree


def _host(t: Any) -> Any:
    from rlx_core.targets.numpy_ref.semantics import host_dtype

    return host_dtype(t.dtype)
