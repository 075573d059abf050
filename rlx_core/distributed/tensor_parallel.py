"""Tensor parallelism: a sharding plan and the partition pass that turns one HIR graph into
the program of one rank, with the collectives inserted (Megatron-LM's pattern).

    plan = TensorParallelPlan(column=("*fc1*",), row=("*fc2*",))
    prog = partition(graph, plan, rank, ranks)      # per-rank HIR graph + how to shard inputs

A *column-parallel* ``linear`` keeps rows ``rank`` of its weight (output features) and of its
bias; its input is replicated, marked with ``replicate`` (Megatron's ``f``: identity forward,
all-reduce of the gradient), and its output is sharded along the last axis. A *row-parallel*
``linear`` keeps columns ``rank`` of its weight (input features); it multiplies the sharded
activation without its bias, all-reduces the partial sums (Megatron's ``g``) and then adds
the bias once. So a column/row pair (an MLP, or attention whose heads follow the sharded
q/k/v features) costs one all-reduce in the forward pass.

Between the pair the pass propagates the sharding through elementwise ops (an operand that
is a broadcast scalar is rebuilt at the local shape), ``reshape`` (the sharded axis splits or
merges, e.g. hidden -> heads x head_dim), ``transpose`` and ``attention`` (split heads). A
sharded value reaching any other op, or a graph output, is RLX-N007: the plan does not fit.

Every value is in one of three states: replicated (the same on every rank), sharded along an
axis (rank r holds chunk r), or partial (a row-parallel product before its all-reduce: never
left visible).
"""

from __future__ import annotations

import fnmatch
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from rlx_core.distributed.errors import ShardingError
from rlx_core.ir.builder import Builder, NameGen, infer_type
from rlx_core.ir.graph import Graph, Node, TensorType, Value, ValueKind, freeze_attrs
from rlx_core.ir.ops import MIR_OPS

COLUMN, ROW = "column", "row"
_ELEMENTWISE_HIR = frozenset({"gelu", "silu", "relu", "sigmoid"})


@dataclass(frozen=True)
class TensorParallelPlan:
    """Which ``linear`` layers are column- and row-parallel. A pattern (``fnmatch`` glob)
    matches the layer's weight name (a parameter's or an input's) or its block scope."""

    column: tuple[str, ...] = ()
    row: tuple[str, ...] = ()

    def role(self, labels: Sequence[str]) -> str | None:
        for role, pats in ((COLUMN, self.column), (ROW, self.row)):
            if any(fnmatch.fnmatchcase(lab, p) for lab in labels if lab for p in pats):
                return role
        return None


def bert_plan() -> TensorParallelPlan:
    """Megatron's plan for a BERT/GPT block: q, k, v and the first FFN layer column-parallel
    (attention heads split with them), the attention output and FFN output row-parallel."""
    return TensorParallelPlan(
        column=("*attention.self.query.weight", "*attention.self.key.weight",
                "*attention.self.value.weight", "*intermediate.dense.weight"),
        row=("*attention.output.dense.weight", "*output.dense.weight"))


def _leaf_like(producer: Node | None) -> bool:
    """A graph input or parameter (no producer), or a constant with all its values written
    out (small weights and biases are inlined so): something the pass can slice."""
    return producer is None or (producer.op == "constant"
                                and isinstance(producer.attr("value"), tuple))


def auto_plan(g: Graph) -> TensorParallelPlan:
    """Megatron's pairs found in ``g``: a ``linear`` whose output reaches, through ops the
    partition pass can split (elementwise, reshape, transpose, attention), only ``linear``
    inputs becomes column-parallel and those layers row-parallel (an MLP's fc1/fc2, attention's
    q/k/v and output projection, an FFN). Layers in no such pair stay replicated."""
    users, producers = g.users(), g.producers()
    splittable = {"reshape", "transpose", "attention", *_ELEMENTWISE_HIR}

    def own_weights(n: Node) -> bool:  # weight and bias: leaves used by this layer alone
        return all(_leaf_like(producers.get(v)) and len(users.get(v, [])) == 1
                   for v in n.inputs[1:])

    roles: dict[str, str] = {}
    for n in g.nodes:
        if n.op != "linear" or n.out.name in roles or not own_weights(n):
            continue
        rows, todo, seen, ok = [], [n.out.name], set(), True
        while todo and ok:
            v = todo.pop()
            for u in users.get(v, []):
                if u.out.name in seen:
                    continue
                seen.add(u.out.name)
                cat = MIR_OPS[u.op].category if u.op in MIR_OPS else ""
                if (u.op == "linear" and u.inputs[0] == v and own_weights(u)
                        and roles.get(u.out.name, ROW) == ROW):
                    rows.append(u)
                elif u.op in splittable or cat in ("unary", "binary", "cast", "select",
                                                     "compare"):
                    todo.append(u.out.name)
                else:
                    ok = False
                    break
            if v in g.outputs:
                ok = False
        if ok and rows:
            roles[n.out.name] = COLUMN
            roles.update({r.out.name: ROW for r in rows})
    column = tuple(producers[k].inputs[1] for k, r in roles.items() if r == COLUMN)
    row = tuple(producers[k].inputs[1] for k, r in roles.items() if r == ROW)
    return TensorParallelPlan(column=column, row=row)


@dataclass
class RankProgram:
    """One rank's program: its HIR graph, and how the caller shards the graph inputs.

    ``input_axes[name]`` is the axis an input is split along (None: passed whole);
    ``collectives`` lists the inserted collectives as (value, op, bytes per rank)."""

    graph: Graph
    rank: int
    ranks: int
    input_axes: dict[str, int | None]
    collectives: list[tuple[str, str, int]] = field(default_factory=list)

    source: str = ""  # "@name sha256:... (input types)" of the graph before partitioning
    kind: str = "tensor parallel"  # or "data parallel": how the explorer's view names it

    def check_ranks(self, comm: Any = None) -> None:
        """RLX-N004 on every rank unless all ranks partitioned the same graph (its printed
        IR's hash and input types) for the same rank count; the error names both sides.
        Call it once at start, before the first step."""
        from rlx_core.distributed.communicator import init

        (init() if comm is None else comm).check_same(
            "the program", f"{self.source} on {self.ranks} ranks")

    def local(self, name: str, array: Any) -> Any:
        """This rank's part of the whole array for input ``name``."""
        axis = self.input_axes.get(name)
        return array if axis is None else shard_array(array, axis, self.rank, self.ranks)

    def local_inputs(self, *arrays: Any) -> list[Any]:
        """This rank's arguments, from the single-process ones (in graph input order)."""
        return [self.local(v.name, a) for v, a in zip(self.graph.inputs, arrays, strict=True)]


def shard_array(array: Any, axis: int, rank: int, ranks: int) -> Any:
    """Contiguous chunk ``rank`` of ``ranks`` along ``axis`` (a C-contiguous copy)."""
    import numpy as np

    size = array.shape[axis]
    if size % ranks:
        raise ShardingError(f"axis {axis} of an array of shape {list(array.shape)} does not "
                            f"split over {ranks} ranks", hint=f"use sizes divisible by {ranks}")
    k = size // ranks
    index = [slice(None)] * array.ndim
    index[axis] = slice(rank * k, (rank + 1) * k)
    return np.ascontiguousarray(array[tuple(index)])


class _Partitioner:
    def __init__(self, g: Graph, plan: TensorParallelPlan, rank: int, ranks: int):
        self.g, self.plan, self.rank, self.ranks = g, plan, rank, ranks
        self.values = g.values()
        self.producers = g.producers()
        self.b = Builder(NameGen(self.values))
        self.state: dict[str, int | None] = {}  # value -> sharded axis (None: replicated)
        self.new: dict[str, Value] = {}  # original name -> value in the rank's graph
        self.weight_axes: dict[str, int] = {}  # weight/bias value -> axis it is split along
        self.replicated: dict[str, Value] = {}
        self.collectives: list[tuple[str, str, int]] = []

    # ---- the plan ----------------------------------------------------------------------

    def roles(self) -> dict[str, str]:
        roles: dict[str, str] = {}
        users = self.g.users()
        for n in self.g.nodes:
            if n.op != "linear":
                continue
            w = n.inputs[1]
            role = self.plan.role((w, n.loc.scope))
            if role is None:
                continue
            roles[n.out.name] = role
            shard = [(w, 0 if role == COLUMN else 1)]
            if role == COLUMN and len(n.inputs) > 2:
                shard.append((n.inputs[2], 0))
            for v, axis in shard:
                if not _leaf_like(self.producers.get(v)) or len(users.get(v, [])) != 1:
                    raise ShardingError(
                        f"{role}-parallel linear %{n.out.name} ({n.loc.where}): its operand "
                        f"%{v} must be a parameter, input or constant used by this layer alone",
                        hint="give each sharded layer its own weight and bias")
                size = self.values[v].type.shape[axis]
                if size % self.ranks:
                    raise ShardingError(
                        f"{role}-parallel linear %{n.out.name}: axis {axis} of %{v} "
                        f"{self.values[v].type} does not split over {self.ranks} ranks",
                        hint=f"use a layer width divisible by {self.ranks}")
                self.weight_axes[v] = axis
        if not roles:
            raise ShardingError(f"the plan {self.plan} matches no linear layer of @{self.g.name}",
                                hint="patterns match a weight's name or a layer's block scope")
        return roles

    # ---- the pass ----------------------------------------------------------------------

    def run(self) -> RankProgram:
        roles = self.roles()
        inputs = [self._leaf(v, ValueKind.INPUT) for v in self.g.inputs]
        params = [self._leaf(v, ValueKind.PARAM) for v in self.g.params]
        for n in self.g.nodes:
            self._node(n, roles.get(n.out.name))
        for o in self.g.outputs:
            if self.state.get(o) is not None:
                raise ShardingError(f"output %{o} of @{self.g.name} is still sharded",
                                    hint="end every column-parallel layer in a row-parallel "
                                         "one before the output")
        data = {p.name: shard_array(self.g.param_data[p.name], self.weight_axes[p.name],
                                    self.rank, self.ranks)
                if p.name in self.weight_axes else self.g.param_data.get(p.name)
                for p in self.g.params if p.name in self.g.param_data}
        graph = Graph(f"{self.g.name}_tp{self.rank}of{self.ranks}", self.g.level, tuple(inputs),
                      tuple(params), tuple(self.b.nodes),
                      tuple(self.new[o].name for o in self.g.outputs), param_data=data)
        axes = {v.name: self.weight_axes.get(v.name) for v in self.g.inputs}
        return RankProgram(graph, self.rank, self.ranks, axes, self.collectives)

    def _leaf(self, v: Value, kind: ValueKind) -> Value:
        axis = self.weight_axes.get(v.name)
        self.state[v.name] = None  # weights are local whole arrays: replicated in effect
        if axis is None:
            self.new[v.name] = v
            return v
        shape = list(v.type.shape)
        shape[axis] //= self.ranks
        local = Value(v.name, TensorType(v.type.dtype, tuple(shape)), kind)
        self.new[v.name] = local
        return local

    def _emit(self, n: Node, ins: list[Value], attrs: dict[str, Any], axis: int | None) -> None:
        """Re-emit ``n`` under its own name with the rank-local operands."""
        full, t = infer_type(n.op, [v.type for v in ins], attrs)
        out = Value(n.out.name, t)
        self.b.add_node(Node(out, n.op, tuple(v.name for v in ins), freeze_attrs(full), n.loc))
        self.new[n.out.name] = out
        self.state[n.out.name] = axis

    def _collective(self, op: str, x: Value, attrs: dict[str, Any], n: Node) -> Value:
        out = self.b.emit(op, [x], {**attrs, "ranks": self.ranks}, loc=n.loc)
        self.collectives.append((out.name, op, out.type.nbytes))
        return out

    def _node(self, n: Node, role: str | None) -> None:
        ins = [self.new[i] for i in n.inputs]
        axes = [self.state[i] for i in n.inputs]
        attrs = dict(n.attrs)
        if role == COLUMN:
            if axes[0] is not None:
                self._refuse(n, "column-parallel linear takes a replicated input")
            x = n.inputs[0]
            if x not in self.replicated:  # one f per input: q, k and v share it
                self.replicated[x] = self._collective("replicate", ins[0], {}, n)
            self._emit(n, [self.replicated[x], *ins[1:]], attrs, n.out.type.rank - 1)
        elif role == ROW:
            if axes[0] != n.out.type.rank - 1:
                self._refuse(n, "row-parallel linear takes an input sharded on its last axis")
            partial = self.b.emit("linear", ins[:2], {}, loc=n.loc)
            total = self._collective("all_reduce", partial, {"op": "sum"}, n)
            if len(ins) > 2:
                t = total.type
                bias = self.b.emit("broadcast_in_dim", [ins[2]],
                                   {"shape": t.shape, "dims": (t.rank - 1,)}, loc=n.loc)
                self._emit(Node(n.out, "add", (), n.attrs, n.loc), [total, bias], {}, None)
            else:
                self.new[n.out.name], self.state[n.out.name] = total, None
        elif n.out.name in self.weight_axes:  # a small weight or bias inlined as a constant
            import numpy as np

            t = n.out.type
            whole = np.array(n.attr("value"), dtype=np.float64).reshape(t.shape)
            part = shard_array(whole, self.weight_axes[n.out.name], self.rank, self.ranks)
            self._emit(n, [], {**attrs, "value": tuple(part.ravel().tolist()),
                               "shape": part.shape}, None)
        elif all(a is None for a in axes):
            self._emit(n, ins, attrs, None)
        else:
            self._sharded(n, ins, axes, attrs)

    def _sharded(self, n: Node, ins: list[Value], axes: list[int | None],
                 attrs: dict[str, Any]) -> None:
        op = n.op
        cat = MIR_OPS[op].category if op in MIR_OPS else ""
        if cat in ("unary", "cast") or op in _ELEMENTWISE_HIR:
            self._emit(n, ins, attrs, axes[0])
        elif cat in ("binary", "compare", "select"):
            axis = next(a for a in axes if a is not None)
            shape = next(v.type.shape for v, a in zip(ins, axes, strict=True) if a is not None)
            local = [v if a == axis else self._local_splat(n, name, shape)
                     for v, a, name in zip(ins, axes, n.inputs, strict=True)]
            self._emit(n, local, attrs, axis)
        elif op == "reshape":
            axis = self._reshape_axis(n, axes[0])
            shape = list(n.attr("shape"))
            shape[axis] //= self.ranks
            self._emit(n, ins, {**attrs, "shape": tuple(shape)}, axis)
        elif op == "transpose":
            self._emit(n, ins, attrs, list(n.attr("perm")).index(axes[0]))
        elif op == "attention":
            heads = 1 if n.attr("layout") == "bhsd" else 2
            if axes[:3] != [heads] * 3 or any(a is not None for a in axes[3:]):
                self._refuse(n, "attention needs q, k and v split along their heads axis")
            self._emit(n, ins, attrs, heads)
        else:
            self._refuse(n, f"{op} cannot take a sharded operand")

    def _local_splat(self, n: Node, name: str, shape: tuple[int, ...]) -> Value:
        """A replicated operand of a sharded elementwise op: a broadcast scalar, rebuilt at
        the local shape (relu's zero, a scale)."""
        p = self.producers.get(name)
        if p is not None and p.op == "broadcast_in_dim" and not p.attr("dims"):
            return self.b.emit("broadcast_in_dim", [self.new[p.inputs[0]]],
                               {"shape": shape, "dims": ()}, loc=p.loc)
        if p is not None and p.op == "constant" and not isinstance(p.attr("value"), tuple):
            return self.b.emit("constant", [], {**dict(p.attrs), "shape": shape}, loc=p.loc)
        self._refuse(n, f"mixes a sharded operand with the replicated %{name}")
        raise AssertionError  # _refuse raised

    def _reshape_axis(self, n: Node, axis: int | None) -> int:
        """The output axis that carries input axis ``axis``'s sharding: the axis starting at
        the same flat offset, when the sharded axis is split or merged there."""
        src, dst = self.values[n.inputs[0]].type.shape, tuple(n.attr("shape"))
        before = math.prod(src[:axis])
        for j in range(len(dst)):
            if math.prod(dst[:j]) == before and dst[j] % self.ranks == 0 and (
                    src[axis] % dst[j] == 0 or dst[j] % src[axis] == 0):
                return j
        self._refuse(n, f"reshape {list(src)} -> {list(dst)} moves the sharded axis {axis}")
        raise AssertionError

    def _refuse(self, n: Node, why: str) -> None:
        raise ShardingError(f"tensor-parallel partition of @{self.g.name}: %{n.out.name} = "
                            f"{n.op} at {n.loc.where}: {why}",
                            hint="change the plan so sharded values only flow through "
                                 "elementwise ops, reshape, transpose and attention between a "
                                 "column-parallel and a row-parallel linear")


def with_gradients(g: Graph, wrt: Sequence[str]) -> Graph:
    """``g`` (one scalar output: a loss) with the gradients w.r.t. the values ``wrt`` as
    further outputs, differentiated through the inserted collectives' VJP rules."""
    from dataclasses import replace

    from rlx_core.autodiff.reverse import backward, to_mir

    mir = to_mir(g)
    full, grads = backward(mir, list(wrt), mir.outputs[0])
    return replace(full, outputs=(mir.outputs[0], *grads))


def partition(g: Graph, plan: TensorParallelPlan, rank: int, ranks: int) -> RankProgram:
    """Rank ``rank``'s program of HIR graph ``g`` split ``ranks`` ways by ``plan``."""
    if not (isinstance(ranks, int) and ranks >= 1 and 0 <= rank < ranks):
        raise ShardingError(f"rank {rank} of {ranks} is not a valid position",
                            hint="pass 0 <= rank < ranks")
    prog = _Partitioner(g, plan, rank, ranks).run()
    prog.source = graph_signature(g)
    return prog


def graph_signature(g: Graph) -> str:
    """``@name sha256:<16 hex> (input types)``: what ranks compare to know they run the same
    program (the hash is of the printed IR, which holds every op, shape, constant and scope,
    printed without source ``file:line``: a rank whose script has one more line above the model
    runs the same program, as the build caches key it, docs/targets.md "Build caches")."""
    import hashlib

    from rlx_core.ir.printer import print_graph

    digest = hashlib.sha256(print_graph(g, locations=False).encode()).hexdigest()[:16]
    types = ", ".join(str(v.type) for v in g.inputs)
    return f"@{g.name} sha256:{digest} ({types})"


__all__ = ["TensorParallelPlan", "RankProgram", "auto_plan", "bert_plan", "partition", "shard_array",
           "with_gradients"]
