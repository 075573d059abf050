"""Native WebGPU runtime on the ``wgpu`` package: one device per process, pipelines cached per
kernel source, one command submission per graph call.

A call writes the inputs into their buffers (``queue.write_buffer``), records every kernel's
dispatch into one compute pass, copies the outputs into mappable staging buffers in the same
command buffer, submits once and maps the staging buffers back. Parameters and tuple constants
are uploaded once per loaded program (again only when a different params object is passed).

Thread safety: a program's buffers are shared by its calls, and wgpu panics when a staging
buffer is mapped twice, so everything that touches the device (uploads, submit, map, the
pipeline cache) runs under one process-wide lock; host-side conversions run outside it.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from rlx_core.errors import RlxError, TargetUnavailableError
from rlx_core.targets.gpu_common.host_arrays import from_storage, to_storage
from rlx_core.targets.gpu_common.runtime import changed_params, check_call
from rlx_core.targets.webgpu.target import AdapterInfo, GpuPlan

# limits we raise from the WebGPU defaults to what the adapter reports, when it offers more
_LIMITS = ("max-storage-buffers-per-shader-stage", "max-buffer-size",
           "max-storage-buffer-binding-size", "max-compute-workgroup-storage-size",
           "max-compute-invocations-per-workgroup")


class WgpuError(RlxError):
    """wgpu rejected a shader, pipeline or submission (a renderer bug or a device problem)."""

    code = "RLX-K002"


@dataclass
class NativeRuntime:
    """The process-wide wgpu device and its pipeline cache (source text -> pipeline)."""

    device: Any
    info: AdapterInfo
    pipelines: dict[str, Any] = field(default_factory=dict)

    # serialises device work: one device and one queue per process, buffers shared per program
    lock: threading.RLock = field(default_factory=threading.RLock)

    _shared: ClassVar[Any] = None  # the runtime opened by this process
    _opening: ClassVar[threading.Lock] = threading.Lock()

    @classmethod
    def open(cls) -> NativeRuntime:
        with cls._opening:  # two threads opening at once would make two devices
            if cls._shared is None:
                cls._shared = cls._open()
            return cls._shared

    @classmethod
    def _open(cls) -> NativeRuntime:
        _quiet_headless_vulkan()
        import wgpu

        try:
            adapter = wgpu.gpu.request_adapter_sync(power_preference="high-performance")
        except Exception as err:  # wgpu raises plain RuntimeError when no driver is found
            raise TargetUnavailableError(f"no WebGPU adapter ({err})") from None
        if adapter is None:
            raise TargetUnavailableError("no WebGPU adapter found")
        feats = sorted(str(f) for f in adapter.features)
        lim = adapter.limits
        want = {k: lim[k] for k in _LIMITS if k in lim}
        required = ["shader-f16"] if "shader-f16" in feats else []
        device = adapter.request_device_sync(required_features=required, required_limits=want)
        ainfo = adapter.info
        info = AdapterInfo(
            name=str(ainfo.get("device", "") or "unknown adapter"), features=tuple(feats),
            max_storage_buffers=int(lim["max-storage-buffers-per-shader-stage"]),
            max_buffer_bytes=int(min(lim["max-buffer-size"],
                                     lim["max-storage-buffer-binding-size"])),
            max_workgroup_size=int(lim["max-compute-invocations-per-workgroup"]),
            backend=str(ainfo.get("backend_type", "")))
        return cls(device, info)

    def pipeline(self, source: str) -> Any:
        """The compute pipeline of one WGSL source (compiled once per process).

        Keyed on the source without comments: the comments name values, so the same kernel in
        another layer (same shapes, other names) shares one pipeline.
        """
        key = "\n".join(line.split("//")[0].rstrip() for line in source.splitlines())
        with self.lock:
            return self._pipeline(key, source)

    def _pipeline(self, key: str, source: str) -> Any:
        if key not in self.pipelines:
            try:
                module = self.device.create_shader_module(code=source)
                self.pipelines[key] = self.device.create_compute_pipeline(
                    layout="auto", compute={"module": module, "entry_point": "main"})
            except Exception as err:
                raise WgpuError(f"wgpu rejected a generated shader: {err}\n{source}",
                                hint="a renderer bug: report it with this source") from None
        return self.pipelines[key]

    def load(self, plan: GpuPlan, param_data: dict[str, Any]) -> NativeProgram:
        with self.lock:
            return NativeProgram(self, plan, dict(param_data))


def _quiet_headless_vulkan() -> None:
    """Mesa's Vulkan loader prints 'XDG_RUNTIME_DIR is invalid' on headless machines while it
    probes for a display it will never use; give it a private runtime dir so compute stays quiet."""
    import os
    import tempfile

    if os.environ.get("XDG_RUNTIME_DIR") and os.path.isdir(os.environ["XDG_RUNTIME_DIR"]):
        return
    path = os.path.join(tempfile.gettempdir(), f"rlx-xdg-{os.getuid()}")
    os.makedirs(path, mode=0o700, exist_ok=True)
    os.environ["XDG_RUNTIME_DIR"] = path


class NativeProgram:
    """One graph on the device: its buffers, bind groups and the per-call submission."""

    def __init__(self, rt: NativeRuntime, plan: GpuPlan, param_data: dict[str, Any]):
        import wgpu

        self.rt, self.plan, self.param_data = rt, plan, param_data
        dev = rt.device
        usage = (wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_DST |
                 wgpu.BufferUsage.COPY_SRC)
        self.buffers = {b.name: dev.create_buffer(size=b.nbytes, usage=usage)
                        for b in plan.buffers}
        self.staging = {o: dev.create_buffer(size=plan.buffer(o).nbytes,
                                             usage=wgpu.BufferUsage.MAP_READ |
                                             wgpu.BufferUsage.COPY_DST)
                        for o in dict.fromkeys(plan.outputs)}
        for name, data in plan.constants.items():
            dev.queue.write_buffer(self.buffers[name], 0, data)
        self.steps: list[tuple[Any, Any, tuple[int, int, int]]] = []
        for k in plan.kernels:
            if k.constant is not None:
                continue
            pipe = rt.pipeline(k.source)
            entries = [{"binding": i, "resource": {"buffer": self.buffers[v], "offset": 0,
                                                   "size": plan.buffer(v).nbytes}}
                       for i, v in enumerate((*k.reads, *k.writes))]
            group = dev.create_bind_group(layout=pipe.get_bind_group_layout(0), entries=entries)
            self.steps.append((pipe, group, k.workgroups))
        self._params_key: tuple[int, ...] | None = None

    def _upload_params(self, params: dict[str, Any]) -> None:
        key, uploads = changed_params(self.plan, self.param_data, params, self._params_key)
        for name, data in uploads:
            self.rt.device.queue.write_buffer(self.buffers[name], 0, data)
        self._params_key = key

    def run(self, inputs: Sequence[Any], params: dict[str, Any] | None = None) -> list[Any]:
        plan = self.plan
        check_call(plan, inputs)
        data = [to_storage(arg, plan.buffer(name).type, f"input %{name}")
                for name, arg in zip(plan.inputs, inputs, strict=True)]
        with self.rt.lock:  # the buffers below are this program's, shared by every call
            self._upload_params(params or {})
            raw = self._submit(data)
        results = {o: from_storage(b, plan.buffer(o).type) for o, b in raw.items()}
        return [results[o] for o in plan.outputs]

    def _submit(self, data: list[bytes]) -> dict[str, Any]:
        """Write the inputs, run every kernel, read the outputs back (the caller holds the lock)."""
        plan, dev = self.plan, self.rt.device
        for name, d in zip(plan.inputs, data, strict=True):
            dev.queue.write_buffer(self.buffers[name], 0, d)
        enc = dev.create_command_encoder()
        if self.steps:
            cpass = enc.begin_compute_pass()
            for pipe, group, (x, y, z) in self.steps:
                cpass.set_pipeline(pipe)
                cpass.set_bind_group(0, group)
                cpass.dispatch_workgroups(x, y, z)
            cpass.end()
        for o, stage in self.staging.items():
            enc.copy_buffer_to_buffer(self.buffers[o], 0, stage, 0, plan.buffer(o).nbytes)
        dev.queue.submit([enc.finish()])
        raw: dict[str, Any] = {}
        for o, stage in self.staging.items():
            stage.map_sync("READ")
            try:
                raw[o] = stage.read_mapped()  # a copy: it outlives the unmap
            finally:
                stage.unmap()
        return raw
