"""A GPU plan: the buffers, rendered kernels and constants of one LIR graph, for any GPU API.

``make_plan`` renders every kernel in a dialect, lays out one device buffer per value a kernel
reads or writes, and checks kernels against the device's limits. Runtimes (runtime.py and the
WebGPU ones) only move bytes and launch what the plan says.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rlx_core.errors import RlxError
from rlx_core.ir.graph import Graph, Level, TensorType
from rlx_core.targets.gpu_common.dialect import Dialect
from rlx_core.targets.gpu_common.expr import STORAGE
from rlx_core.targets.gpu_common.host_arrays import buffer_bytes, check_indices, to_storage
from rlx_core.targets.gpu_common.kernels import Derived, GpuKernel, Guard, render_graph


class DeviceLimitError(RlxError):
    """A kernel needs more than the device allows (storage buffers, buffer size)."""

    code = "RLX-L005"


@dataclass(frozen=True)
class AdapterInfo:
    """What the live device reported: its name, optional features and the limits we use."""

    name: str
    features: tuple[str, ...]
    max_storage_buffers: int
    max_buffer_bytes: int
    max_workgroup_size: int
    backend: str = ""


@dataclass(frozen=True)
class BufferSpec:
    """One GPU buffer: the value it holds, its role and its size in storage bytes."""

    name: str
    type: TensorType
    # input | param | const | temp | output; host: a parameter only derived buffers are made
    # from (prepacked int8 weights): its data stays on the host, no device buffer
    role: str
    nbytes: int


@dataclass(frozen=True)
class GpuPlan:
    """Everything a runtime needs to run one LIR graph: buffers, kernels, bindings."""

    graph: str
    buffers: tuple[BufferSpec, ...]
    kernels: tuple[GpuKernel, ...]
    inputs: tuple[str, ...]
    params: tuple[str, ...]
    outputs: tuple[str, ...]
    constants: dict[str, bytes]
    # (input, axis size, op): indices a caller passes are range-checked on the host, since a
    # kernel cannot raise (computed indices are clamped inside the kernel instead)
    index_checks: tuple[tuple[str, int, str], ...] = ()
    # scratch buffers a kernel flags when its result is invalid: read back and checked per call
    guards: tuple[Guard, ...] = ()
    # buffers the host computes from a parameter whenever that is uploaded (prepacked weights)
    derived: tuple[tuple[str, Derived], ...] = ()

    @property
    def device_buffers(self) -> tuple[BufferSpec, ...]:
        """The buffers a runtime allocates on the device (all but host-only parameters)."""
        return tuple(b for b in self.buffers if b.role != "host")

    def derive(self, uploads: list[tuple[str, bytes]]) -> list[tuple[str, bytes]]:
        """What a runtime writes for the parameters in ``uploads`` (name, storage bytes): the
        device ones, then the buffers derived from them (host-only parameters dropped)."""
        got = dict(uploads)
        host = {b.name for b in self.buffers if b.role == "host"}
        return [*((n, b) for n, b in uploads if n not in host),
                *((name, d.fn(got[d.source])) for name, d in self.derived if d.source in got)]

    @property
    def readback(self) -> tuple[str, ...]:
        """The buffers a call downloads: the outputs, then the guards' buffers."""
        return tuple(dict.fromkeys([*self.outputs, *(g.buffer for g in self.guards)]))

    def check_guards(self, raw: dict[str, bytes]) -> None:
        """Raise the typed error of the first guard a kernel set in this call."""
        for g in self.guards:
            g(raw[g.buffer])

    def check_inputs(self, inputs: Sequence[Any]) -> None:
        by_name = dict(zip(self.inputs, inputs, strict=True))
        for name, size, op in self.index_checks:
            check_indices(by_name[name], size, op, f"input %{name}")

    def buffer(self, name: str) -> BufferSpec:
        for b in self.buffers:
            if b.name == name:
                return b
        raise KeyError(name)


def make_plan(lir: Graph, dialect: Dialect, adapter: AdapterInfo | None = None,
              target: str = "webgpu") -> GpuPlan:
    """Render ``lir`` in ``dialect`` and lay out its buffers; check kernels against ``adapter``."""
    if lir.level is not Level.LIR or (lir.nodes and not lir.kernels):
        raise RlxError(f"the {target} target builds LIR with kernels, got {lir.level.value} "
                       f"@{lir.name}", hint="run Fuse (and PlanArena) before build")
    kernels = render_graph(dialect, lir)
    values = lir.values()
    roles: dict[str, str] = {v.name: "input" for v in lir.inputs}
    roles.update({v.name: "param" for v in lir.params})
    constants: dict[str, bytes] = {}
    derived: list[tuple[str, Derived]] = []
    scratch = {name: t for k in kernels for name, t in k.scratch}
    for k in kernels:
        if k.derived is not None:  # from a constant: now; from a parameter: when uploaded
            o, src = k.writes[0], k.derived.source
            roles[o] = "const"
            if src in constants:
                constants[o] = k.derived.fn(constants[src])
            else:
                derived.append((o, k.derived))
            continue
        for o in k.writes:
            roles.setdefault(o, "const" if k.constant is not None else "temp")
            if k.constant is not None:  # a graph constant, or a table a kernel reads
                t = values[o].type if o in values else scratch[o]
                constants[o] = to_storage(list(k.constant), _flat(t))
    for o in lir.outputs:
        if roles.get(o) == "temp":
            roles[o] = "output"
    # a parameter no dispatched kernel reads, only packed from: kept on the host
    read = {v for k in kernels if k.constant is None for v in k.reads}
    for _, d in derived:
        if roles.get(d.source) == "param" and d.source not in read and \
                d.source not in lir.outputs:
            roles[d.source] = "host"
    used = dict.fromkeys([*roles, *lir.outputs])
    buffers = []
    for name in used:
        t = values[name].type if name in values else scratch[name]
        if t.dtype.name not in STORAGE:
            raise RlxError(f"@{lir.name}: %{name} is {t}; {target} buffers have no "
                           f"{t.dtype.name}", hint=f"cast to f32/i32 before compiling for "
                           f"{target}", code="RLX-L002")
        buffers.append(BufferSpec(name, t, roles.get(name, "output"), buffer_bytes(t)))
    if adapter is not None:
        check_limits(kernels, [b for b in buffers if b.role != "host"], adapter)
    inputs = {v.name for v in lir.inputs}
    checks = tuple((n.inputs[1], values[n.inputs[0]].type.shape[n.attr("axis")], n.op)
                   for n in lir.nodes if n.op in ("gather", "scatter_add") and
                   n.inputs[1] in inputs)
    return GpuPlan(lir.name, tuple(buffers), kernels, tuple(v.name for v in lir.inputs),
                   tuple(v.name for v in lir.params), tuple(lir.outputs), constants,
                   tuple(dict.fromkeys(checks)),
                   tuple(k.guard for k in kernels if k.guard is not None), tuple(derived))


def _flat(t: TensorType) -> TensorType:
    return TensorType(t.dtype, (t.size,))


def check_limits(kernels: tuple[GpuKernel, ...], buffers: list[BufferSpec],
                 adapter: AdapterInfo) -> None:
    for k in kernels:
        n = len(k.reads) + len(k.writes)
        if k.constant is None and n > adapter.max_storage_buffers:
            raise DeviceLimitError(
                f"kernel {k.name} binds {n} storage buffers; {adapter.name} allows "
                f"{adapter.max_storage_buffers} per shader stage",
                hint="concatenate operands, or compile for target cpu")
    for b in buffers:
        if b.nbytes > adapter.max_buffer_bytes:
            raise DeviceLimitError(
                f"%{b.name} needs a {b.nbytes}-byte buffer; {adapter.name} allows "
                f"{adapter.max_buffer_bytes}", hint="use a smaller batch, or target cpu")
