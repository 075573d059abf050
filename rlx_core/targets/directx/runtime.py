"""The DirectX target's device: the Vulkan device, fed SPIR-V from glslang's HLSL front end."""

from __future__ import annotations

from rlx_core.targets.vulkan.runtime import VulkanDevice


class HlslDevice(VulkanDevice):
    """The Vulkan device running the directx target's HLSL, compiled to SPIR-V by glslang."""

    stage = "hlsl"
    api = "HLSL"
