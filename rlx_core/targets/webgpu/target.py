"""WebGpuTarget: LIR -> WGSL kernels -> a GPU plan run natively (wgpu-py) or in a browser.

``build`` renders every kernel (the shared GPU renderer in the WGSL dialect), checks them
against the device limits and makes a ``GpuPlan`` (gpu_common/plan.py): one GPU buffer per
value a kernel reads or writes, the kernels in order, and the host bytes of tuple constants. The runtime is chosen by where Python runs: under Pyodide the
browser runtime (``navigator.gpu``), elsewhere the native one (the ``wgpu`` package, which
finds Vulkan/Metal/D3D12, or Mesa's lavapipe on a machine without a GPU).
"""

from __future__ import annotations

import sys
from typing import Any

from rlx_core.errors import RlxError, TargetUnavailableError
from rlx_core.ir import dtypes as dt
from rlx_core.ir.graph import Graph
from rlx_core.targets.base import Program, Verification
from rlx_core.targets.gpu_common import plan
from rlx_core.targets.gpu_common.plan import (  # noqa: F401 (the WebGPU runtimes import these here)
    AdapterInfo,
    BufferSpec,
    DeviceLimitError,
    GpuPlan,
)
from rlx_core.targets.webgpu.wgsl import PACKED_DOT, WGSL, WGSL_PACKED


def _in_pyodide() -> bool:
    return sys.platform == "emscripten"


def make_plan(lir: Graph, adapter: AdapterInfo | None = None) -> GpuPlan:
    """Render ``lir`` in WGSL and lay out its buffers; check kernels against ``adapter``
    (whose WGSL compiler, where it has ``dot4I8Packed``, gets the packed int8 dialect)."""
    dialect = WGSL_PACKED if adapter is not None and PACKED_DOT in adapter.features else WGSL
    return plan.make_plan(lir, dialect, adapter, "webgpu")


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

    def render_sources(self, lir: Graph) -> dict[str, str]:
        """Every launchable kernel's WGSL, without an adapter (``rlx compile --emit source``)."""
        from rlx_core.targets.gpu_common.kernels import render_graph

        return {k.name: k.source for k in render_graph(WGSL, lir) if k.constant is None}

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
