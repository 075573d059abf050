"""HLSL (Shader Model 6 compute), as a dialect of the shared GPU renderer (gpu_common).

Buffers are ``RWStructuredBuffer<T>`` with explicit Vulkan bindings (``[[vk::binding]]``, so
glslang's HLSL front end places them where the runtime binds them), shared arrays are
``groupshared``, builtins are ``SV_*`` semantics on the entry point's parameters, bitcasts
are ``asuint``/``asfloat``. It runs on lavapipe through SPIR-V, hence ``ieee_guards``.
"""

from __future__ import annotations

from rlx_core.targets.gpu_common.dialect import Buffer, Dialect, Shared


class Hlsl(Dialect):
    """HLSL compute shaders for the shared GPU renderer (the directx target)."""

    name = "hlsl"
    types = {"f32": "float", "f16": "half", "i32": "int", "u32": "uint", "bool": "bool"}
    barrier = "GroupMemoryBarrierWithGroupSync();"
    ieee_guards = True
    entry = "main"

    _BUILTINS = {"gx": "gid.x", "gy": "gid.y", "wx": "wid.x", "wy": "wid.y", "wz": "wid.z",
                 "lx": "lid3.x", "ly": "lid3.y", "li": "lidx"}

    def bitcast(self, key: str, e: str) -> str:
        return f"as{self.t(key)}({e})"

    def kernel(self, buffers: list[Buffer], shared: list[Shared], wg: tuple[int, int, int],
               prelude: list[str], body: list[str]) -> str:
        return "\n".join([
            *[f"[[vk::binding({b.slot}, 0)]] RWStructuredBuffer<{self.t(b.type)}> {b.var} : "
              f"register(u{b.slot});  // {b.note}" for b in buffers],
            *[f"groupshared {self.t(s.type)} {s.name}{''.join(f'[{n}]' for n in s.dims)};"
              for s in shared],
            *prelude,
            f"[numthreads({wg[0]}, {wg[1]}, {wg[2]})]",
            "void main(uint3 gid : SV_DispatchThreadID, uint3 wid : SV_GroupID,",
            "          uint3 lid3 : SV_GroupThreadID, uint lidx : SV_GroupIndex) {",
            *body, "}"]) + "\n"


HLSL = Hlsl()
