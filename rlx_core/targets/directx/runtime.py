"""The DirectX target's device: the Vulkan device, fed SPIR-V from glslang's HLSL front end."""

from __future__ import annotations

from rlx_core.targets.vulkan.runtime import VulkanDevice


class HlslDevice(VulkanDevice):
    stage = "hlsl"
    api = "HLSL"
