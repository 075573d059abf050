"""GLSL compute shaders, as a dialect of the shared GPU renderer (gpu_common).

One dialect for GLSL 4.30 (OpenGL) and GLSL 4.50 (Vulkan, through SPIR-V): they differ in the
``#version`` line and in descriptor sets on the buffer layouts. Buffers are ``std430`` shader
storage blocks, shared arrays are ``shared``, a barrier also makes shared writes visible.
Mesa's GLSL compilers optimise floats as if inf and NaN did not exist, so ``ieee_guards``.
"""

from __future__ import annotations

from rlx_core.targets.gpu_common.dialect import Buffer, Dialect, Shared


class Glsl(Dialect):
    """GLSL 4.30 compute shaders for the shared GPU renderer (the opengl target; Vulkan's
    GLSL 4.50 dialects build on it)."""

    name = "glsl"
    types = {"f32": "float", "f16": "float16_t", "i32": "int", "u32": "uint", "bool": "bool"}
    barrier = "memoryBarrierShared(); barrier();"
    round_even = "roundEven"
    ieee_guards = True
    entry = "main"
    version = "430"
    set_layout = ""  # Vulkan: "set = 0, "

    _BUILTINS = {"gx": "gl_GlobalInvocationID.x", "gy": "gl_GlobalInvocationID.y",
                 "wx": "gl_WorkGroupID.x", "wy": "gl_WorkGroupID.y", "wz": "gl_WorkGroupID.z",
                 "lx": "gl_LocalInvocationID.x", "ly": "gl_LocalInvocationID.y",
                 "li": "gl_LocalInvocationIndex"}

    def bitcast(self, key: str, e: str) -> str:
        # every bitcast the renderer makes is float <-> uint
        return f"floatBitsToUint({e})" if key == "u32" else f"uintBitsToFloat({e})"

    def kernel(self, buffers: list[Buffer], shared: list[Shared], wg: tuple[int, int, int],
               prelude: list[str], body: list[str]) -> str:
        return "\n".join([
            f"#version {self.version}",
            f"layout(local_size_x = {wg[0]}, local_size_y = {wg[1]}, local_size_z = {wg[2]}) in;",
            *[f"layout(std430, {self.set_layout}binding = {b.slot}) buffer B{b.slot} "
              f"{{ {self.t(b.type)} {b.var}[]; }};  // {b.note}" for b in buffers],
            *[f"shared {self.t(s.type)} {s.name}{''.join(f'[{n}]' for n in s.dims)};"
              for s in shared],
            *prelude, "void main() {", *body, "}"]) + "\n"


GLSL430 = Glsl()
