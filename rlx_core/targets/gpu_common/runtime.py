"""The device-runtime interface every GPU API implements, and the one program runner over it.

A ``Device`` allocates buffers, uploads and downloads bytes, compiles a kernel source once and
launches it over a grid. ``GpuProgram`` runs a ``GpuPlan`` on any ``Device``: constants once,
parameters when a different params object is passed, inputs every call, every kernel in order,
then the outputs back. Calls are serialised per device (drivers' queues are not thread-safe).
Every GPU API implements it: OpenCL, OpenGL, Vulkan, DirectX (via SPIR-V), and WebGPU natively
and in the browser (webgpu/device.py, whose readback the browser awaits: ``download_async``).
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from rlx_core.errors import ArgumentError
from rlx_core.targets.gpu_common.host_arrays import from_storage, to_storage
from rlx_core.targets.gpu_common.kernels import GpuKernel
from rlx_core.targets.gpu_common.plan import AdapterInfo, GpuPlan


@runtime_checkable
class Device(Protocol):
    """One open device of a GPU API (OpenCL, OpenGL, Vulkan, ...)."""

    info: AdapterInfo
    lock: threading.Lock

    def alloc(self, nbytes: int) -> Any:
        """A device buffer of ``nbytes`` bytes."""
        ...

    def upload(self, buf: Any, data: bytes) -> None:
        ...

    def download(self, buf: Any, nbytes: int) -> bytes:
        """The first ``nbytes`` of ``buf``, after every launch so far has finished."""
        ...

    def compile(self, kernels: list[GpuKernel]) -> list[Any]:
        """Launchable handles for the kernels' sources (cached per source by the device; an
        API may build them all in one compile)."""
        ...

    def launch(self, handle: Any, kernel: GpuKernel, buffers: list[Any]) -> None:
        """Enqueue ``kernel.workgroups`` workgroups of ``kernel.local`` invocations."""
        ...


class GpuProgram:
    """One plan loaded on one device: its buffers, compiled kernels and the per-call run."""

    def __init__(self, dev: Device, plan: GpuPlan, param_data: dict[str, Any]) -> None:
        self.dev, self.plan, self.param_data = dev, plan, dict(param_data)
        self.buffers = {b.name: dev.alloc(b.nbytes) for b in plan.device_buffers}
        free = getattr(dev, "free", None)
        if free is not None:  # an API that frees explicitly: when this program is released
            # (not at interpreter exit: the device may be gone by then, and the process frees)
            fin = weakref.finalize(self, _free, dev, list(self.buffers.values()))
            fin.atexit = False
        for name, data in plan.constants.items():
            dev.upload(self.buffers[name], data)
        run = [k for k in plan.kernels if k.constant is None]
        self.steps = [(h, k, [self.buffers[v] for v in (*k.reads, *k.writes)])
                      for h, k in zip(dev.compile(run), run, strict=True)]
        self._params_key: tuple[Any, ...] | None = None
        self.last_seconds = 0.0  # wall time of the last call's uploads, launches and downloads

    def _upload_params(self, params: dict[str, Any]) -> None:
        key, uploads = changed_params(self.plan, self.param_data, params, self._params_key)
        for name, data in uploads:
            self.dev.upload(self.buffers[name], data)
        self._params_key = key

    def host_inputs(self, inputs: Sequence[Any]) -> list[bytes]:
        """The call's inputs checked against the plan and as storage bytes (host work: no
        device lock needed)."""
        plan = self.plan
        check_call(plan, inputs)
        return [to_storage(arg, plan.buffer(name).type, f"input %{name}")
                for name, arg in zip(plan.inputs, inputs, strict=True)]

    def enqueue(self, data: list[bytes], params: dict[str, Any] | None = None) -> None:
        """Upload the inputs' bytes (and the parameters if changed), launch every kernel.
        The caller holds ``dev.lock`` and then downloads the outputs."""
        self._upload_params(params or {})
        for name, d in zip(self.plan.inputs, data, strict=True):
            self.dev.upload(self.buffers[name], d)
        for handle, k, bufs in self.steps:
            self.dev.launch(handle, k, bufs)

    def outputs(self, raw: dict[str, bytes]) -> list[Any]:
        """The call's results from each output buffer's downloaded bytes."""
        return [from_storage(raw[o], self.plan.buffer(o).type) for o in self.plan.outputs]

    def run(self, inputs: Sequence[Any], params: dict[str, Any] | None = None) -> list[Any]:
        plan = self.plan
        data = self.host_inputs(inputs)
        with self.dev.lock:
            t0 = time.perf_counter()
            self.enqueue(data, params)
            raw = {o: self.dev.download(self.buffers[o], plan.buffer(o).nbytes)
                   for o in plan.readback}
            self.last_seconds = time.perf_counter() - t0
        plan.check_guards(raw)
        return self.outputs(raw)


def _free(dev: Any, buffers: list[Any]) -> None:
    # not under dev.lock: a finalizer may run inside any allocation, also one made while this
    # thread holds it (the device serialises on its own reentrant lock)
    dev.free(buffers)


def source_key(source: str) -> str:
    """A kernel's source without comments: the same kernel in another layer (other value names
    in the comments) shares one build."""
    return "\n".join(line.split("//")[0].rstrip() for line in source.splitlines())


def check_call(plan: GpuPlan, inputs: Sequence[Any]) -> None:
    """The call's inputs against the plan: their count, then their shapes and dtypes."""
    if len(inputs) != len(plan.inputs):
        raise ArgumentError(f"@{plan.graph} takes {len(plan.inputs)} input(s), got "
                            f"{len(inputs)}")
    plan.check_inputs(inputs)


def changed_params(plan: GpuPlan, param_data: dict[str, Any], params: dict[str, Any],
                   last_key: tuple[Any, ...] | None,
                   ) -> tuple[tuple[Any, ...], list[tuple[str, bytes]]]:
    """Which parameters a call must upload: the call's ``params`` over the bound data, keyed by
    identity so a repeated call with the same arrays uploads nothing. Returns the new key and
    (name, storage bytes) per parameter to write, then per buffer derived from them (the
    prepacked int8 weights; empty when the key is unchanged)."""
    data = [params.get(p) if params and p in params else param_data.get(p)
            for p in plan.params]
    # the key holds the objects too: ids alone could match a later array that took a freed
    # one's id, and its new values would never be uploaded
    key = (*(id(d) for d in data), tuple(data))
    if key == last_key:
        return key, []
    uploads = []
    for name, d in zip(plan.params, data, strict=True):
        if d is None:
            raise ArgumentError(f"@{plan.graph}: no data for parameter %{name}",
                                hint="pass it in the params dict under its name")
        uploads.append((name, to_storage(d, plan.buffer(name).type, f"parameter %{name}")))
    return key, plan.derive(uploads)
