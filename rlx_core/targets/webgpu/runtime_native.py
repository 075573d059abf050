"""Native WebGPU on the ``wgpu`` package: one device per process, opened once.

``NativeApi`` spells the WebGPU calls of webgpu/device.py in wgpu-py; ``NativeRuntime`` is that
shared ``WebGpuDevice`` (pipeline cache, bind groups, the one encoder and submit) and loads a
plan as a ``GpuProgram``, the same program runner every GPU API uses. A call writes the inputs
(``queue.write_buffer``), records every kernel, then per output one submission: the recorded
dispatches in one compute pass plus the copy into a mappable staging buffer, mapped back.

Thread safety: a program's buffers are shared by its calls, and wgpu panics when a staging
buffer is mapped twice, so everything that touches the device runs under the device's lock.
"""

from __future__ import annotations

import threading
from typing import Any, ClassVar

from rlx_core.errors import TargetUnavailableError
from rlx_core.targets.gpu_common.plan import AdapterInfo, GpuPlan
from rlx_core.targets.gpu_common.runtime import GpuProgram
from rlx_core.targets.webgpu.device import WebGpuDevice, WgpuError
from rlx_core.targets.webgpu.wgsl import PACKED_DOT

__all__ = ["NativeApi", "NativeRuntime", "WgpuError"]

# limits we raise from the WebGPU defaults to what the adapter reports, when it offers more
_LIMITS = ("max-storage-buffers-per-shader-stage", "max-buffer-size",
           "max-storage-buffer-binding-size", "max-compute-workgroup-storage-size",
           "max-compute-invocations-per-workgroup")


class NativeApi:
    """webgpu/device.py's ``WebGpuApi`` in wgpu-py."""

    def __init__(self, device: Any) -> None:
        import wgpu

        self.device, self.wgpu = device, wgpu

    def storage_buffer(self, nbytes: int) -> Any:
        u = self.wgpu.BufferUsage
        return self.device.create_buffer(size=nbytes,
                                         usage=u.STORAGE | u.COPY_DST | u.COPY_SRC)

    def staging_buffer(self, nbytes: int) -> Any:
        u = self.wgpu.BufferUsage
        return self.device.create_buffer(size=nbytes, usage=u.MAP_READ | u.COPY_DST)

    def write(self, buf: Any, data: bytes) -> None:
        self.device.queue.write_buffer(buf, 0, data)

    def pipeline(self, source: str) -> Any:
        module = self.device.create_shader_module(code=source)
        return self.device.create_compute_pipeline(
            layout="auto", compute={"module": module, "entry_point": "main"})

    def bind_group(self, pipe: Any, entries: list[tuple[Any, int]]) -> Any:
        return self.device.create_bind_group(
            layout=pipe.get_bind_group_layout(0),
            entries=[{"binding": i, "resource": {"buffer": b, "offset": 0, "size": n}}
                     for i, (b, n) in enumerate(entries)])

    def encoder(self) -> Any:
        return self.device.create_command_encoder()

    def begin_pass(self, enc: Any) -> Any:
        return enc.begin_compute_pass()

    def dispatch(self, cpass: Any, pipe: Any, group: Any, wg: tuple[int, int, int]) -> None:
        cpass.set_pipeline(pipe)
        cpass.set_bind_group(0, group)
        cpass.dispatch_workgroups(*wg)

    def end_pass(self, cpass: Any) -> None:
        cpass.end()

    def copy(self, enc: Any, src: Any, dst: Any, nbytes: int) -> None:
        enc.copy_buffer_to_buffer(src, 0, dst, 0, nbytes)

    def submit(self, enc: Any) -> None:
        self.device.queue.submit([enc.finish()])

    def read(self, stage: Any, nbytes: int) -> bytes:
        stage.map_sync("READ")
        try:
            return bytes(stage.read_mapped()[:nbytes])  # a copy: it outlives the unmap
        finally:
            stage.unmap()

    async def read_async(self, stage: Any, nbytes: int) -> bytes:
        return self.read(stage, nbytes)


class NativeRuntime(WebGpuDevice):
    """The process-wide wgpu device (a ``WebGpuDevice``); ``device`` is wgpu's own object."""

    _shared: ClassVar[Any] = None  # the runtime opened by this process
    _opening: ClassVar[threading.Lock] = threading.Lock()

    @property
    def device(self) -> Any:
        return self.api.device

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
        if _packed_dot(wgpu, device):
            feats.append(PACKED_DOT)
        ainfo = adapter.info
        info = AdapterInfo(
            name=str(ainfo.get("device", "") or "unknown adapter"), features=tuple(feats),
            max_storage_buffers=int(lim["max-storage-buffers-per-shader-stage"]),
            max_buffer_bytes=int(min(lim["max-buffer-size"],
                                     lim["max-storage-buffer-binding-size"])),
            max_workgroup_size=int(lim["max-compute-invocations-per-workgroup"]),
            backend=str(ainfo.get("backend_type", "")))
        return cls(NativeApi(device), info)

    def load(self, plan: GpuPlan, param_data: dict[str, Any]) -> GpuProgram:
        with self.lock:
            return GpuProgram(self, plan, param_data)


_PACKED_PROBE = """requires packed_4x8_integer_dot_product;
@group(0) @binding(0) var<storage, read_write> v: array<i32>;
@compute @workgroup_size(1) fn main() { v[0] = dot4I8Packed(u32(v[1]), u32(v[2])); }
"""


def _packed_dot(wgpu: Any, device: Any) -> bool:
    """Does this WGSL compiler have ``dot4I8Packed``? wgpu-py's ``wgsl_language_features``
    answers where the implementation reports it (wgpu-native 0.32 reports an empty set
    although its naga compiles the builtins), else a one-line module is compiled.
    ``RLX_WEBGPU_PACKED_DOT=0`` turns the packed path off (the int8 kernels then unpack)."""
    import os

    if os.environ.get("RLX_WEBGPU_PACKED_DOT", "1") == "0":
        return False
    if "packed_4x8_integer_dot_product" in getattr(wgpu.gpu, "wgsl_language_features", ()):
        return True
    try:
        module = device.create_shader_module(code=_PACKED_PROBE)
        device.create_compute_pipeline(layout="auto",
                                       compute={"module": module, "entry_point": "main"})
    except Exception:  # noqa: BLE001 (any compile error means: no extension)
        return False
    return True


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
