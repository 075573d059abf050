"""The collectives as functions (``rlx.distributed.all_reduce(x)``, ...): inside a trace they
record the IR op (rlx_core/ir/ops/collective.py); on arrays they run at once on the active
communicator, exactly as the compiled op would.

``ranks`` is the group size the op is built for; by default the active communicator's size
(which starts MPI). Pass it explicitly to build a program for N ranks without MPI (the
explorer's static view does).
"""

from __future__ import annotations

from typing import Any


def _ranks(ranks: int | None) -> int:
    if ranks is not None:
        return ranks
    from rlx_core.distributed.collective_exec import active

    return active().size


def _apply(op: str, x: Any, attrs: dict[str, Any], ranks: int | None) -> Any:
    from rlx_core.frontend.ops import _tensor, _value
    from rlx_core.frontend.tracer import current

    a = {**attrs, "ranks": _ranks(ranks)}
    if x is None or _value(x) is not None:  # recording into a trace
        ins = [] if x is None else [_value(x)]
        return _tensor(current().emit(op, ins, a))
    import numpy as np

    from rlx_core.distributed.collective_exec import run_collective
    from rlx_core.frontend.tracer import type_of_example
    from rlx_core.ir.ops import COLLECTIVE_OPS

    arr = np.ascontiguousarray(x)
    full = COLLECTIVE_OPS[op].complete_attrs(a)
    out_t = COLLECTIVE_OPS[op].infer([type_of_example(arr)], full)
    return run_collective(op, full, [arr], out_t)


def all_reduce(x: Any, op: str = "sum", *, ranks: int | None = None) -> Any:
    """``op`` (sum/mean/max/min) of ``x`` over the ranks, on every rank."""
    return _apply("all_reduce", x, {"op": op}, ranks)


def replicate(x: Any, *, ranks: int | None = None) -> Any:
    """``x`` unchanged; its gradient is summed over the ranks (Megatron's ``f``)."""
    return _apply("replicate", x, {}, ranks)


def all_gather(x: Any, axis: int = 0, *, ranks: int | None = None) -> Any:
    """Every rank's ``x`` concatenated along ``axis`` in rank order."""
    return _apply("all_gather", x, {"axis": axis}, ranks)


def reduce_scatter(x: Any, axis: int = 0, op: str = "sum", *, ranks: int | None = None) -> Any:
    """This rank's chunk (along ``axis``) of the sum (or mean) of ``x`` over the ranks."""
    return _apply("reduce_scatter", x, {"axis": axis, "op": op}, ranks)


def broadcast(x: Any, root: int = 0, *, ranks: int | None = None) -> Any:
    """Rank ``root``'s ``x`` on every rank."""
    return _apply("broadcast", x, {"root": root}, ranks)


def send(x: Any, peer: int, tag: int = 0, *, ranks: int | None = None) -> Any:
    """Send ``x`` to rank ``peer``; returns ``x`` (return or use it to order the send)."""
    return _apply("send", x, {"peer": peer, "tag": tag}, ranks)


def recv(shape: tuple[int, ...], dtype: Any, peer: int, tag: int = 0, *,
         ranks: int | None = None) -> Any:
    """A ``dtype[shape]`` array sent by rank ``peer`` (inside a trace: a recv node)."""
    from rlx_core.ir import dtypes as dt

    a = {"peer": peer, "tag": tag, "shape": tuple(shape), "dtype": dt.get(dtype)}
    from rlx_core.frontend.eager import tracing

    if tracing():
        return _apply("recv", None, a, ranks)
    from rlx_core.distributed.collective_exec import run_collective
    from rlx_core.ir.ops import COLLECTIVE_OPS

    full = COLLECTIVE_OPS["recv"].complete_attrs({**a, "ranks": _ranks(ranks)})
    return run_collective("recv", full, [], COLLECTIVE_OPS["recv"].infer([], full))


__all__ = ["all_reduce", "replicate", "all_gather", "reduce_scatter", "broadcast", "send",
           "recv"]
