"""The device-runtime interface every GPU API implements, and the one program runner over it.

A ``Device`` allocates buffers, uploads and downloads bytes, compiles a kernel source once and
launches it over a grid. ``GpuProgram`` runs a ``GpuPlan`` on any ``Device``: constants once,
parameters when a different params object is passed, inputs every call, every kernel in order,
then the outputs back. Calls are serialised per device (drivers' queues are not thread-safe).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Any, Protocol

from rlx_core.errors import ArgumentError
from rlx_core.targets.gpu_common.host_arrays import from_storage, to_storage
from rlx_core.targets.gpu_common.kernels import GpuKernel
from rlx_core.targets.gpu_common.plan import AdapterInfo, GpuPlan


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
        self.buffers = {b.name: dev.alloc(b.nbytes) for b in plan.buffers}
        for name, data in plan.constants.items():
            dev.upload(self.buffers[name], data)
        run = [k for k in plan.kernels if k.constant is None]
        self.steps = [(h, k, [self.buffers[v] for v in (*k.reads, *k.writes)])
                      for h, k in zip(dev.compile(run), run, strict=True)]
        self._params_key: tuple[int, ...] | None = None
        self.last_seconds = 0.0  # wall time of the last call's launches and downloads

    def _upload_params(self, params: dict[str, Any]) -> None:
        key, uploads = changed_params(self.plan, self.param_data, params, self._params_key)
        for name, data in uploads:
            self.dev.upload(self.buffers[name], data)
        self._params_key = key

    def run(self, inputs: Sequence[Any], params: dict[str, Any] | None = None) -> list[Any]:
        plan = self.plan
        check_call(plan, inputs)
        with self.dev.lock:
            self._upload_params(params or {})
            for name, arg in zip(plan.inputs, inputs, strict=True):
                spec = plan.buffer(name)
                self.dev.upload(self.buffers[name], to_storage(arg, spec.type, f"input %{name}"))
            t0 = time.perf_counter()
            for handle, k, bufs in self.steps:
                self.dev.launch(handle, k, bufs)
            results = {o: from_storage(self.dev.download(self.buffers[o], plan.buffer(o).nbytes),
                                       plan.buffer(o).type)
                       for o in dict.fromkeys(plan.outputs)}
            self.last_seconds = time.perf_counter() - t0
        return [results[o] for o in plan.outputs]


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
                   last_key: tuple[int, ...] | None,
                   ) -> tuple[tuple[int, ...], list[tuple[str, bytes]]]:
    """Which parameters a call must upload: the call's ``params`` over the bound data, keyed by
    identity so a repeated call with the same arrays uploads nothing. Returns the new key and
    (name, storage bytes) per parameter to write (empty when the key is unchanged)."""
    data = [params.get(p) if params and p in params else param_data.get(p)
            for p in plan.params]
    key = tuple(id(d) for d in data)
    if key == last_key:
        return key, []
    uploads = []
    for name, d in zip(plan.params, data, strict=True):
        if d is None:
            raise ArgumentError(f"@{plan.graph}: no data for parameter %{name}",
                                hint="pass it in the params dict under its name")
        uploads.append((name, to_storage(d, plan.buffer(name).type, f"parameter %{name}")))
    return key, uploads
