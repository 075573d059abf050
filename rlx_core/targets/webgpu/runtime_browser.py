"""Browser WebGPU runtime: the same WGSL kernels through ``navigator.gpu`` under Pyodide.

WebGPU in JavaScript is asynchronous where it waits on the GPU (adapter, device, buffer
mapping), so a page opens the device once before compiling::

    await rlx.init_webgpu()                        # requestAdapter + requestDevice
    exe = rlx.compile(fn, *specs, target="webgpu") # pipelines are created synchronously
    out = await exe.run_async(*inputs)

``Program.run`` (what ``exe(...)`` calls) waits synchronously only where Pyodide can suspend
(JSPI, ``pyodide.ffi.run_sync``); otherwise it says to await ``exe.run_async``. No numpy is needed:
inputs are lists, ``array.array``, memoryviews or ``HostArray`` (host_arrays.py).

``BrowserApi`` spells the WebGPU calls of webgpu/device.py in JavaScript; ``BrowserRuntime`` is
that shared ``WebGpuDevice`` and loads a plan as a ``BrowserProgram``: gpu_common's
``GpuProgram`` (the runner every GPU API shares) whose outputs are awaited.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any, ClassVar

from rlx_core.errors import RlxError, TargetUnavailableError
from rlx_core.targets.gpu_common.plan import AdapterInfo, GpuPlan
from rlx_core.targets.gpu_common.runtime import GpuProgram
from rlx_core.targets.webgpu.device import WebGpuDevice
from rlx_core.targets.webgpu.wgsl import PACKED_DOT

_LIMITS = ("maxStorageBuffersPerShaderStage", "maxBufferSize", "maxStorageBufferBindingSize",
           "maxComputeWorkgroupStorageSize", "maxComputeInvocationsPerWorkgroup")


def _js(obj: Any) -> Any:
    """A Python dict/list as a plain JS object/array (JS proxies inside pass through)."""
    import js
    from pyodide.ffi import to_js

    return to_js(obj, dict_converter=js.Object.fromEntries)


class BrowserApi:
    """webgpu/device.py's ``WebGpuApi`` on the page's ``GPUDevice`` (Pyodide's ``js``)."""

    def __init__(self, device: Any) -> None:
        self.device = device

    def storage_buffer(self, nbytes: int) -> Any:
        import js

        u = js.GPUBufferUsage
        return self.device.createBuffer(_js({"size": nbytes,
                                             "usage": u.STORAGE | u.COPY_DST | u.COPY_SRC}))

    def staging_buffer(self, nbytes: int) -> Any:
        import js

        u = js.GPUBufferUsage
        return self.device.createBuffer(_js({"size": nbytes, "usage": u.MAP_READ | u.COPY_DST}))

    def write(self, buf: Any, data: bytes) -> None:
        from pyodide.ffi import to_js

        self.device.queue.writeBuffer(buf, 0, to_js(memoryview(data)))

    def pipeline(self, source: str) -> Any:
        module = self.device.createShaderModule(_js({"code": source}))
        return self.device.createComputePipeline(
            _js({"layout": "auto", "compute": {"module": module, "entryPoint": "main"}}))

    def bind_group(self, pipe: Any, entries: list[tuple[Any, int]]) -> Any:
        return self.device.createBindGroup(_js({
            "layout": pipe.getBindGroupLayout(0),
            "entries": [{"binding": i, "resource": {"buffer": b, "offset": 0, "size": n}}
                        for i, (b, n) in enumerate(entries)]}))

    def encoder(self) -> Any:
        return self.device.createCommandEncoder()

    def begin_pass(self, enc: Any) -> Any:
        return enc.beginComputePass()

    def dispatch(self, cpass: Any, pipe: Any, group: Any, wg: tuple[int, int, int]) -> None:
        cpass.setPipeline(pipe)
        cpass.setBindGroup(0, group)
        cpass.dispatchWorkgroups(*wg)

    def end_pass(self, cpass: Any) -> None:
        cpass.end()

    def copy(self, enc: Any, src: Any, dst: Any, nbytes: int) -> None:
        enc.copyBufferToBuffer(src, 0, dst, 0, nbytes)

    def submit(self, enc: Any) -> None:
        self.device.queue.submit(_js([enc.finish()]))

    def read(self, stage: Any, nbytes: int) -> bytes:
        raise RlxError("a browser buffer is mapped asynchronously", code="RLX-R004",
                       hint="use `await exe.run_async(*inputs)`")

    async def read_async(self, stage: Any, nbytes: int) -> bytes:
        import js

        await stage.mapAsync(js.GPUMapMode.READ)
        try:
            return bytes(js.Uint8Array.new(stage.getMappedRange()).to_bytes()[:nbytes])
        finally:
            stage.unmap()


class BrowserRuntime(WebGpuDevice):
    """The page's GPUDevice (a ``WebGpuDevice``), opened by ``await init()``."""

    _shared: ClassVar[BrowserRuntime | None] = None
    _why: ClassVar[str] = "call `await rlx_core.targets.webgpu.runtime_browser.init()` first"

    @property
    def device(self) -> Any:
        return self.api.device

    @classmethod
    def current(cls) -> BrowserRuntime:
        if cls._shared is None:
            raise TargetUnavailableError(cls._why)
        return cls._shared

    @classmethod
    def status(cls) -> tuple[bool, str]:
        return (True, "") if cls._shared is not None else (False, cls._why)

    def load(self, plan: GpuPlan, param_data: dict[str, Any]) -> BrowserProgram:
        return BrowserProgram(self, plan, param_data)


def packed_dot(gpu: Any) -> bool:
    """Does the browser's WGSL have ``dot4I8Packed``? It says so in
    ``navigator.gpu.wgslLanguageFeatures`` (then the int8 kernels take the packed-dot
    dialect); ``RLX_WEBGPU_PACKED_DOT=0`` keeps them on the i32 path, as natively."""
    import os

    if os.environ.get("RLX_WEBGPU_PACKED_DOT", "1") == "0":
        return False
    feats = getattr(gpu, "wgslLanguageFeatures", None)
    return bool(feats is not None and feats.has("packed_4x8_integer_dot_product"))


async def init() -> BrowserRuntime:
    """Open the WebGPU device of this page (once); raise TargetUnavailableError without one."""
    if BrowserRuntime._shared is not None:
        return BrowserRuntime._shared
    if sys.platform != "emscripten":
        raise TargetUnavailableError(
            "init_webgpu opens the WebGPU device of a browser page (Pyodide, JupyterLite)",
            hint="outside a browser, compile for 'webgpu' directly (wgpu-native opens the GPU)")
    import js

    gpu = getattr(js.navigator, "gpu", None)
    if gpu is None:
        BrowserRuntime._why = "this browser has no navigator.gpu (WebGPU is off or missing)"
        raise TargetUnavailableError(BrowserRuntime._why)
    adapter = await gpu.requestAdapter()
    if adapter is None:
        BrowserRuntime._why = "navigator.gpu.requestAdapter() found no adapter"
        raise TargetUnavailableError(BrowserRuntime._why)
    feats = tuple(sorted(str(f) for f in js.Array.from_(adapter.features)))
    if packed_dot(gpu):
        feats = (*feats, PACKED_DOT)
    limits = {k: int(getattr(adapter.limits, k)) for k in _LIMITS}
    required = ["shader-f16"] if "shader-f16" in feats else []
    device = await adapter.requestDevice(_js({"requiredFeatures": required,
                                              "requiredLimits": limits}))
    ai = getattr(adapter, "info", None)
    parts = [str(getattr(ai, k, "") or "") for k in ("vendor", "architecture", "description")] \
        if ai is not None else []
    name = " ".join(p for p in parts if p) or "browser adapter"
    info = AdapterInfo(
        name=name, features=feats,
        max_storage_buffers=limits["maxStorageBuffersPerShaderStage"],
        max_buffer_bytes=min(limits["maxBufferSize"], limits["maxStorageBufferBindingSize"]),
        max_workgroup_size=limits["maxComputeInvocationsPerWorkgroup"], backend="browser")
    BrowserRuntime._shared = BrowserRuntime(BrowserApi(device), info)
    return BrowserRuntime._shared


class BrowserProgram(GpuProgram):
    """One graph on the page's device: gpu_common's program runner, outputs awaited."""

    dev: BrowserRuntime

    async def run_async(self, inputs: Sequence[Any],
                        params: dict[str, Any] | None = None) -> list[Any]:
        """Run the graph once; results as numpy arrays when numpy is loaded, else HostArray."""
        plan, dev = self.plan, self.dev
        data = self.host_inputs(inputs)
        with dev.lock:  # Pyodide runs one thread; the lock keeps the contract of GpuProgram
            self.enqueue(data, params)
        raw = {o: await dev.download_async(self.buffers[o], plan.buffer(o).nbytes)
               for o in plan.readback}
        plan.check_guards(raw)
        return self.outputs(raw)

    def run(self, inputs: Sequence[Any], params: dict[str, Any] | None = None) -> list[Any]:
        """Synchronous run: needs Pyodide's stack switching (JSPI); else await run_async."""
        try:
            from pyodide.ffi import can_run_sync, run_sync
        except ImportError:
            can_run_sync, run_sync = None, None
        if run_sync is None or (can_run_sync is not None and not can_run_sync()):
            raise RlxError("reading WebGPU results in the browser is asynchronous and this "
                           "call cannot wait", code="RLX-R004",
                           hint="use `await exe.run_async(*inputs)`, or "
                                "call from code run by pyodide.runPythonAsync with JSPI")
        return run_sync(self.run_async(inputs, params))
