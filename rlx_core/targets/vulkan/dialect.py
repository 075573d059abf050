"""GLSL 4.50 for Vulkan: the OpenGL target's GLSL dialect with descriptor sets; glslang
compiles it to SPIR-V, which is what runs (toolchain.py). Where the device has subgroup
shuffles in compute shaders (Vulkan 1.1; lavapipe has them, 8 lanes wide), the variant
``GLSL450_SUBGROUP`` reduces with ``subgroupShuffleXor`` (GL_KHR_shader_subgroup) first."""

from __future__ import annotations

from rlx_core.targets.gpu_common.dialect import Buffer, Shared, Subgroup
from rlx_core.targets.opengl.dialect import Glsl


class Glsl450(Glsl):
    name = "glsl450"
    version = "450"
    set_layout = "set = 0, "


GLSL450 = Glsl450()


class Glsl450Subgroup(Glsl450):
    """GLSL 4.50 with KHR subgroup shuffles: the width is the device's (a builtin)."""

    name = "glsl450-subgroup"
    subgroup = Subgroup("gl_SubgroupSize", "gl_SubgroupInvocationID", "gl_SubgroupID",
                        "gl_NumSubgroups", 1)
    extensions = ("GL_KHR_shader_subgroup_basic", "GL_KHR_shader_subgroup_shuffle")

    def shuffle_xor(self, e: str, mask: str, key: str) -> str:
        return f"subgroupShuffleXor({e}, {mask})"

    def kernel(self, buffers: list[Buffer], shared: list[Shared], wg: tuple[int, int, int],
               prelude: list[str], body: list[str]) -> str:
        head, rest = super().kernel(buffers, shared, wg, prelude, body).split("\n", 1)
        # extensions go right after #version, before any other token
        return "\n".join([head, *(f"#extension {x} : require" for x in self.extensions),
                          rest])


GLSL450_SUBGROUP = Glsl450Subgroup()
