"""VulkanTarget: LIR -> GLSL 4.50 (the shared GPU renderer) -> SPIR-V (glslang) -> Vulkan."""

from __future__ import annotations

from typing import Any

from rlx_core.targets.gpu_common.runtime import Device
from rlx_core.targets.gpu_common.target import GpuTarget
from rlx_core.targets.vulkan.dialect import GLSL450


class VulkanTarget(GpuTarget):
    """SPIR-V compute pipelines through the Vulkan API; Mesa lavapipe without a GPU."""

    name = "vulkan"
    description = ("GLSL 4.50 compute shaders compiled to SPIR-V by glslang (validated by "
                   "spirv-val), run through the Vulkan API (Mesa lavapipe without a GPU)")
    dialect = GLSL450
    install_hint = ("pip install vulkan; Debian: libvulkan1 mesa-vulkan-drivers glslang-tools "
                    "spirv-tools")

    def open_device(self) -> Device:
        from rlx_core.targets.vulkan.runtime import VulkanDevice
        from rlx_core.targets.vulkan.toolchain import tools

        tools()  # no glslang or spirv-val: unavailable, with which one
        return VulkanDevice()

    def dialect_for(self, info: Any) -> Any:
        from rlx_core.targets.vulkan.dialect import glsl450
        from rlx_core.targets.vulkan.runtime import INTEGER_DOT, SUBGROUP_SHUFFLE

        return glsl450(SUBGROUP_SHUFFLE in info.features, INTEGER_DOT in info.features)

    def table(self) -> Any:
        from rlx_core.targets.vulkan.caps import CAPS

        return CAPS
