"""Run LIR kernel by kernel through one real arena, and interpret any graph node by node.

The arena is one ``np.uint8`` buffer of ``plan.peak_bytes``. Every kernel output with a slot is
stored into a typed view at its offset in the dtype's storage form (bf16 as its 16 bits, packed
i4 two to a byte), and every later read decodes it from there again, so a wrong plan shows up
as a wrong answer. Graph outputs go to fresh arrays; values inside a kernel are temporaries.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np

from rlx_core.errors import ArgumentError, VerifyError
from rlx_core.ir import dtypes as dt
from rlx_core.ir.graph import Graph, Level, TensorType, Value
from rlx_core.ir.ops import COLLECTIVE_OPS
from rlx_core.passes.plan_arena import deferred_waits
from rlx_core.targets.base import Program
from rlx_core.targets.host_args import checked_shape
from rlx_core.targets.numpy_ref.semantics import convert, eval_op, finish, host_dtype

# ---- storage form of a value inside the arena -------------------------------------------------


def store(buf: np.ndarray, offset: int, value: np.ndarray, t: TensorType) -> None:
    """Write ``value`` (host form of ``t``) into ``buf`` at ``offset`` in ``t``'s storage form."""
    raw = buf[offset:offset + t.nbytes]
    if t.dtype == dt.bf16:
        # values are already rounded to bf16, so keeping the top 16 bits is exact
        bits = (np.asarray(value, np.float32, order="C").view(np.uint32) >> 16).astype(np.uint16)
        raw.view(np.uint16)[:] = bits.reshape(-1)
    elif t.dtype == dt.i4:
        nib = (value.reshape(-1).astype(np.int16) & 0xF).astype(np.uint8)
        if nib.size % 2:
            nib = np.concatenate([nib, np.zeros(1, np.uint8)])
        raw[:] = nib[0::2] | (nib[1::2] << 4)  # element 2i in the low nibble of byte i
    else:
        raw.view(host_dtype(t.dtype))[:] = value.reshape(-1)


def load(buf: np.ndarray, offset: int, t: TensorType) -> np.ndarray:
    """Read a value of type ``t`` back from ``buf`` (a view where the storage form allows)."""
    raw = buf[offset:offset + t.nbytes]
    if t.dtype == dt.bf16:
        wide = raw.view(np.uint16).astype(np.uint32) << 16
        return wide.view(np.float32).reshape(t.shape)
    if t.dtype == dt.i4:
        nib = np.stack([raw & 0xF, raw >> 4], axis=1).reshape(-1)[:t.size].astype(np.int8)
        return np.where(nib >= 8, nib - 16, nib).astype(np.int8).reshape(t.shape)
    return raw.view(host_dtype(t.dtype)).reshape(t.shape)


# ---- arguments ------------------------------------------------------------------------------


def to_host(arg: Any, v: Value, what: str) -> np.ndarray:
    """One argument in the host form of ``v``'s type, or ArgumentError."""
    t = v.type
    arr = checked_shape(arg, t, f"{what} %{v.name}")
    if t.dtype == dt.i4 and arr.size and (arr.min() < -8 or arr.max() > 7):
        raise ArgumentError(f"{what} %{v.name} is i4 but holds values outside [-8, 7]",
                            hint="quantize to 4 bits before passing it")
    if arr.dtype != host_dtype(t.dtype) or t.dtype == dt.bf16:
        arr = convert(arr, t.dtype)
    return arr


def bind(g: Graph, inputs: Sequence[Any], params: dict[str, Any]) -> dict[str, np.ndarray]:
    """Graph inputs (in order) and parameters (by name, else ``g.param_data``) by value name."""
    if len(inputs) != len(g.inputs):
        raise ArgumentError(f"@{g.name} takes {len(g.inputs)} input(s), got {len(inputs)}")
    env = {v.name: to_host(x, v, "input") for v, x in zip(g.inputs, inputs, strict=True)}
    for p in g.params:
        data = params.get(p.name) if params else None
        if data is None:
            data = g.param_data.get(p.name)
        if data is None:
            raise ArgumentError(f"@{g.name}: no data for parameter %{p.name}",
                                hint="pass it in the params dict under its name")
        env[p.name] = to_host(data, p, "parameter")
    return env


def interpret(g: Graph, inputs: Sequence[Any], params: dict[str, Any] | None = None) -> list[np.ndarray]:
    """Evaluate ``g`` (any level) node by node with the reference semantics: the oracle."""
    env = bind(g, inputs, params or {})
    for n in g.nodes:
        env[n.name] = eval_op(n.op, n.a, [env[i] for i in n.inputs], n.type)
    return [np.array(env[o], copy=True) for o in g.outputs]


# ---- kernel-by-kernel execution ---------------------------------------------------------------


class ArenaRunner:
    """Executes one LIR graph; ``run`` may be called many times (the arena is per call)."""

    def __init__(self, lir: Graph):
        if lir.level is not Level.LIR or (lir.nodes and not lir.kernels):
            raise VerifyError(f"the numpy target builds LIR with kernels, got {lir.level.value} "
                              f"@{lir.name}", hint="run Fuse (and PlanArena) before build")
        self.g = lir
        self.types = {name: v.type for name, v in lir.values().items()}
        plan = lir.plan
        self.peak = plan.peak_bytes if plan is not None else 0
        self.offsets = {s.value: s.offset for s in plan.slots} if plan is not None else {}
        self.returned = set(lir.outputs)
        # per kernel: None, or a collective's fixed facts (read once, not per call)
        self.collective = [_CollectiveKernel(k.nodes[0], self.offsets, self.returned)
                           if self._collective(k) else None for k in lir.kernels]
        # an all-reduce with a result buffer is started at its kernel and completed before
        # the first kernel that reads it (the plan keeps its operand alive until then), so
        # the kernels in between (the rest of a backward pass) run while MPI reduces
        waits = deferred_waits(lir)
        for idx, c in enumerate(self.collective):
            if c is not None and idx in waits and (c.slot is not None or c.to_output):
                c.wait_at = waits[idx]
        # inputs whose host form is a plain array (not bf16 / i4): passed as they are when
        # they already are C-contiguous arrays of that shape and dtype (no conversion to do)
        self.plain_inputs = None if lir.params or any(
            v.type.dtype.name in ("bf16", "i4") for v in lir.inputs) else [
            (v.name, v.type.shape, np.dtype(host_dtype(v.type.dtype))) for v in lir.inputs]
        self.out_specs = {o: (self.types[o].shape, np.dtype(host_dtype(self.types[o].dtype)))
                          for o in lir.outputs}
        self.direct = _DirectCollective.of(lir, self.collective, self.plain_inputs,
                                           self._destinations)

    def run(self, inputs: Sequence[Any], params: dict[str, Any],
            outs: Sequence[np.ndarray | None] | None = None) -> list[np.ndarray]:
        """The graph outputs; ``outs`` (optional, one per output, None for a fresh array) are
        caller buffers the outputs are written into (and returned)."""
        if self.direct is not None and outs is not None and not params:
            done = self.direct(inputs, outs)
            if done is not None:
                return done
        env = self._bind_as_is(inputs, params)
        if env is None:
            env = bind(self.g, inputs, params)  # caller-owned values: inputs and parameters
        arena = np.zeros(self.peak, dtype=np.uint8) if self.peak else _NO_ARENA
        owned: dict[str, np.ndarray] = {}  # graph outputs, and every value when there is no plan
        dest = self._destinations(outs)
        fresh: set[str] = set()  # outputs already in their own new or caller buffer

        def read(name: str) -> np.ndarray:
            if name in self.offsets:
                return load(arena, self.offsets[name], self.types[name])
            return owned[name] if name in owned else env[name]

        inflight: list[tuple[int, Any]] = []  # (kernel to wait before, PendingReduce)
        for idx, (k, collective) in enumerate(zip(self.g.kernels, self.collective,
                                                  strict=True)):
            if inflight:
                inflight = _progress(inflight, idx)
            if collective is not None:
                pending = self._run_collective(collective, arena, read, owned, dest, fresh)
                if pending is not None:
                    inflight.append((collective.wait_at, pending))
                continue
            local: dict[str, np.ndarray] = {}
            for n in k.nodes:
                args = [local[i] if i in local else read(i) for i in n.inputs]
                local[n.name] = eval_op(n.op, n.a, args, n.type)
            for o in k.outputs:
                if o in self.offsets:
                    store(arena, self.offsets[o], local[o], self.types[o])
                else:
                    owned[o] = np.array(local[o], copy=True)  # never a view of an operand
        for _, pending in inflight:  # results no kernel reads: the graph returns them
            pending.wait()
        return self._results(read, dest, fresh)

    def _bind_as_is(self, inputs: Sequence[Any],
                    params: dict[str, Any]) -> dict[str, np.ndarray] | None:
        """The inputs by name when each is already its host form (what ``bind`` would pass
        through unchanged), else None; the per-call cost of a small program's arguments."""
        plain = self.plain_inputs
        if plain is None or params or len(inputs) != len(plain):
            return None
        env = {}
        for a, (name, shape, dtype) in zip(inputs, plain, strict=True):
            if not (type(a) is np.ndarray and a.shape == shape and a.dtype == dtype
                    and a.flags.c_contiguous):
                return None
            env[name] = a
        return env

    def _destinations(self, outs: Sequence[np.ndarray | None] | None) -> dict[str, np.ndarray]:
        if outs is None:
            return {}
        if len(outs) != len(self.g.outputs):
            raise ArgumentError(f"@{self.g.name} has {len(self.g.outputs)} output(s), got "
                                f"{len(outs)} out= buffer(s)")
        dest: dict[str, np.ndarray] = {}
        for name, buf in zip(self.g.outputs, outs, strict=True):
            if buf is None:
                continue
            shape, dtype = self.out_specs[name]
            if not (isinstance(buf, np.ndarray) and buf.shape == shape and buf.dtype == dtype
                    and buf.flags.c_contiguous and buf.flags.writeable):
                raise ArgumentError(
                    f"out= for output %{name} must be a writable C-contiguous "
                    f"{dtype.name}{list(shape)} array",
                    hint="allocate it with np.empty(shape, dtype) once and pass it every call")
            if name in dest:
                raise ArgumentError(f"output %{name} is returned twice; pass out= once")
            dest[name] = buf
        return dest

    def _results(self, read: Any, dest: dict[str, np.ndarray], fresh: set[str]) -> list[np.ndarray]:
        results = []
        for o in self.g.outputs:
            value = read(o)
            if o in fresh:  # already the output's own buffer: returned as it is, once
                fresh.discard(o)
                results.append(value)
            elif o in dest:
                np.copyto(dest[o], value)
                results.append(dest[o])
            else:
                results.append(np.array(value, copy=True))
        return results

    @staticmethod
    def _collective(k: Any) -> bool:
        return len(k.nodes) == 1 and k.nodes[0].op in COLLECTIVE_OPS

    def _run_collective(self, c: _CollectiveKernel, arena: np.ndarray, read: Any,
                        owned: dict[str, np.ndarray], dest: dict[str, np.ndarray],
                        fresh: set[str]) -> Any:
        """A collective kernel with its result buffer handed to MPI: the arena slot (when its
        storage form is the host form) or the output array, so nothing is copied after.
        A deferred all-reduce is only started: its PendingReduce is returned (else None)."""
        if c.slot is not None:
            target = load(arena, c.slot, c.type)  # a writable view of the slot
        elif c.to_output:
            target = dest.get(c.name)
            if target is None:
                target = np.empty(c.type.shape, c.host)
        else:
            target = None
        # imported on use: the communicator needs mpi4py, which plain numpy runs never load
        from rlx_core.distributed.collective_exec import run_collective, start_all_reduce

        args = [read(i) for i in c.inputs]
        if c.wait_at is not None:
            pending = start_all_reduce(c.attrs, args[0], target)
            if pending is not None:  # the result lands in target: read once it is waited
                if c.slot is None:
                    owned[c.name] = target
                    fresh.add(c.name)
                return pending
        value = run_collective(c.op, c.attrs, args, c.type, out=target)
        in_target = target is not None and _same_bytes(value, target)
        if not in_target:
            value = finish(value, c.type)
        if c.name in self.offsets:
            if not in_target:
                store(arena, self.offsets[c.name], value, c.type)
        elif in_target:
            owned[c.name] = target
            fresh.add(c.name)
        else:
            owned[c.name] = np.array(value, copy=True)
        return None


def _progress(inflight: list[tuple[int, Any]], idx: int) -> list[tuple[int, Any]]:
    """Complete the all-reduces due before kernel ``idx``; test the others, which is what
    lets MPI move them on (Open MPI progresses a non-blocking collective inside MPI calls)."""
    left = []
    for at, pending in inflight:
        if at <= idx:
            pending.wait()
        else:
            pending.test()
            left.append((at, pending))
    return left


class _DirectCollective:
    """A program that is one all-reduce of a graph input into its graph output (what a
    data-parallel gradient all-reduce compiles to), called with ``out=``: the input and the
    caller's buffer go to the communicator as they are, with no arena, no environment and no
    copy: the whole call is a few attribute checks and ``Communicator.all_reduce``. The
    ``out=`` buffer is checked once per buffer (weakly remembered), as the communicator
    checks its arrays. Anything else (another rank count, a buffer that fails the checks)
    returns None, and the general path runs and raises its typed error."""

    def __init__(self, c: _CollectiveKernel, index: int, shape: tuple[int, ...],
                 dtype: np.dtype, check_outs: Any):
        self.op, self.ranks = c.attrs["op"], c.attrs["ranks"]
        self.index, self.shape, self.dtype, self.check_outs = index, shape, dtype, check_outs
        self.checked: Any = None  # weak reference to the last out= buffer that passed
        self.active: Any = None  # collective_exec.active, imported on the first call

    @staticmethod
    def of(lir: Graph, collectives: list[_CollectiveKernel | None],
           plain: list[tuple[str, tuple[int, ...], np.dtype]] | None,
           check_outs: Any) -> _DirectCollective | None:
        if plain is None or len(collectives) != 1 or collectives[0] is None:
            return None
        c = collectives[0]
        names = [name for name, _, _ in plain]
        if not (c.op == "all_reduce" and c.to_output and list(lir.outputs) == [c.name]
                and len(c.inputs) == 1 and c.inputs[0] in names):
            return None
        index = names.index(c.inputs[0])
        return _DirectCollective(c, index, plain[index][1], plain[index][2], check_outs)

    def __call__(self, inputs: Sequence[Any], out: Any) -> list[np.ndarray] | None:
        """The outputs, or None where the general path must run. ``out``: the output's
        buffer, or a one-element tuple or list of it."""
        buf = out[0] if type(out) in (tuple, list) and len(out) == 1 else out
        x = inputs[self.index] if len(inputs) > self.index else None
        d = self.dtype  # compared by identity first: numpy's builtin dtypes are singletons
        if not (type(x) is np.ndarray and type(buf) is np.ndarray and x.shape == self.shape
                and (x.dtype is d or x.dtype == d) and x.flags.c_contiguous):
            return None
        if self.checked is None or self.checked() is not buf or buf.shape != self.shape \
                or (buf.dtype is not d and buf.dtype != d):
            self.check_outs([buf])  # ArgumentError for a wrong buffer, as the general path
            self.checked = weakref.ref(buf)
        if self.active is None:  # needs mpi4py, which plain numpy runs never load
            from rlx_core.distributed.collective_exec import active

            self.active = active
        comm = self.active()
        if comm.size != self.ranks:
            return None  # the general path raises RLX-N005
        return [comm.all_reduce(x, self.op, out=buf)]


class _CollectiveKernel:
    """What the runner needs of a one-node collective kernel, read from the node once: its
    result goes straight into an arena slot (``slot``) or an output array (``to_output``)
    when the value's storage form is its host form (not bf16 / i4)."""

    def __init__(self, n: Any, offsets: dict[str, int], returned: set[str]):
        self.name, self.op, self.attrs, self.type = n.name, n.op, n.a, n.type
        self.inputs = tuple(n.inputs)
        self.host = np.dtype(host_dtype(self.type.dtype))
        plain = self.type.dtype.name not in ("bf16", "i4")
        self.slot = offsets[self.name] if plain and self.name in offsets else None
        self.to_output = (plain and self.slot is None and self.name in returned
                          and self.op != "replicate")
        self.wait_at: int | None = None  # deferred: the kernel it completes before


_NO_ARENA = np.zeros(0, dtype=np.uint8)  # a program with no arena slots reads none


def _same_bytes(a: np.ndarray, b: np.ndarray) -> bool:
    if a is b:
        return True
    return (np.may_share_memory(a, b) and a.nbytes == b.nbytes
            and a.__array_interface__["data"][0] == b.__array_interface__["data"][0])


def build_program(lir: Graph) -> Program:
    """A Program running ``lir`` on the host through its arena plan."""
    runner = ArenaRunner(lir)
    info = {"kernels": len(lir.kernels), "arena_bytes": runner.peak,
            "naive_bytes": lir.plan.naive_bytes if lir.plan is not None else 0,
            # every node's result is a numpy array while its kernel runs (the memory budget)
            "materializes_nodes": True,
            # (kernel that starts an all-reduce, kernel it completes before): the overlap
            "deferred_collectives": [(i, c.wait_at) for i, c in enumerate(runner.collective)
                                     if c is not None and c.wait_at is not None]}
    return Program(run_fn=runner.run, sources={}, info=info, run_into_fn=runner.run,
                   direct_fn=runner.direct)
