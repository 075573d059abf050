"""WebGpuTarget: LIR -> WGSL kernels -> a GPU plan run natively (wgpu-py) or in a browser.

``build`` renders every kernel (renderer.py), checks them against the device limits and makes a
``GpuPlan``: one GPU buffer per value a kernel reads or writes, the kernels in order, and the
host bytes of tuple constants. The runtime is chosen by where Python runs: under Pyodide the
browser runtime (``navigator.gpu``), elsewhere the native one (the ``wgpu`` package, which
finds Vulkan/Metal/D3D12, or Mesa's lavapipe on a machine without a GPU).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any, Sequence

from rlx_core.errors import RlxError, TargetUnavailableError
from rlx_core.ir import dtypes as dt
from rlx_core.ir.graph import Graph, Level, TensorType
from rlx_core.targets.base import Program, Verification
from rlx_core.targets.webgpu.host_arrays import buffer_bytes, check_indices, to_storage
from rlx_core.targets.webgpu.renderer import STORAGE, WgslKernel, render_graph


class DeviceLimitError(RlxError):
    """A kernel needs more than the adapter allows (storage buffers, buffer size)."""

    code = "RLX-L005"


@dataclass(frozen=True)
class AdapterInfo:
    """What the live adapter reported: its name, optional features and the limits we use."""

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
    role: str  # input | param | const | temp | output
    nbytes: int


@dataclass(frozen=True)
class GpuPlan:
    """Everything a runtime needs to run one LIR graph: buffers, kernels, bindings."""

    graph: str
    buffers: tuple[BufferSpec, ...]
    kernels: tuple[WgslKernel, ...]
    inputs: tuple[str, ...]
    params: tuple[str, ...]
    outputs: tuple[str, ...]
    constants: dict[str, bytes]
    # (input, axis size, op): indices a caller passes are range-checked on the host, since a
    # kernel cannot raise (computed indices are clamped inside the kernel instead)
    index_checks: tuple[tuple[str, int, str], ...] = ()

    def check_inputs(self, inputs: Sequence[Any]) -> None:
        by_name = dict(zip(self.inputs, inputs, strict=True))
        for name, size, op in self.index_checks:
            check_indices(by_name[name], size, op, f"input %{name}")

    def buffer(self, name: str) -> BufferSpec:
        for b in self.buffers:
            if b.name == name:
                return b
        raise KeyError(name)


def _in_pyodide() -> bool:
    return sys.platform == "emscripten"


def make_plan(lir: Graph, adapter: AdapterInfo | None = None) -> GpuPlan:
    """Render ``lir`` and lay out its buffers; check kernels against ``adapter``'s limits."""
    if lir.level is not Level.LIR or (lir.nodes and not lir.kernels):
        raise RlxError(f"the webgpu target builds LIR with kernels, got {lir.level.value} "
                       f"@{lir.name}", hint="run Fuse (and PlanArena) before build")
    kernels = render_graph(lir)
    values = lir.values()
    roles: dict[str, str] = {v.name: "input" for v in lir.inputs}
    roles.update({v.name: "param" for v in lir.params})
    constants: dict[str, bytes] = {}
    for k in kernels:
        for o in k.writes:
            roles.setdefault(o, "const" if k.constant is not None else "temp")
            if k.constant is not None:
                constants[o] = to_storage(list(k.constant), _flat(values[o].type))
    for o in lir.outputs:
        if roles.get(o) == "temp":
            roles[o] = "output"
    used = dict.fromkeys([*roles, *lir.outputs])
    buffers = []
    for name in used:
        t = values[name].type
        if t.dtype.name not in STORAGE:
            raise RlxError(f"@{lir.name}: %{name} is {t}; WebGPU buffers have no {t.dtype.name}",
                           hint="cast to f32/i32 before compiling for webgpu", code="RLX-L002")
        buffers.append(BufferSpec(name, t, roles.get(name, "output"), buffer_bytes(t)))
    if adapter is not None:
        _check_limits(kernels, buffers, adapter)
    inputs = {v.name for v in lir.inputs}
    checks = tuple((n.inputs[1], values[n.inputs[0]].type.shape[n.attr("axis")], n.op)
                   for n in lir.nodes if n.op in ("gather", "scatter_add") and
                   n.inputs[1] in inputs)
    return GpuPlan(lir.name, tuple(buffers), kernels, tuple(v.name for v in lir.inputs),
                   tuple(v.name for v in lir.params), tuple(lir.outputs), constants,
                   tuple(dict.fromkeys(checks)))


def _flat(t: TensorType) -> TensorType:
    return TensorType(t.dtype, (t.size,))


def _check_limits(kernels: tuple[WgslKernel, ...], buffers: list[BufferSpec],
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


class WebGpuTarget:
    """WGSL kernels on WebGPU: native through wgpu-py, or in a browser through Pyodide."""

    name = "webgpu"
    verification = Verification.EXECUTES
    description = ("WGSL compute shaders: native through wgpu (Vulkan; Mesa lavapipe without a "
                   "GPU), in the browser through navigator.gpu under Pyodide")

    def __init__(self) -> None:
        self._runtime: Any = None
        self._why = ""

    def runtime(self) -> Any:
        """The device runtime (native or browser), or raise TargetUnavailableError."""
        if self._runtime is None and not self._why:
            try:
                if _in_pyodide():
                    from rlx_core.targets.webgpu.runtime_browser import BrowserRuntime

                    self._runtime = BrowserRuntime.current()
                else:
                    from rlx_core.targets.webgpu.runtime_native import NativeRuntime

                    self._runtime = NativeRuntime.open()
            except TargetUnavailableError as err:
                self._why = err.message
            except ImportError as err:
                self._why = f"the wgpu package is not installed ({err})"
        if self._runtime is None:
            raise TargetUnavailableError(f"webgpu: {self._why}",
                                         hint="pip install 'rlx-explorer[webgpu]' and a Vulkan "
                                              "driver (Debian: mesa-vulkan-drivers)")
        return self._runtime

    def available(self) -> tuple[bool, str]:
        if _in_pyodide():  # the browser device is opened asynchronously: ask, do not open
            from rlx_core.targets.webgpu.runtime_browser import BrowserRuntime

            return BrowserRuntime.status()
        try:
            self.runtime()
        except TargetUnavailableError:
            return False, self._why
        return True, ""

    def adapter(self) -> AdapterInfo | None:
        try:
            return self.runtime().info
        except TargetUnavailableError:
            return None

    @property
    def caps(self) -> Any:
        """The WebGPU table with this adapter's features and limits (defaults without one)."""
        from rlx_core.targets.webgpu.caps import CAPS

        info = self.adapter()
        if info is None:
            return CAPS
        caps = CAPS.with_limits(max_storage_buffers=info.max_storage_buffers,
                                max_buffer_bytes=info.max_buffer_bytes,
                                max_workgroup_size=info.max_workgroup_size,
                                source=f"adapter {info.name}")
        if "shader-f16" in info.features:
            caps = caps.with_features("shader-f16")
        return caps

    def build(self, lir: Graph, options: Any = None) -> Program:
        rt = self.runtime()
        if any(v.type.dtype == dt.f16 for v in lir.values().values()) and \
                "shader-f16" not in rt.info.features:
            raise RlxError(f"@{lir.name} uses f16 but {rt.info.name} has no shader-f16",
                           hint="cast to f32", code="RLX-L003")
        plan = make_plan(lir, rt.info)
        loaded = rt.load(plan, lir.param_data)
        return Program(run_fn=loaded.run, sources={k.name: k.source for k in plan.kernels},
                       info={"adapter": rt.info.name, "backend": rt.info.backend,
                             "plan": plan, "runtime": loaded})

    def __repr__(self) -> str:
        return "WebGpuTarget()"
