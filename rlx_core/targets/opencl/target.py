"""OpenClTarget: LIR -> OpenCL C kernels (the shared GPU renderer) -> pyopencl (PoCL here)."""

from __future__ import annotations

from typing import Any

from rlx_core.errors import TargetUnavailableError
from rlx_core.targets.gpu_common.dialect import Dialect
from rlx_core.targets.gpu_common.runtime import Device
from rlx_core.targets.gpu_common.target import GpuTarget
from rlx_core.targets.opencl.dialect import FP64, OPENCL, OPENCL_F64


class OpenClTarget(GpuTarget):
    """OpenCL C on any OpenCL 1.2+ device; on a machine without a GPU, PoCL's CPU device."""

    name = "opencl"
    description = ("OpenCL C kernels through pyopencl: a GPU's OpenCL driver, or PoCL on the "
                   "CPU (the oneAPI-class device)")
    dialect = OPENCL
    install_hint = "pip install pyopencl and an OpenCL driver (Debian: pocl-opencl-icd)"

    def open_device(self) -> Device:
        from rlx_core.targets.opencl.runtime import OpenClDevice

        return OpenClDevice()

    def table(self) -> Any:
        """The static table; with f64 where the live device reports cl_khr_fp64."""
        from rlx_core.targets.opencl.caps import CAPS, with_fp64

        try:
            features = self.device().info.features
        except TargetUnavailableError:
            return CAPS
        return with_fp64(CAPS) if FP64 in features else CAPS

    def dialect_for(self, info: Any) -> Dialect:
        return OPENCL_F64 if FP64 in info.features else OPENCL
