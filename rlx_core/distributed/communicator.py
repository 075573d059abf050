"""A communicator over mpi4py's buffer API: collectives on numpy arrays, each with a deadline.

Every collective is started non-blocking (``Iallreduce``, ``Iallgather``, ``Ibcast``) on the
arrays' own memory (no pickling, no copies beyond the result) and completed by
``deadline.wait_all``, so a dead or hung peer turns into RLX-N001 on every other rank within
``timeout`` seconds instead of a hang.
"""

from __future__ import annotations

import hashlib
import os
import weakref
from typing import Any

from rlx_core.distributed.deadline import check_timeout, default_timeout, wait_one
from rlx_core.distributed.errors import (
    CollectiveArgumentError,
    CollectiveTimeoutError,
    RankMismatchError,
)
from rlx_core.distributed.mpi import load_mpi

REDUCE_OPS = ("sum", "mean", "max", "min")
DETERMINISTIC_ENV = "RLX_DIST_DETERMINISTIC"
_WHAT = {op: f"all_reduce({op})" for op in REDUCE_OPS}
_SIGNATURE_BYTES = 512  # sha256 digest + the start of the text, for naming both sides
_MAX_PLANS = 64  # all_reduce plans kept per communicator (a few per training loop)


class _ReducePlan:
    """The facts ``all_reduce`` checked once for one (``x``, ``out``, op) and reuses.

    Arrays are held by weak reference and compared by identity, so a plan never keeps an
    array alive and a new array at a reused address is checked afresh; shape and dtype are
    compared too (both can be reassigned on an existing array)."""

    __slots__ = ("x", "out", "shape", "dtype", "in_place", "ordered", "mpi_op")

    def __init__(self, x: Any, out: Any, in_place: bool, ordered: bool, mpi_op: Any):
        self.x = weakref.ref(x)
        self.out = None if out is None else weakref.ref(out)
        self.shape, self.dtype = x.shape, x.dtype
        self.in_place, self.ordered, self.mpi_op = in_place, ordered, mpi_op

    def holds(self, x: Any, out: Any) -> bool:
        """Whether this plan was made for exactly these arrays, as they are now."""
        # dtypes by identity first: numpy's builtin dtypes are singletons, and == costs more
        d = self.dtype
        if self.x() is not x or x.shape != self.shape or (x.dtype is not d and x.dtype != d):
            return False
        if out is None:
            return self.out is None
        return (self.out is not None and self.out() is out and out.shape == self.shape
                and (out.dtype is d or out.dtype == d))


class PendingReduce:
    """An ``all_reduce`` in flight (``Communicator.all_reduce_start``); ``request`` is None
    once it has completed."""

    __slots__ = ("comm", "request", "recv", "op")

    def __init__(self, comm: Communicator, request: Any, recv: Any, op: str):
        self.comm, self.request, self.recv, self.op = comm, request, recv, op

    def test(self) -> bool:
        """Let MPI progress the operation; whether it has completed (no deadline here)."""
        return self.request is None or self.request.Test()

    def wait(self) -> Any:
        """The result, once every rank has contributed (RLX-N001 past the deadline)."""
        if self.request is not None:
            self.comm._wait(self.request, _WHAT[self.op])
            self.request = None
            if self.op == "mean":
                self.recv /= self.comm.size
        return self.recv


class Communicator:
    """Ranks ``0 .. size-1`` of an MPI communicator (default: the world)."""

    def __init__(self, comm: Any = None, timeout: float | None = None,
                 deterministic: bool | None = None):
        self.mpi = load_mpi()
        self.comm = self.mpi.COMM_WORLD if comm is None else comm
        self.rank: int = self.comm.Get_rank()
        self.size: int = self.comm.Get_size()
        self.timeout = default_timeout() if timeout is None else check_timeout(timeout)
        self._mpi_ops = {"sum": self.mpi.SUM, "mean": self.mpi.SUM, "max": self.mpi.MAX,
                         "min": self.mpi.MIN}
        # sums in a fixed order (rank 0 + rank 1 + ...), the same bits on every rank and run
        self.deterministic = (default_deterministic() if deterministic is None
                              else bool(deterministic))
        self._broken: str | None = None  # set once a collective timed out
        self._plans: dict[tuple, _ReducePlan] = {}  # all_reduce's checked argument pairs

    def __repr__(self) -> str:
        return f"Communicator(rank={self.rank}, size={self.size}, timeout={self.timeout:g})"

    # ---- collectives --------------------------------------------------------------------

    def all_reduce(self, x: Any, op: str = "sum", out: Any = None) -> Any:
        """Element-wise ``op`` of ``x`` over all ranks; every rank gets the result.

        ``mean`` is a sum divided by the rank count (float arrays only). ``out`` (same
        shape and dtype, may be ``x`` itself) receives the result without an allocation.
        The checks of a pair of arrays are made once: called again with the same ``x`` and
        ``out`` (a training loop's buffers, an arena), only the MPI call and its wait run."""
        request, recv = self._start_all_reduce(x, op, out)
        if request is not None:  # (the hot path: no PendingReduce, one Test before the loop)
            if not request.Test():
                self._wait(request, _WHAT[op])
            if op == "mean":
                recv /= self.size
        return recv

    def all_reduce_start(self, x: Any, op: str = "sum", out: Any = None) -> PendingReduce:
        """``all_reduce`` started, not waited for: ``.wait()`` completes it (with the
        deadline) and returns the result. Until then ``x`` must not be written, nor the
        result read (MPI works on both); ``.test()`` lets MPI progress it meanwhile."""
        request, recv = self._start_all_reduce(x, op, out)
        return PendingReduce(self, request, recv, op)

    def _start_all_reduce(self, x: Any, op: str, out: Any) -> tuple[Any, Any]:
        """(the started ``Iallreduce``, its result buffer); (None, the finished result) in
        the deterministic mode, which completes at once (a gather, a sum in rank order)."""
        key = (id(x), id(out), op, self.deterministic)
        plan = self._plans.get(key)
        if plan is None or not plan.holds(x, out):
            plan = self._plan_all_reduce(x, op, out, key)
        recv = host_numpy().empty_like(x) if out is None else out
        if plan.ordered:
            self._ordered_sum(x, recv, _WHAT[op])
            if op == "mean":
                recv /= self.size
            return None, recv
        if self._broken is not None:
            self._raise_broken(_WHAT[op])
        send = self.mpi.IN_PLACE if plan.in_place else x
        return self.comm.Iallreduce(send, recv, op=plan.mpi_op), recv

    def _plan_all_reduce(self, x: Any, op: str, out: Any, key: tuple) -> _ReducePlan:
        """Check ``x`` and ``out`` for ``all_reduce`` (typed errors) and remember the facts
        the call needs under ``key`` (weak references: the plan keeps no array alive)."""
        if op not in REDUCE_OPS:
            raise CollectiveArgumentError(f"all_reduce op {op!r} is not one of {REDUCE_OPS}",
                                          hint="use 'sum', 'mean', 'max' or 'min'")
        send = self._buffer(x, "all_reduce")
        if op == "mean" and send.dtype.kind not in "fc":
            raise CollectiveArgumentError(
                f"all_reduce(op='mean') of a {send.dtype} array has no exact result",
                hint="cast to a float dtype first, or use op='sum'")
        in_place = False
        if out is not None:
            recv = self._out(out, send.shape, send.dtype, "all_reduce")
            # reducing into the input itself is MPI's IN_PLACE (MPI forbids aliased buffers)
            in_place = _same_memory(recv, send)
            if not in_place:
                self._disjoint(recv, send, "all_reduce", in_place_ok=True)
        ordered = self.deterministic and op in ("sum", "mean") and send.dtype.kind in "fc"
        plan = _ReducePlan(x, out, in_place, ordered, self._mpi_ops[op])
        if len(self._plans) >= _MAX_PLANS:  # arrays made per call: forget, don't grow
            self._plans.clear()
        self._plans[key] = plan
        return plan

    def all_gather(self, x: Any, out: Any = None) -> Any:
        """Every rank's ``x`` stacked on a new leading axis: shape ``(size, *x.shape)``
        (written into ``out`` when given: same element count and dtype, C-contiguous)."""
        np = host_numpy()
        send = self._buffer(x, "all_gather")
        shape = (self.size, *send.shape)
        recv = np.empty(shape, dtype=send.dtype) if out is None else \
            self._out(out, shape, send.dtype, "all_gather", reshape=True)
        self._disjoint(recv, send, "all_gather")
        self._run(lambda: self.comm.Iallgather(send, recv), "all_gather")
        return recv

    def broadcast(self, x: Any, root: int = 0) -> Any:
        """Rank ``root``'s ``x`` on every rank, written into ``x`` (which is returned)."""
        if not (isinstance(root, int) and 0 <= root < self.size):
            raise CollectiveArgumentError(f"broadcast root={root!r} is not a rank of "
                                          f"0..{self.size - 1}", hint="pass a valid rank")
        buf = self._buffer(x, "broadcast", writable=True)
        self._run(lambda: self.comm.Ibcast(buf, root=root), f"broadcast(root={root})")
        return buf

    def reduce_scatter(self, x: Any, op: str = "sum", out: Any = None) -> Any:
        """Chunk number ``rank`` (of ``size`` equal chunks along axis 0) of the sum (or mean)
        of ``x`` over the ranks (written into ``out`` when given)."""
        np = host_numpy()
        if op not in ("sum", "mean"):
            raise CollectiveArgumentError(f"reduce_scatter op {op!r} is not 'sum' or 'mean'",
                                          hint="use 'sum' or 'mean'")
        send = self._buffer(x, "reduce_scatter")
        if not send.shape or send.shape[0] % self.size:
            raise CollectiveArgumentError(
                f"reduce_scatter of shape {list(send.shape)} does not split into {self.size} "
                "chunks along axis 0", hint=f"make axis 0 a multiple of {self.size}")
        shape = (send.shape[0] // self.size, *send.shape[1:])
        recv = np.empty(shape, dtype=send.dtype) if out is None else \
            self._out(out, shape, send.dtype, "reduce_scatter", reshape=True)
        self._disjoint(recv, send, "reduce_scatter")
        if self.deterministic and send.dtype.kind in "fc":
            every = np.empty((self.size, *send.shape), dtype=send.dtype)
            self._run(lambda: self.comm.Iallgather(send, every), f"reduce_scatter({op})")
            mine = every.reshape(self.size, self.size, *shape)[:, self.rank]
            _sum_in_order(mine, recv)
        else:
            self._run(lambda: self.comm.Ireduce_scatter_block(send, recv, op=self.mpi.SUM),
                      f"reduce_scatter({op})")
        if op == "mean":
            recv /= self.size
        return recv

    def send(self, x: Any, peer: int, tag: int = 0) -> None:
        """Send ``x`` to rank ``peer`` (completes when the message is handed over)."""
        buf = self._buffer(x, "send")
        self._peer(peer, "send")
        self._run(lambda: self.comm.Isend(buf, dest=peer, tag=tag), f"send(to {peer})")

    def recv(self, out: Any, peer: int, tag: int = 0) -> Any:
        """Receive rank ``peer``'s message into ``out`` (which is returned)."""
        buf = self._buffer(out, "recv", writable=True)
        self._peer(peer, "recv")
        self._run(lambda: self.comm.Irecv(buf, source=peer, tag=tag), f"recv(from {peer})")
        return buf

    def _peer(self, peer: int, what: str) -> None:
        if not (isinstance(peer, int) and 0 <= peer < self.size and peer != self.rank):
            raise CollectiveArgumentError(
                f"{what} peer={peer!r} is not another rank of 0..{self.size - 1} "
                f"(this is rank {self.rank})", hint="pass the rank of the other side")

    def barrier(self) -> None:
        """Wait (with the deadline) until every rank has arrived."""
        self._run(lambda: self.comm.Ibarrier(), "barrier")

    def check_same(self, what: str, signature: str) -> None:
        """Raise RLX-N004 on every rank unless all ranks pass the same ``signature`` text.

        Used at start-up (program, parameter shapes); the error names both sides."""
        every = self.all_gather(encode_signature(signature))
        compare_signatures(what, self.rank, signature, every)

    # ---- helpers ------------------------------------------------------------------------

    def _ordered_sum(self, send: Any, recv: Any, what: str) -> None:
        """``recv = send_0 + send_1 + ... + send_{size-1}``, added left to right in rank order
        on every rank (gathered first: size x the buffer's memory, for debugging runs)."""
        every = host_numpy().empty((self.size, *send.shape), dtype=send.dtype)
        self._run(lambda: self.comm.Iallgather(send, every), what)
        _sum_in_order(every, recv)

    def _run(self, start: Any, what: str) -> None:
        if self._broken is not None:
            self._raise_broken(what)
        self._wait(start(), what)

    def _wait(self, request: Any, what: str) -> None:
        """Complete ``request`` within the deadline; a timeout breaks the communicator."""
        try:
            wait_one(self.mpi, request, self.timeout, what, self.rank)
        except CollectiveTimeoutError as err:
            self._broken = err.message
            raise

    def _raise_broken(self, what: str) -> None:
        raise CollectiveTimeoutError(
            f"rank {self.rank}: {what} on a broken communicator ({self._broken})",
            hint="a collective timed out earlier; end this run (the launcher stops "
                 "the other ranks) and look at their output")

    def _buffer(self, x: Any, what: str, writable: bool = False) -> Any:
        np = host_numpy()
        if not isinstance(x, np.ndarray):
            raise CollectiveArgumentError(
                f"{what} takes a numpy array, got {type(x).__name__}",
                hint="pass np.asarray(x); collectives read the array's own memory")
        if not x.flags.c_contiguous:
            raise CollectiveArgumentError(
                f"{what} needs a C-contiguous array, got strides {x.strides} for shape "
                f"{x.shape}", hint="pass np.ascontiguousarray(x)")
        if x.dtype.kind not in "biufc":
            raise CollectiveArgumentError(f"{what} cannot send dtype {x.dtype}",
                                          hint="use a numeric dtype")
        if writable and not x.flags.writeable:
            raise CollectiveArgumentError(f"{what} writes into its argument, which is "
                                          "read-only", hint="pass a writable copy")
        return x

    def _out(self, out: Any, shape: tuple[int, ...], dtype: Any, what: str,
             reshape: bool = False) -> Any:
        """``out`` checked as the result buffer (``reshape``: any shape of the same element
        count, viewed as ``shape``; the view shares ``out``'s memory)."""
        buf = self._buffer(out, f"{what} out=", writable=True)
        size = 1
        for d in shape:
            size *= d
        fits = buf.size == size if reshape else buf.shape == shape
        if not fits or buf.dtype != dtype:
            raise CollectiveArgumentError(
                f"{what} out= is {buf.dtype}{list(buf.shape)}, the result is "
                f"{dtype}{list(shape)}", hint="pass an array of the result's shape and dtype")
        return buf.reshape(shape) if reshape else buf

    @staticmethod
    def _disjoint(recv: Any, send: Any, what: str, in_place_ok: bool = False) -> None:
        # MPI forbids aliased send and receive buffers; only the exact same memory is
        # MPI_IN_PLACE (all_reduce), and no copy is made to work around an overlap
        np = host_numpy()
        if np.may_share_memory(recv, send) and np.shares_memory(recv, send):
            raise CollectiveArgumentError(
                f"{what} out= overlaps its input" + (" partially" if in_place_ok else ""),
                hint=("pass out=x (in place), or a separate array" if in_place_ok
                      else "pass a separate array"))


def _sum_in_order(parts: Any, out: Any) -> None:
    """``out = parts[0] + parts[1] + ...`` in that order (numpy adds two arrays elementwise,
    one rounding per element per addition: the bits depend only on the order)."""
    host_numpy().copyto(out, parts[0])
    for part in parts[1:]:
        out += part


def default_deterministic() -> bool:
    """``$RLX_DIST_DETERMINISTIC`` is 1/true/yes: ordered sums for every new communicator."""
    return os.environ.get(DETERMINISTIC_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def _same_memory(a: Any, b: Any) -> bool:
    """Whether two C-contiguous arrays are the same bytes (so MPI_IN_PLACE applies)."""
    if a is b:
        return True
    return (host_numpy().may_share_memory(a, b) and a.nbytes == b.nbytes  # a bounds check in C
            and a.__array_interface__["data"][0] == b.__array_interface__["data"][0])


def encode_signature(signature: str) -> Any:
    """A fixed-size uint8 row: the text's sha256, then as much of the text as fits."""
    np = host_numpy()
    raw = signature.encode()
    body = (hashlib.sha256(raw).digest() + raw)[:_SIGNATURE_BYTES]
    row = np.zeros(_SIGNATURE_BYTES, dtype=np.uint8)
    row[:len(body)] = np.frombuffer(body, dtype=np.uint8)
    return row


def compare_signatures(what: str, rank: int, signature: str, every: Any) -> None:
    """RLX-N004 naming this rank's and the first differing rank's signature, if any differ
    (``every``: the all-gathered ``encode_signature`` rows, one per rank)."""
    digest = hashlib.sha256(signature.encode()).digest()
    for other in range(len(every)):
        if bytes(every[other, :32]) != digest:
            theirs = bytes(every[other, 32:]).rstrip(b"\0").decode(errors="replace")
            raise RankMismatchError(
                f"ranks differ in {what}: rank {rank} has {_short(signature)!r}, "
                f"rank {other} has {_short(theirs)!r}",
                hint="start every rank with the same program, model and batch shapes")


def _short(text: str, limit: int = 160) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


_NP: Any = None


def host_numpy() -> Any:
    """numpy, imported on first use (the host array layer; optional for rlx_core as a whole,
    so nothing in rlx_core.distributed imports it at module level)."""
    global _NP
    if _NP is None:
        import numpy as np

        _NP = np
    return _NP


def is_host_buffer(x: Any) -> bool:
    """Whether ``x`` goes to MPI as it is: a C-contiguous numpy array (the collectives'
    fast paths test this; ``Communicator._buffer`` names what is wrong with anything else)."""
    return type(x) is host_numpy().ndarray and x.flags.c_contiguous


_WORLD: Communicator | None = None


def init(timeout: float | None = None, deterministic: bool | None = None) -> Communicator:
    """The world communicator (made once per process; ``timeout`` and ``deterministic``
    update it)."""
    global _WORLD
    if _WORLD is None:
        _WORLD = Communicator(timeout=timeout, deterministic=deterministic)
    else:
        if timeout is not None:
            _WORLD.timeout = check_timeout(timeout)
        if deterministic is not None:
            _WORLD.deterministic = bool(deterministic)
    return _WORLD
