"""The table of targets: name -> where its Target class lives. Imported lazily so that a
missing optional dependency (numpy, wgpu, a C compiler) only affects its own target."""

from __future__ import annotations

import importlib
from functools import cache
from typing import Any

from rlx_core.errors import RlxError

# name -> "module:Class". Add a row here when adding a target folder (docs/adding-a-target.md).
TARGETS: dict[str, str] = {
    "numpy": "rlx_core.targets.numpy_ref.target:NumpyTarget",
    "cpu": "rlx_core.targets.cpu.target:CpuTarget",
    "webgpu": "rlx_core.targets.webgpu.target:WebGpuTarget",
    # the same WGSL on the GPU of the browser tab attached to the kernel (JupyterLab extension)
    "webgpu-browser": "rlx_core.targets.webgpu_browser.target:WebGpuBrowserTarget",
}


class UnknownTargetError(RlxError):
    """A target name that is not in the table."""

    code = "RLX-X002"


@cache
def get_target(name: str) -> Any:
    """The Target object for ``name`` (constructed once per process)."""
    if name not in TARGETS:
        raise UnknownTargetError(f"unknown target {name!r}",
                                 hint=f"choose one of: {', '.join(TARGETS)}")
    module, cls = TARGETS[name].split(":")
    return getattr(importlib.import_module(module), cls)()


def target_names() -> tuple[str, ...]:
    return tuple(TARGETS)
