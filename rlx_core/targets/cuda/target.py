"""CudaTarget: LIR -> CUDA C (gpu_common) -> nvcc PTX -> ptxas sm_80/sm_90 (compile-check);
where an NVIDIA GPU and its driver are present, the same kernels run through the driver API.

Labelled ``compile-check`` until a GPU run of the conformance suite is committed
(``scripts/gpu_check.sh``); ``executes_here()`` says whether this machine runs them.
"""

from __future__ import annotations

from typing import Any

from rlx_core.errors import TargetUnavailableError
from rlx_core.ir.graph import Graph
from rlx_core.targets.base import Program
from rlx_core.targets.cuda.dialect import CUDA
from rlx_core.targets.gpu_common.checked_target import CheckedGpuTarget
from rlx_core.targets.gpu_common.runtime import Device
from rlx_core.targets.gpu_common.target import GpuTarget


class CudaRuntime(GpuTarget):
    """The runtime path: the shared GpuProgram on a CudaDevice (driver API, NVRTC)."""

    name = "cuda"
    dialect = CUDA
    install_hint = ("an NVIDIA GPU with its driver (libcuda.so.1), and NVRTC: pip install "
                    "'rlx-explorer[cuda]'")

    def open_device(self) -> Device:
        from rlx_core.targets.cuda.driver import CudaDriverError
        from rlx_core.targets.cuda.nvrtc import find_nvrtc
        from rlx_core.targets.cuda.runtime import CudaDevice
        from rlx_core.targets.cuda.toolchain import find_tools

        try:
            dev = CudaDevice()  # no driver or no GPU: TargetUnavailableError
        except CudaDriverError as err:  # a driver that loads but fails: unavailable, say why
            raise TargetUnavailableError(err.message) from None
        if find_nvrtc()[0] is None and find_tools()[0] is None:
            raise TargetUnavailableError(f"{dev.info.name} is present but neither NVRTC nor "
                                         "nvcc is installed")
        return dev

    def table(self) -> Any:
        from rlx_core.targets.cuda.caps import CAPS

        return CAPS


class CudaTarget(CheckedGpuTarget):
    """The cuda target: the shared GPU renderer's kernels in CUDA C, compile-checked (nvcc,
    ptxas) and run through the driver API where an NVIDIA GPU is present."""

    name = "cuda"
    verification = "compile-check"
    description = ("CUDA C kernels of the shared GPU renderer: nvcc to PTX, ptxas to SASS for "
                   "sm_80 and sm_90; run through the CUDA driver API where an NVIDIA GPU is "
                   "present (none here)")
    dialect = CUDA
    install_hint = "install the CUDA toolkit (nvcc, ptxas) or pip install nvidia-cuda-nvcc-cu12"
    runs_on = "an NVIDIA GPU and the CUDA driver"

    def __init__(self) -> None:
        self.runtime = CudaRuntime()

    def executes_here(self) -> tuple[bool, str]:
        """(True, "") where a GPU, its driver and a CUDA compiler are present."""
        return self.runtime.available()

    def available(self) -> tuple[bool, str]:
        if self.executes_here()[0]:
            return True, ""
        return super().available()

    def build(self, lir: Graph, options: Any = None) -> Program:
        if self.executes_here()[0]:
            return self.runtime.build(lir, options)
        return super().build(lir, options)

    def checker(self) -> tuple[str | None, str]:
        from rlx_core.targets.cuda.toolchain import find_tools

        tools, why = find_tools()
        return (tools[0] if tools else None), why

    def check(self, source: str) -> str:
        from rlx_core.targets.cuda.toolchain import check

        return check(source)

    def table(self) -> Any:
        from rlx_core.targets.cuda.caps import CAPS

        return CAPS
