"""The Target of a GPU API whose device implements gpu_common's ``Device`` interface.

A subclass names its dialect, its capability table and how to open its device; this class
opens it once (thread-safe), reports ``available() == (False, reason)`` when the driver or the
binding is missing, puts the live device's limits into the table, and builds: render the plan,
load it on the device.
"""

from __future__ import annotations

import threading
from typing import Any

from rlx_core.errors import TargetUnavailableError
from rlx_core.ir.graph import Graph
from rlx_core.targets.base import Program, Verification
from rlx_core.targets.gpu_common.dialect import Dialect
from rlx_core.targets.gpu_common.plan import make_plan
from rlx_core.targets.gpu_common.runtime import Device, GpuProgram


class GpuTarget:
    """Base of the GPU API targets (opencl, ...)."""

    name = "gpu"
    verification = Verification.EXECUTES
    description = ""
    dialect: Dialect
    install_hint = ""

    def __init__(self) -> None:
        self._device: Device | None = None
        self._why = ""
        self._lock = threading.Lock()

    def open_device(self) -> Device:
        """Open the API's device; raise TargetUnavailableError (or ImportError) if absent."""
        raise NotImplementedError

    def table(self) -> Any:
        """The static capability table (caps.py's CAPS)."""
        raise NotImplementedError

    def device(self) -> Device:
        with self._lock:
            if self._device is None and not self._why:
                try:
                    self._device = self.open_device()
                except TargetUnavailableError as err:
                    self._why = err.message
                except ImportError as err:
                    self._why = f"the Python binding is not installed ({err})"
        if self._device is None:
            raise TargetUnavailableError(f"{self.name}: {self._why}", hint=self.install_hint)
        return self._device

    def available(self) -> tuple[bool, str]:
        try:
            self.device()
        except TargetUnavailableError:
            return False, self._why
        return True, ""

    @property
    def caps(self) -> Any:
        """The table with this device's limits (the static defaults without a device)."""
        table = self.table()
        try:
            info = self.device().info
        except TargetUnavailableError:
            return table
        return table.with_limits(max_storage_buffers=info.max_storage_buffers,
                                 max_buffer_bytes=info.max_buffer_bytes,
                                 max_workgroup_size=info.max_workgroup_size,
                                 source=f"device {info.name}")

    def dialect_for(self, info: Any) -> Dialect:
        """The dialect for this device (a target may pick a variant by its features)."""
        return self.dialect

    def render_sources(self, lir: Graph) -> dict[str, str]:
        """Every launchable kernel's source in the target's dialect, without opening the device
        (``rlx compile --emit source``, the explorer's side-by-side kernels)."""
        from rlx_core.targets.gpu_common.kernels import render_graph

        return {k.name: k.source for k in render_graph(self.dialect, lir) if k.constant is None}

    def build(self, lir: Graph, options: Any = None) -> Program:
        dev = self.device()
        plan = make_plan(lir, self.dialect_for(dev.info), dev.info, self.name)
        prog = GpuProgram(dev, plan, lir.param_data)
        return Program(run_fn=prog.run, sources={k.name: k.source for k in plan.kernels},
                       info={"device": dev.info.name, "backend": dev.info.backend,
                             "plan": plan, "runtime": prog})

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"
