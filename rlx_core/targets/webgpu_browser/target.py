"""WebGpuBrowserTarget: the webgpu target's WGSL kernels, run on the GPU of the user's browser.

``build`` renders and plans exactly as the ``webgpu`` target does (``make_plan``: same kernels,
buffers and bindings) against the limits the browser's adapter reported. Where the kernel runs
decides the route: a remote kernel (Binder, a server without a GPU) ships the plan over the
rlx.webgpu comm to the JupyterLab extension, which runs it with ``navigator.gpu``; a kernel that
runs in the page (JupyterLite's Pyodide) already has ``navigator.gpu`` and uses the webgpu
target's browser runtime directly (``await runtime_browser.init()`` first).
"""

from __future__ import annotations

import itertools
import sys
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from rlx_core.errors import ArgumentError, RlxError, TargetUnavailableError
from rlx_core.ir import dtypes as dt
from rlx_core.ir.graph import Graph
from rlx_core.targets.base import Program, Verification
from rlx_core.targets.gpu_common.host_arrays import from_storage, to_storage
from rlx_core.targets.gpu_common.runtime import check_call
from rlx_core.targets.webgpu.target import AdapterInfo, GpuPlan, make_plan
from rlx_core.targets.webgpu_browser import protocol
from rlx_core.targets.webgpu_browser.bridge import BrowserBridge

_programs = itertools.count(1)


def _in_pyodide() -> bool:
    return sys.platform == "emscripten"


class RemoteProgram:
    """A plan loaded in the browser tab: uploads inputs, runs, brings the outputs back.

    The plan is kept here, so after a reloaded tab (a new bridge) it is loaded again on the
    next call instead of failing.
    """

    def __init__(self, plan: GpuPlan, param_data: dict[str, Any]):
        self.plan, self.param_data = plan, dict(param_data)
        self.pid = f"p{next(_programs)}"
        self._loaded_on = -1  # bridge generation this program was loaded on
        self._params_key: tuple[int, ...] | None = None

    def _params(self, params: dict[str, Any] | None) -> list[Any]:
        data = [(params or {}).get(p, self.param_data.get(p)) for p in self.plan.params]
        for name, d in zip(self.plan.params, data, strict=False):
            if d is None:
                raise ArgumentError(f"@{self.plan.graph}: no data for parameter %{name}",
                                    hint="pass it in the params dict under its name")
        return data

    def _ensure_loaded(self, bridge: BrowserBridge, params: list[Any]) -> None:
        if self._loaded_on == BrowserBridge.generation:
            return
        plan = self.plan
        pbufs = [(n, to_storage(d, plan.buffer(n).type, f"parameter %{n}"))
                 for n, d in zip(plan.params, params, strict=False)]
        pbufs = plan.derive(pbufs)  # with the prepacked int8 weights
        names = [*plan.constants, *(n for n, _ in pbufs)]
        bufs = [*plan.constants.values(), *(b for _, b in pbufs)]
        bridge.call("load", bufs, program=self.pid, plan=protocol.plan_json(plan), uploads=names)
        self._loaded_on = BrowserBridge.generation
        self._params_key = tuple(id(d) for d in params)

    def run(self, inputs: Sequence[Any], params: dict[str, Any] | None = None) -> list[Any]:
        plan = self.plan
        check_call(plan, inputs)  # the same contract as every GPU program (runtime.py)
        data = self._params(params)
        bridge = BrowserBridge.current()
        self._ensure_loaded(bridge, data)
        names: list[str] = []
        bufs: list[bytes] = []
        key = tuple(id(d) for d in data)
        if key != self._params_key:  # another params object: upload it with this run
            pbufs = [(n, to_storage(d, plan.buffer(n).type, f"parameter %{n}"))
                     for n, d in zip(plan.params, data, strict=False)]
            for n, b in plan.derive(pbufs):
                names.append(n)
                bufs.append(b)
            self._params_key = key
        for n, arg in zip(plan.inputs, inputs, strict=False):
            names.append(n)
            bufs.append(to_storage(arg, plan.buffer(n).type, f"input %{n}"))
        try:
            reply, out = bridge.call("run", bufs, program=self.pid, uploads=names)
        except protocol.ProgramLostError:  # the tab lost its device: load again, once
            self._loaded_on = -1
            self._ensure_loaded(bridge, data)
            reply, out = bridge.call("run", bufs, program=self.pid, uploads=names)
        got = protocol.output_bytes(plan, reply, out)
        plan.check_guards(got)
        return [from_storage(got[o][:plan.buffer(o).nbytes], plan.buffer(o).type)
                for o in plan.outputs]

    def free(self) -> None:
        bridge = BrowserBridge._shared
        if bridge is not None and self._loaded_on == BrowserBridge.generation:
            bridge.send("free", program=self.pid)
        self._loaded_on = -1


class WebGpuBrowserTarget:
    """WGSL on the browser tab's WebGPU: over a comm from a remote kernel, or in-page."""

    name = "webgpu-browser"
    verification = Verification.EXECUTES
    description = ("WGSL compute shaders on the GPU of the browser tab attached to the kernel: "
                   "over the rlx.webgpu comm (JupyterLab extension) from a remote kernel, or "
                   "directly under Pyodide (JupyterLite)")

    def _local(self) -> Any:
        """Under Pyodide: the webgpu target's page runtime (opened by ``await init()``)."""
        from rlx_core.targets.webgpu.runtime_browser import BrowserRuntime

        return BrowserRuntime.current()

    def adapter(self) -> AdapterInfo:
        """The browser's adapter; connects on first use (raises the B00x errors)."""
        if _in_pyodide():
            return self._local().info
        info = BrowserBridge.current().info
        if info is None:  # a bridge is only published after its hello succeeded
            raise TargetUnavailableError("webgpu-browser: the browser sent no adapter")
        return info

    def available(self) -> tuple[bool, str]:
        try:
            self.adapter()
        except TargetUnavailableError as err:
            self._unavailable = err
            return False, err.message
        return True, ""

    def unavailable_error(self) -> TargetUnavailableError | None:
        """The typed error (RLX-B001/B002/B004, with its hint) of the last ``available()``, so
        ``rlx.compile`` raises it instead of the generic RLX-X001 (without a second wait)."""
        return getattr(self, "_unavailable", None)

    def render_sources(self, lir: Graph) -> dict[str, str]:
        """The WGSL the browser would run, without a browser (the webgpu target's renderer)."""
        from rlx_core.targets.gpu_common.kernels import render_graph
        from rlx_core.targets.webgpu.wgsl import WGSL

        return {k.name: k.source for k in render_graph(WGSL, lir) if k.constant is None}

    @property
    def caps(self) -> Any:
        """The webgpu table, renamed, with the browser adapter's limits and features."""
        from rlx_core.targets.webgpu.caps import CAPS

        caps = replace(CAPS, target=self.name)
        try:
            info = self.adapter()
        except TargetUnavailableError:
            return caps
        caps = caps.with_limits(max_storage_buffers=info.max_storage_buffers,
                                max_buffer_bytes=info.max_buffer_bytes,
                                max_workgroup_size=info.max_workgroup_size,
                                source=f"browser adapter {info.name}")
        return caps.with_features("shader-f16") if "shader-f16" in info.features else caps

    def build(self, lir: Graph, options: Any = None) -> Program:
        info = self.adapter()
        if any(v.type.dtype == dt.f16 for v in lir.values().values()) and \
                "shader-f16" not in info.features:
            raise RlxError(f"@{lir.name} uses f16 but {info.name} has no shader-f16",
                           hint="cast to f32", code="RLX-L003")
        plan = make_plan(lir, info)
        if _in_pyodide():
            loaded: Any = self._local().load(plan, lir.param_data)
            route = "in-page"
        else:
            loaded = RemoteProgram(plan, lir.param_data)
            route = "comm"
        return Program(run_fn=loaded.run, sources={k.name: k.source for k in plan.kernels},
                       info={"adapter": info.name, "backend": info.backend, "route": route,
                             "plan": plan, "runtime": loaded})

    def __repr__(self) -> str:
        return "WebGpuBrowserTarget()"
