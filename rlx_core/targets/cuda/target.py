"""CudaTarget: LIR -> CUDA C (gpu_common) -> nvcc PTX -> ptxas sm_80/sm_90 (compile-check)."""

from __future__ import annotations

from typing import Any

from rlx_core.targets.cuda.dialect import CUDA
from rlx_core.targets.gpu_common.checked_target import CheckedGpuTarget


class CudaTarget(CheckedGpuTarget):
    name = "cuda"
    verification = "compile-check"
    description = ("CUDA C kernels of the shared GPU renderer: nvcc to PTX, ptxas to SASS for "
                   "sm_80 and sm_90; not run here (no NVIDIA GPU)")
    dialect = CUDA
    install_hint = "install the CUDA toolkit (nvcc, ptxas) or pip install nvidia-cuda-nvcc-cu12"
    runs_on = "an NVIDIA GPU and the CUDA driver"

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
