"""GLSL 4.50 for Vulkan: the OpenGL target's GLSL dialect with descriptor sets; glslang
compiles it to SPIR-V, which is what runs (toolchain.py). Variants by device feature:

- subgroup shuffles in compute shaders (Vulkan 1.1; lavapipe has them, 8 lanes wide):
  reductions go through ``subgroupShuffleXor`` (GL_KHR_shader_subgroup) first;
- VK_KHR_shader_integer_dot_product (lavapipe has it): int_linear's packed int8 words
  (gpu_common/int8.py) meet in SPIR-V's ``OpSDot``. glslang 12 has no GL_EXT_integer_dot_product,
  so the instruction is declared through GL_EXT_spirv_intrinsics (``spirv_instruction``, the
  capabilities DotProduct and DotProductInput4x8BitPacked, PackedVectorFormat4x8Bit).
"""

from __future__ import annotations

from functools import cache

from rlx_core.targets.gpu_common.dialect import Buffer, Shared, Subgroup
from rlx_core.targets.opengl.dialect import Glsl

_SDOT = ('spirv_instruction(extensions = ["SPV_KHR_integer_dot_product"], '
         "capabilities = [6019, 6018], id = 4450)",  # DotProduct(KHR), ...4x8BitPacked; OpSDot
         "int rlx_sdot4(uint a, uint b, spirv_literal int fmt);")


class Glsl450(Glsl):
    """GLSL 4.50 for Vulkan (glslang to SPIR-V): OpenGL's dialect with descriptor set 0 and
    the extensions a variant requires, placed right after ``#version``."""

    name = "glsl450"
    version = "450"
    set_layout = "set = 0, "
    extensions: tuple[str, ...] = ()

    def kernel(self, buffers: list[Buffer], shared: list[Shared], wg: tuple[int, int, int],
               prelude: list[str], body: list[str]) -> str:
        ext = [*(f"#extension {x} : require" for x in self.extensions),
               *(p for p in prelude if p.startswith("#extension "))]
        rest = [p for p in prelude if not p.startswith("#extension ")]
        head, tail = super().kernel(buffers, shared, wg, rest, body).split("\n", 1)
        # extensions go right after #version, before any other token
        return "\n".join([head, *ext, tail])


class Glsl450Subgroup(Glsl450):
    """GLSL 4.50 with KHR subgroup shuffles: the width is the device's (a builtin)."""

    name = "glsl450-subgroup"
    subgroup = Subgroup("gl_SubgroupSize", "gl_SubgroupInvocationID", "gl_SubgroupID",
                        "gl_NumSubgroups", 1)
    extensions = ("GL_KHR_shader_subgroup_basic", "GL_KHR_shader_subgroup_shuffle")

    def shuffle_xor(self, e: str, mask: str, key: str) -> str:
        return f"subgroupShuffleXor({e}, {mask})"


class PackedDot:
    """Mixin: int8 dot products by ``OpSDot`` on packed words (the device enables the
    integer dot product feature: vulkan/runtime.py)."""

    int8_path = "packed-dot"

    def dot4_i8(self, a: str, b: str) -> str | None:
        return f"rlx_sdot4({a}, {b}, 0)"  # 0: PackedVectorFormat4x8Bit

    def dot4_decl(self) -> list[str]:
        return ["#extension GL_EXT_spirv_intrinsics : require", *_SDOT]


class Glsl450Dot(PackedDot, Glsl450):
    """GLSL 4.50 with int8 dot products on packed words (PackedDot)."""

    name = "glsl450-dot"


class Glsl450SubgroupDot(PackedDot, Glsl450Subgroup):
    """GLSL 4.50 with subgroup shuffles and int8 dot products on packed words."""

    name = "glsl450-subgroup-dot"


GLSL450 = Glsl450()
GLSL450_SUBGROUP = Glsl450Subgroup()


@cache
def glsl450(subgroup: bool, dot: bool) -> Glsl450:
    """The variant for a device with (or without) subgroup shuffles and packed int8 dots."""
    if dot:
        return Glsl450SubgroupDot() if subgroup else Glsl450Dot()
    return GLSL450_SUBGROUP if subgroup else GLSL450
