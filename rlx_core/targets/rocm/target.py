"""RocmTarget: LIR -> HIP (gpu_common, CUDA dialect spelling) -> hipcc gfx90a/gfx940."""

from __future__ import annotations

from typing import Any

from rlx_core.targets.gpu_common.checked_target import CheckedGpuTarget
from rlx_core.targets.rocm.dialect import HIP


class RocmTarget(CheckedGpuTarget):
    """The rocm target: HIP kernels of the shared GPU renderer, compiled by hipcc for gfx90a
    and gfx940; not run (no AMD GPU)."""

    name = "rocm"
    verification = "compile-check"
    description = ("HIP kernels of the shared GPU renderer: hipcc device code objects for "
                   "gfx90a and gfx940; not run here (no AMD GPU)")
    dialect = HIP
    install_hint = "install hipcc (Debian: hipcc)"
    runs_on = "an AMD GPU and ROCm"

    def checker(self) -> tuple[str | None, str]:
        from rlx_core.targets.rocm.toolchain import find_hipcc

        return find_hipcc()

    def check(self, source: str) -> str:
        from rlx_core.targets.rocm.toolchain import check

        return check(source)

    def table(self) -> Any:
        from rlx_core.targets.rocm.caps import CAPS

        return CAPS
