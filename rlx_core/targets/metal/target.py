"""MetalTarget: LIR -> MSL (gpu_common) -> a strict clang++ syntax pass (syntax-checked)."""

from __future__ import annotations

from typing import Any

from rlx_core.targets.base import Verification
from rlx_core.targets.gpu_common.checked_target import CheckedGpuTarget
from rlx_core.targets.metal.dialect import MSL


class MetalTarget(CheckedGpuTarget):
    """The metal target: MSL kernels of the shared GPU renderer, syntax-checked by clang++ with
    a metal_stdlib shim; not run (no Apple GPU)."""

    name = "metal"
    verification = Verification.SYNTAX_CHECKED
    description = ("Metal Shading Language kernels of the shared GPU renderer: no Metal "
                   "compiler exists for Linux, so a strict clang++ syntax pass with a "
                   "metal_stdlib shim; not run here (no Apple GPU)")
    dialect = MSL
    install_hint = "install clang++ (Debian: clang)"
    runs_on = "an Apple GPU"

    def checker(self) -> tuple[str | None, str]:
        from rlx_core.targets.metal.toolchain import find_clangxx

        return find_clangxx()

    def check(self, source: str) -> str:
        from rlx_core.targets.metal.toolchain import check

        return check(source)

    def table(self) -> Any:
        from rlx_core.targets.metal.caps import CAPS

        return CAPS
