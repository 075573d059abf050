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
    # StableHLO run by XLA through jaxlib (CPU backend here; a TPU through PJRT where present)
    "tpu": "rlx_core.targets.tpu.target:TpuTarget",
    # C + HVX intrinsics; clang-checked for v68, run under qemu-hexagon
    "hexagon": "rlx_core.targets.hexagon.target:HexagonTarget",
    "opencl": "rlx_core.targets.opencl.target:OpenClTarget",
    "opengl": "rlx_core.targets.opengl.target:OpenGlTarget",
    "vulkan": "rlx_core.targets.vulkan.target:VulkanTarget",
    "directx": "rlx_core.targets.directx.target:DirectXTarget",
    # vendor GPU languages of the same renderer, checked by their toolchains (not run here)
    "cuda": "rlx_core.targets.cuda.target:CudaTarget",
    "rocm": "rlx_core.targets.rocm.target:RocmTarget",
    "metal": "rlx_core.targets.metal.target:MetalTarget",
    # int8 C99 firmware for Cortex-M4/M33, run under qemu-system-arm (MPS2 boards)
    "cortex-m": "rlx_core.targets.cortex_m.target:CortexMTarget",
    # int8 Verilog datapath, simulated by Verilator; yosys + nextpnr-ice40 synthesis report
    "fpga": "rlx_core.targets.fpga.target:FpgaTarget",
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


# Executing targets a user-facing default chooses from, fastest first on a host: the generated
# C on the host's cores, then WebGPU. The numpy reference interpreter is the oracle the others
# are checked against; it is a default only when neither runs here, and then with a warning.
DEFAULT_ORDER: tuple[str, ...] = ("cpu", "webgpu")


@cache
def default_target() -> str:
    """The fastest executing target available here (what helpers and the ONNX backend use
    when no target is named); "numpy", with a RuntimeWarning saying why, when none is."""
    import warnings

    why = []
    for name in DEFAULT_ORDER:
        ok, reason = get_target(name).available()
        if ok:
            return name
        why.append(f"{name}: {reason}")
    warnings.warn(f"no compiled target runs here ({'; '.join(why)}); using the numpy reference "
                  f"interpreter, which is much slower", RuntimeWarning, stacklevel=2)
    return "numpy"


def resolve_target(name: str | None) -> str:
    """``name``, or the default target when it is None."""
    return default_target() if name is None else name
