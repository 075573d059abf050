"""The WebGPU device on gpu_common's ``Device`` interface, shared by both WebGPU bindings.

Native (wgpu-py) and browser (``navigator.gpu`` under Pyodide) WebGPU differ only in how a call
is spelled (snake_case Python vs camelCase JS objects) and in how a mapped buffer is read
(synchronously vs awaited). Everything else lives here once: buffers, the pipeline cache, bind
groups, and the encoder. Launches are recorded, not submitted; the next download encodes them
into one compute pass, copies the buffer into its staging buffer in the same command buffer,
submits once and maps the staging buffer back. ``GpuProgram`` (gpu_common.runtime) runs plans
on it exactly as on OpenCL, OpenGL or Vulkan.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Protocol

from rlx_core.errors import RlxError
from rlx_core.targets.gpu_common.kernels import GpuKernel
from rlx_core.targets.gpu_common.plan import AdapterInfo
from rlx_core.targets.gpu_common.runtime import source_key


class WgpuError(RlxError):
    """wgpu rejected a shader, pipeline or submission (a renderer bug or a device problem)."""

    code = "RLX-K002"


class WebGpuApi(Protocol):
    """The calls one WebGPU binding makes (each a line or two of that binding's spelling)."""

    def storage_buffer(self, nbytes: int) -> Any: ...

    def staging_buffer(self, nbytes: int) -> Any:
        """A mappable buffer the device copies results into."""
        ...

    def write(self, buf: Any, data: bytes) -> None: ...

    def pipeline(self, source: str) -> Any:
        """The compute pipeline of one WGSL source (entry point ``main``, layout ``auto``)."""
        ...

    def bind_group(self, pipe: Any, entries: list[tuple[Any, int]]) -> Any:
        """Group 0 of ``pipe`` binding (buffer, size) to slots 0, 1, ..."""
        ...

    def encoder(self) -> Any: ...

    def begin_pass(self, enc: Any) -> Any: ...

    def dispatch(self, cpass: Any, pipe: Any, group: Any, wg: tuple[int, int, int]) -> None: ...

    def end_pass(self, cpass: Any) -> None: ...

    def copy(self, enc: Any, src: Any, dst: Any, nbytes: int) -> None: ...

    def submit(self, enc: Any) -> None: ...

    def read(self, stage: Any, nbytes: int) -> bytes:
        """Map ``stage``, copy its first ``nbytes`` out, unmap (blocking; native only)."""
        ...

    async def read_async(self, stage: Any, nbytes: int) -> bytes: ...


@dataclass(eq=False)
class WgBuffer:
    """A storage buffer, its staging buffer (made on its first download) and the bind groups
    whose first binding it is (so they live exactly as long as the program's buffers)."""

    handle: Any
    nbytes: int
    staging: Any = None
    groups: dict[tuple[int, ...], tuple[Any, list[WgBuffer]]] = field(default_factory=dict)


class WebGpuDevice:
    """One WebGPU device (gpu_common.runtime.Device) over a binding's ``WebGpuApi``."""

    def __init__(self, api: WebGpuApi, info: AdapterInfo) -> None:
        self.api, self.info = api, info
        # one device and queue per process, buffers shared by a program's calls: device work
        # is serialised (reentrant: a call may compile a pipeline while holding it)
        self.lock = threading.RLock()
        self.pipelines: dict[str, Any] = {}
        self.pending: list[tuple[Any, Any, tuple[int, int, int]]] = []

    def alloc(self, nbytes: int) -> WgBuffer:
        return WgBuffer(self.api.storage_buffer(nbytes), nbytes)

    def upload(self, buf: WgBuffer, data: bytes) -> None:
        # a queue write lands before the next submit: submit what was recorded first, which
        # may still read the old contents
        if self.pending:
            self._submit(None)
        self.api.write(buf.handle, data)

    def pipeline(self, source: str) -> Any:
        """The compute pipeline of one WGSL source (compiled once per process)."""
        key = source_key(source)  # the same kernel in another layer shares one pipeline
        with self.lock:
            if key not in self.pipelines:
                try:
                    self.pipelines[key] = self.api.pipeline(source)
                except Exception as err:
                    raise WgpuError(f"wgpu rejected a generated shader: {err}\n{source}",
                                    hint="a renderer bug: report it with this source") from None
            return self.pipelines[key]

    def compile(self, kernels: list[GpuKernel]) -> list[Any]:
        return [self.pipeline(k.source) for k in kernels]

    def launch(self, handle: Any, kernel: GpuKernel, buffers: list[WgBuffer]) -> None:
        key = (id(handle), *(id(b) for b in buffers))
        first = buffers[0]  # every kernel binds at least its output
        hit = first.groups.get(key)
        if hit is None:  # made once per (pipeline, buffers): the first call of a program
            group = self.api.bind_group(handle, [(b.handle, b.nbytes) for b in buffers])
            hit = first.groups[key] = (group, buffers)
        self.pending.append((handle, hit[0], kernel.workgroups))

    def _submit(self, buf: WgBuffer | None) -> Any:
        """One command buffer: the recorded launches in one compute pass, then ``buf``'s copy
        into its staging buffer; submitted once. Returns the staging buffer (None without)."""
        api = self.api
        enc = api.encoder()
        if self.pending:
            cpass = api.begin_pass(enc)
            for pipe, group, wg in self.pending:
                api.dispatch(cpass, pipe, group, wg)
            api.end_pass(cpass)
            self.pending = []
        if buf is not None:
            if buf.staging is None:
                buf.staging = api.staging_buffer(buf.nbytes)
            api.copy(enc, buf.handle, buf.staging, buf.nbytes)
        api.submit(enc)
        return None if buf is None else buf.staging

    def download(self, buf: WgBuffer, nbytes: int) -> bytes:
        return self.api.read(self._submit(buf), nbytes)

    async def download_async(self, buf: WgBuffer, nbytes: int) -> bytes:
        """``download`` for a binding whose mapping must be awaited (the browser)."""
        return await self.api.read_async(self._submit(buf), nbytes)
