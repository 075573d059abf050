"""HIP: CUDA's kernel language under AMD's runtime header (the CUDA dialect, renamed)."""

from __future__ import annotations

from rlx_core.targets.cuda.dialect import Cuda


class Hip(Cuda):
    name = "hip"
    header = "#include <hip/hip_runtime.h>"


HIP = Hip()
