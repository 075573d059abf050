"""Browser WebGPU runtime: the same WGSL kernels through ``navigator.gpu`` under Pyodide.

WebGPU in JavaScript is asynchronous where it waits on the GPU (adapter, device, buffer
mapping), so a page opens the device once before compiling::

    from rlx_core.targets.webgpu.runtime_browser import init
    await init()                                   # requestAdapter + requestDevice
    exe = rlx.compile(fn, *specs, target="webgpu") # pipelines are created synchronously
    out = await exe.program.info["runtime"].run_async(inputs)

``Program.run`` (what ``exe(...)`` calls) waits synchronously only where Pyodide can suspend
(JSPI, ``pyodide.ffi.run_sync``); otherwise it says to await ``run_async``. No numpy is needed:
inputs are lists, ``array.array``, memoryviews or ``HostArray`` (host_arrays.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from rlx_core.errors import ArgumentError, RlxError, TargetUnavailableError
from rlx_core.targets.gpu_common.host_arrays import from_storage, to_storage
from rlx_core.targets.webgpu.target import AdapterInfo, GpuPlan

_LIMITS = ("maxStorageBuffersPerShaderStage", "maxBufferSize", "maxStorageBufferBindingSize",
           "maxComputeWorkgroupStorageSize", "maxComputeInvocationsPerWorkgroup")


def _js(obj: Any) -> Any:
    """A Python dict/list as a plain JS object/array (JS proxies inside pass through)."""
    import js
    from pyodide.ffi import to_js

    return to_js(obj, dict_converter=js.Object.fromEntries)


class BrowserRuntime:
    """The page's GPUDevice, opened by ``await init()``, and the pipeline cache."""

    _shared: ClassVar[BrowserRuntime | None] = None
    _why: ClassVar[str] = "call `await rlx_core.targets.webgpu.runtime_browser.init()` first"

    def __init__(self, device: Any, info: AdapterInfo):
        self.device = device
        self.info = info
        self.pipelines: dict[str, Any] = {}

    @classmethod
    def current(cls) -> BrowserRuntime:
        if cls._shared is None:
            raise TargetUnavailableError(cls._why)
        return cls._shared

    @classmethod
    def status(cls) -> tuple[bool, str]:
        return (True, "") if cls._shared is not None else (False, cls._why)

    def pipeline(self, source: str) -> Any:
        key = "\n".join(line.split("//")[0].rstrip() for line in source.splitlines())
        if key not in self.pipelines:
            module = self.device.createShaderModule(_js({"code": source}))
            self.pipelines[key] = self.device.createComputePipeline(
                _js({"layout": "auto", "compute": {"module": module, "entryPoint": "main"}}))
        return self.pipelines[key]

    def load(self, plan: GpuPlan, param_data: dict[str, Any]) -> BrowserProgram:
        return BrowserProgram(self, plan, dict(param_data))


async def init() -> BrowserRuntime:
    """Open the WebGPU device of this page (once); raise TargetUnavailableError without one."""
    if BrowserRuntime._shared is not None:
        return BrowserRuntime._shared
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
    BrowserRuntime._shared = BrowserRuntime(device, info)
    return BrowserRuntime._shared


class BrowserProgram:
    """One graph on the page's device: buffers and bind groups made once, one submit a call."""

    def __init__(self, rt: BrowserRuntime, plan: GpuPlan, param_data: dict[str, Any]):
        import js

        self.rt, self.plan, self.param_data = rt, plan, param_data
        dev = rt.device
        usage = js.GPUBufferUsage.STORAGE | js.GPUBufferUsage.COPY_DST | \
            js.GPUBufferUsage.COPY_SRC
        self.buffers = {b.name: dev.createBuffer(_js({"size": b.nbytes, "usage": usage}))
                        for b in plan.buffers}
        read = js.GPUBufferUsage.MAP_READ | js.GPUBufferUsage.COPY_DST
        self.staging = {o: dev.createBuffer(_js({"size": plan.buffer(o).nbytes, "usage": read}))
                        for o in dict.fromkeys(plan.outputs)}
        for name, data in plan.constants.items():
            self._write(name, data)
        self.steps: list[tuple[Any, Any, tuple[int, int, int]]] = []
        for k in plan.kernels:
            if k.constant is not None:
                continue
            pipe = rt.pipeline(k.source)
            entries = [{"binding": i, "resource": {"buffer": self.buffers[v], "offset": 0,
                                                   "size": plan.buffer(v).nbytes}}
                       for i, v in enumerate((*k.reads, *k.writes))]
            group = dev.createBindGroup(_js({"layout": pipe.getBindGroupLayout(0),
                                             "entries": entries}))
            self.steps.append((pipe, group, k.workgroups))
        self._params_key: tuple[int, ...] | None = None

    def _write(self, name: str, data: bytes) -> None:
        from pyodide.ffi import to_js

        self.rt.device.queue.writeBuffer(self.buffers[name], 0, to_js(memoryview(data)))

    def _submit(self, inputs: Sequence[Any], params: dict[str, Any] | None) -> None:
        plan = self.plan
        if len(inputs) != len(plan.inputs):
            raise ArgumentError(f"@{plan.graph} takes {len(plan.inputs)} input(s), got "
                                f"{len(inputs)}")
        plan.check_inputs(inputs)
        data = [(params or {}).get(p, self.param_data.get(p)) for p in plan.params]
        key = tuple(id(d) for d in data)
        if key != self._params_key:
            for name, d in zip(plan.params, data, strict=True):
                if d is None:
                    raise ArgumentError(f"@{plan.graph}: no data for parameter %{name}")
                self._write(name, to_storage(d, plan.buffer(name).type, f"parameter %{name}"))
            self._params_key = key
        for name, arg in zip(plan.inputs, inputs, strict=True):
            self._write(name, to_storage(arg, plan.buffer(name).type, f"input %{name}"))
        dev = self.rt.device
        enc = dev.createCommandEncoder()
        if self.steps:
            cpass = enc.beginComputePass()
            for pipe, group, (x, y, z) in self.steps:
                cpass.setPipeline(pipe)
                cpass.setBindGroup(0, group)
                cpass.dispatchWorkgroups(x, y, z)
            cpass.end()
        for o, stage in self.staging.items():
            enc.copyBufferToBuffer(self.buffers[o], 0, stage, 0, plan.buffer(o).nbytes)
        dev.queue.submit(_js([enc.finish()]))

    async def run_async(self, inputs: Sequence[Any],
                        params: dict[str, Any] | None = None) -> list[Any]:
        """Run the graph once; results as numpy arrays when numpy is loaded, else HostArray."""
        import js

        self._submit(inputs, params)
        results: dict[str, Any] = {}
        for o, stage in self.staging.items():
            await stage.mapAsync(js.GPUMapMode.READ)
            try:
                raw = js.Uint8Array.new(stage.getMappedRange()).to_bytes()
            finally:
                stage.unmap()
            results[o] = from_storage(raw, self.plan.buffer(o).type)
        return [results[o] for o in self.plan.outputs]

    def run(self, inputs: Sequence[Any], params: dict[str, Any] | None = None) -> list[Any]:
        """Synchronous run: needs Pyodide's stack switching (JSPI); else await run_async."""
        try:
            from pyodide.ffi import can_run_sync, run_sync
        except ImportError:
            can_run_sync, run_sync = None, None
        if run_sync is None or (can_run_sync is not None and not can_run_sync()):
            raise RlxError("reading WebGPU results in the browser is asynchronous and this "
                           "call cannot wait", code="RLX-R004",
                           hint="use `await exe.program.info['runtime'].run_async(inputs)`, or "
                                "call from code run by pyodide.runPythonAsync with JSPI")
        return run_sync(self.run_async(inputs, params))
