"""HIP: CUDA's kernel language under AMD's runtime header (the CUDA dialect, renamed; HIP's
shuffle and half header)."""

from __future__ import annotations

from rlx_core.targets.cuda.dialect import Cuda


class Hip(Cuda):
    name = "hip"
    header = "#include <hip/hip_runtime.h>"
    half_header = "#include <hip/hip_fp16.h>"

    def shuffle_xor(self, e: str, mask: str, key: str) -> str:
        # HIP's shuffles take no lane mask; width 32 keeps a 64-wide wavefront's halves apart
        return f"__shfl_xor({e}, (int)({mask}), 32)"


HIP = Hip()
