"""Collectives as IR ops: communication between the ranks of an SPMD program.

Every op carries ``ranks``, the group size the program was built for (checked against the
communicator when it runs, RLX-N006), so a per-rank program says how it is meant to run.
They are MIR-level ops kept out of ``MIR_OPS`` on purpose: a target runs them only when its
capability table claims them (the numpy reference does, through mpi4py's buffer interface,
``rlx_core/distributed/collective_exec.py``); elsewhere legalization names them.

=================  ===========================================  ============================
op                 result (x of shape s on every rank)           gradient (Megatron's rules)
=================  ===========================================  ============================
all_reduce         op(x_0 .. x_{n-1}) elementwise, on every rank identity (``g``); mean: / n
replicate          x (identity; marks a replicated input)        all_reduce(sum) (``f``)
all_gather         concat(x_0 .. x_{n-1}) along ``axis``         reduce_scatter(mean)
reduce_scatter     this rank's chunk of sum(x_r) along ``axis``  all_gather
broadcast          x of rank ``root``                            ct on root, 0 elsewhere
send               x (passed through), sent to rank ``peer``     identity (pass-through)
recv               a ``dtype[shape]`` array from rank ``peer``   none (no operands)
rank               this rank's index, i32 scalar                 none
=================  ===========================================  ============================

The gradient convention is Megatron-LM's: a value that is replicated on every rank has the
same (full) cotangent on every rank. So ``all_reduce`` (``g``: partial sums in, a replicated
sum out) passes its cotangent through, and ``replicate`` (``f``: a replicated value feeding
rank-local work) sums the rank-local cotangents. Gradients across ``send``/``recv`` are the
pipeline schedule's (rlx_core/distributed/pipeline.py sends the cotangents back itself).
"""

from __future__ import annotations

from typing import Any

from rlx_core.errors import DTypeError
from rlx_core.ir import dtypes as dt
from rlx_core.ir.graph import Level, TensorType
from rlx_core.ir.ops.base import REQUIRED, AttrSpec, OpDef, normalize_axis, require

T = TensorType

REDUCTIONS = ("sum", "mean", "max", "min")
# ops with an effect beyond their result: never merged (CSE) nor dropped (DCE)
EFFECT_OPS = frozenset({"send", "recv"})
# ops a runner may start and complete later, at the first kernel that reads the result (the
# numpy target does, rlx_core/targets/numpy_ref/executor.py): their operands stay alive in
# the arena plan until that kernel (passes/plan_arena.py), since MPI reads them meanwhile
DEFERRED_OPS = frozenset({"all_reduce"})


def _ranks(op: str, a: dict[str, Any]) -> int:
    n = a["ranks"]
    require(isinstance(n, int) and not isinstance(n, bool) and n >= 1, op,
            f"ranks={n!r} must be a positive integer (the group size)")
    return n


def _rank_attr(op: str, key: str, a: dict[str, Any], n: int) -> None:
    r = a[key]
    require(isinstance(r, int) and not isinstance(r, bool) and 0 <= r < n, op,
            f"{key}={r!r} is not a rank of 0..{n - 1}", hint=f"pick {key} in [0, {n - 1}]")


def _all_reduce(ins: list[T], a: dict[str, Any]) -> T:
    x = ins[0]
    _ranks("all_reduce", a)
    require(a["op"] in REDUCTIONS, "all_reduce", f"op={a['op']!r} is not one of {REDUCTIONS}")
    require(x.dtype.is_int or x.dtype.is_float, "all_reduce",
            f"reduces int or float values, got {x}", exc=DTypeError)
    if a["op"] == "mean":
        require(x.dtype.is_float, "all_reduce", f"op=mean needs a float operand, got {x}",
                hint="cast to f32 first, or use op='sum'", exc=DTypeError)
    return x


def _same(op: str):
    def infer(ins: list[T], a: dict[str, Any]) -> T:
        _ranks(op, a)
        return ins[0]

    return infer


def _chunked(op: str, gather: bool):
    def infer(ins: list[T], a: dict[str, Any]) -> T:
        x, n = ins[0], _ranks(op, a)
        require(x.rank >= 1, op, f"needs an operand with at least one axis, got {x}")
        ax = normalize_axis(op, a["axis"], x.rank)
        require(ax == a["axis"], op, "axis must be non-negative in MIR")
        shape = list(x.shape)
        if gather:
            shape[ax] *= n
        else:
            require(a["op"] in ("sum", "mean"), op, f"op={a['op']!r} is not sum or mean")
            require(x.dtype.is_float or (x.dtype.is_int and a["op"] == "sum"), op,
                    f"cannot reduce {x} with op={a['op']}", exc=DTypeError)
            require(shape[ax] % n == 0, op,
                    f"axis {ax} of {x} (size {shape[ax]}) does not split into {n} chunks",
                    hint=f"make that axis a multiple of {n}")
            shape[ax] //= n
        return T(x.dtype, tuple(shape))

    return infer


def _broadcast(ins: list[T], a: dict[str, Any]) -> T:
    _rank_attr("broadcast", "root", a, _ranks("broadcast", a))
    return ins[0]


def _send(ins: list[T], a: dict[str, Any]) -> T:
    _rank_attr("send", "peer", a, _ranks("send", a))
    return ins[0]


def _recv(ins: list[T], a: dict[str, Any]) -> T:
    _rank_attr("recv", "peer", a, _ranks("recv", a))
    shape = tuple(a["shape"])
    require(all(isinstance(d, int) and d >= 0 for d in shape), "recv",
            f"shape {list(shape)} must be non-negative integers")
    return T(dt.get(a["dtype"]), shape)


def _rank(ins: list[T], a: dict[str, Any]) -> T:
    _ranks("rank", a)
    return T(dt.i32, ())


def collective_defs() -> dict[str, OpDef]:
    mir = Level.MIR
    ranks = AttrSpec("int", REQUIRED)
    tag = AttrSpec("int", 0)
    t: dict[str, OpDef] = {}

    def add(name, arity, attrs, infer, doc):
        t[name] = OpDef(name, mir, "collective", arity, {**attrs, "ranks": ranks}, infer, doc)

    add("all_reduce", (1, 1), {"op": AttrSpec("str", "sum")}, _all_reduce,
        "op (sum/mean/max/min) of x over the ranks, on every rank")
    add("replicate", (1, 1), {}, _same("replicate"),
        "identity; its gradient is all_reduce(sum) of the cotangent (Megatron's f)")
    add("all_gather", (1, 1), {"axis": AttrSpec("int", 0)}, _chunked("all_gather", True),
        "every rank's x concatenated along axis (rank order)")
    add("reduce_scatter", (1, 1), {"axis": AttrSpec("int", 0), "op": AttrSpec("str", "sum")},
        _chunked("reduce_scatter", False),
        "chunk number rank (along axis) of the sum (or mean) of x over the ranks")
    add("broadcast", (1, 1), {"root": AttrSpec("int", 0)}, _broadcast,
        "rank root's x on every rank")
    add("send", (1, 1), {"peer": AttrSpec("int"), "tag": tag}, _send,
        "send x to rank peer; the result is x (keeps the send ordered and alive)")
    add("recv", (0, 0), {"peer": AttrSpec("int"), "tag": tag, "shape": AttrSpec("ints"),
                         "dtype": AttrSpec("dtype")}, _recv,
        "a dtype[shape] array sent by rank peer")
    add("rank", (0, 0), {}, _rank, "this rank's index in the group, an i32 scalar")
    return t


COLLECTIVE_OPS: dict[str, OpDef] = collective_defs()

__all__ = ["COLLECTIVE_OPS", "DEFERRED_OPS", "EFFECT_OPS", "REDUCTIONS"]
