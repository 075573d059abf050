"""DirectXTarget: LIR -> HLSL (the shared GPU renderer) -> SPIR-V (glslang's HLSL front end)
-> the Vulkan device. DXIL is not produced here; the label says so."""

from __future__ import annotations

from typing import Any

from rlx_core.targets.directx.dialect import HLSL
from rlx_core.targets.gpu_common.runtime import Device
from rlx_core.targets.gpu_common.target import GpuTarget


class DirectXTarget(GpuTarget):
    """HLSL compute shaders, executed through SPIR-V on Vulkan (lavapipe without a GPU)."""

    name = "directx"
    verification = "executes (via SPIR-V)"
    description = ("HLSL Shader Model 6 compute shaders, compiled to SPIR-V by glslang's HLSL "
                   "front end and run through Vulkan (no DXIL, no Direct3D device here)")
    dialect = HLSL
    install_hint = ("pip install vulkan; Debian: libvulkan1 mesa-vulkan-drivers glslang-tools "
                    "spirv-tools")

    def open_device(self) -> Device:
        from rlx_core.targets.directx.runtime import HlslDevice
        from rlx_core.targets.vulkan.toolchain import tools

        tools()
        return HlslDevice()

    def table(self) -> Any:
        from rlx_core.targets.directx.caps import CAPS

        return CAPS
