"""HIP: CUDA's kernel language under AMD's runtime header (the CUDA dialect, renamed; HIP's
shuffle, half header and packed int8 dot product)."""

from __future__ import annotations

from rlx_core.targets.cuda.dialect import Cuda


class Hip(Cuda):
    """HIP for the shared GPU renderer: CUDA's dialect with HIP's headers and shuffles."""

    name = "hip"
    header = "#include <hip/hip_runtime.h>"
    half_header = "#include <hip/hip_fp16.h>"

    def shuffle_xor(self, e: str, mask: str, key: str) -> str:
        # HIP's shuffles take no lane mask; width 32 keeps a 64-wide wavefront's halves apart
        return f"__shfl_xor({e}, (int)({mask}), 32)"

    def dot4_i8(self, a: str, b: str) -> str | None:
        return self.dot4_i8_acc(a, b, "0")

    def dot4_i8_acc(self, a: str, b: str, acc: str) -> str | None:
        # v_dot4(c)_i32_i8 on CDNA2/3 (gfx90a, gfx940: the checked arches); clamp off: wraps
        return f"__builtin_amdgcn_sdot4((int)({a}), (int)({b}), {acc}, false)"


HIP = Hip()
