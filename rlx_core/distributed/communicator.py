"""A communicator over mpi4py's buffer API: collectives on numpy arrays, each with a deadline.

Every collective is started non-blocking (``Iallreduce``, ``Iallgather``, ``Ibcast``) on the
arrays' own memory (no pickling, no copies beyond the result) and completed by
``deadline.wait_all``, so a dead or hung peer turns into RLX-N001 on every other rank within
``timeout`` seconds instead of a hang.
"""

from __future__ import annotations

import hashlib
from typing import Any

from rlx_core.distributed.deadline import check_timeout, default_timeout, wait_all
from rlx_core.distributed.errors import (
    CollectiveArgumentError,
    CollectiveTimeoutError,
    RankMismatchError,
)
from rlx_core.distributed.mpi import load_mpi

REDUCE_OPS = ("sum", "mean", "max", "min")
_SIGNATURE_BYTES = 512  # sha256 digest + the start of the text, for naming both sides


class Communicator:
    """Ranks ``0 .. size-1`` of an MPI communicator (default: the world)."""

    def __init__(self, comm: Any = None, timeout: float | None = None):
        self.mpi = load_mpi()
        self.comm = self.mpi.COMM_WORLD if comm is None else comm
        self.rank: int = self.comm.Get_rank()
        self.size: int = self.comm.Get_size()
        self.timeout = default_timeout() if timeout is None else check_timeout(timeout)
        self._broken: str | None = None  # set once a collective timed out

    def __repr__(self) -> str:
        return f"Communicator(rank={self.rank}, size={self.size}, timeout={self.timeout:g})"

    # ---- collectives --------------------------------------------------------------------

    def all_reduce(self, x: Any, op: str = "sum", out: Any = None) -> Any:
        """Element-wise ``op`` of ``x`` over all ranks; every rank gets the result.

        ``mean`` is a sum divided by the rank count (float arrays only). ``out`` (same
        shape and dtype, may be ``x`` itself) receives the result without an allocation."""
        np = _numpy()
        if op not in REDUCE_OPS:
            raise CollectiveArgumentError(f"all_reduce op {op!r} is not one of {REDUCE_OPS}",
                                          hint="use 'sum', 'mean', 'max' or 'min'")
        send = self._buffer(x, "all_reduce")
        if op == "mean" and send.dtype.kind not in "fc":
            raise CollectiveArgumentError(
                f"all_reduce(op='mean') of a {send.dtype} array has no exact result",
                hint="cast to a float dtype first, or use op='sum'")
        recv = np.empty_like(send) if out is None else self._out(out, send.shape, send.dtype)
        if recv is not send and out is not None and np.shares_memory(recv, send):
            raise CollectiveArgumentError("all_reduce out= overlaps x partially",
                                          hint="pass out=x (in place), or a separate array")
        mpi_op = {"sum": self.mpi.SUM, "mean": self.mpi.SUM, "max": self.mpi.MAX,
                  "min": self.mpi.MIN}[op]
        # reducing into the input itself is MPI's IN_PLACE (MPI forbids aliased buffers)
        sendbuf = self.mpi.IN_PLACE if recv is send else send
        self._run(lambda: self.comm.Iallreduce(sendbuf, recv, op=mpi_op), f"all_reduce({op})")
        if op == "mean":
            recv /= self.size
        return recv

    def all_gather(self, x: Any) -> Any:
        """Every rank's ``x`` stacked on a new leading axis: shape ``(size, *x.shape)``."""
        np = _numpy()
        send = self._buffer(x, "all_gather")
        recv = np.empty((self.size, *send.shape), dtype=send.dtype)
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

    def reduce_scatter(self, x: Any, op: str = "sum") -> Any:
        """Chunk number ``rank`` (of ``size`` equal chunks along axis 0) of the sum (or mean)
        of ``x`` over the ranks."""
        np = _numpy()
        if op not in ("sum", "mean"):
            raise CollectiveArgumentError(f"reduce_scatter op {op!r} is not 'sum' or 'mean'",
                                          hint="use 'sum' or 'mean'")
        send = self._buffer(x, "reduce_scatter")
        if not send.shape or send.shape[0] % self.size:
            raise CollectiveArgumentError(
                f"reduce_scatter of shape {list(send.shape)} does not split into {self.size} "
                "chunks along axis 0", hint=f"make axis 0 a multiple of {self.size}")
        recv = np.empty((send.shape[0] // self.size, *send.shape[1:]), dtype=send.dtype)
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

    def _run(self, start: Any, what: str) -> None:
        if self._broken is not None:
            raise CollectiveTimeoutError(
                f"rank {self.rank}: {what} on a broken communicator ({self._broken})",
                hint="a collective timed out earlier; end this run (the launcher stops "
                     "the other ranks) and look at their output")
        request = start()
        try:
            wait_all(self.mpi, [request], self.timeout, what, self.rank)
        except CollectiveTimeoutError as err:
            self._broken = err.message
            raise

    def _buffer(self, x: Any, what: str, writable: bool = False) -> Any:
        np = _numpy()
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

    def _out(self, out: Any, shape: tuple[int, ...], dtype: Any) -> Any:
        buf = self._buffer(out, "all_reduce out=", writable=True)
        if buf.shape != shape or buf.dtype != dtype:
            raise CollectiveArgumentError(
                f"all_reduce out= is {buf.dtype}{list(buf.shape)}, the result is "
                f"{dtype}{list(shape)}", hint="pass an array of the input's shape and dtype")
        return buf


def encode_signature(signature: str) -> Any:
    """A fixed-size uint8 row: the text's sha256, then as much of the text as fits."""
    np = _numpy()
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


def _numpy() -> Any:
    import numpy as np  # the host array layer; optional for rlx_core as a whole

    return np


_WORLD: Communicator | None = None


def init(timeout: float | None = None) -> Communicator:
    """The world communicator (made once per process; ``timeout`` updates its deadline)."""
    global _WORLD
    if _WORLD is None:
        _WORLD = Communicator(timeout=timeout)
    elif timeout is not None:
        _WORLD.timeout = check_timeout(timeout)
    return _WORLD
