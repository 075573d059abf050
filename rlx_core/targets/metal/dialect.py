"""Metal Shading Language (MSL 2.x), as a dialect of the shared GPU renderer.

A kernel is ``kernel void`` with ``device`` buffer pointers bound by ``[[buffer(i)]]`` and the
thread ids as attributed ``uint3`` parameters; workgroup arrays are ``threadgroup`` locals;
the barrier is ``threadgroup_barrier(mem_flags::mem_threadgroup)``; bit casts are ``as_type``.
Reductions combine a simdgroup's lanes with ``simd_shuffle_xor`` first (Apple GPUs run 32-wide
simdgroups; the lane and simdgroup index come from ``[[thread_index_in_simdgroup]]`` and
``[[simdgroup_index_in_threadgroup]]``). f16 is ``half`` storage computed in f32 and rounded to
half after every op.
"""

from __future__ import annotations

from rlx_core.targets.gpu_common.dialect import Buffer, Dialect, Shared, Subgroup


class Msl(Dialect):
    """The Metal Shading Language for the shared GPU renderer (the metal target)."""

    name = "metal"
    types = {"f32": "float", "f16": "half", "i32": "int", "u32": "uint", "bool": "bool"}
    barrier = "threadgroup_barrier(mem_flags::mem_threadgroup);"
    fabs = "fabs"
    round_even = "rint"
    entry = "rlx_kernel"
    has_f16 = True
    subgroup = Subgroup("32u", "rlx_simd_lane", "rlx_simd_id", "({wg}u >> 5u)", 32)

    _BUILTINS = {"gx": "rlx_gid.x", "gy": "rlx_gid.y", "wx": "rlx_wg.x", "wy": "rlx_wg.y",
                 "wz": "rlx_wg.z", "lx": "rlx_lid.x", "ly": "rlx_lid.y",
                 "li": "(rlx_lid.x + rlx_lid.y * rlx_tpg.x)"}

    def conv(self, key: str, e: str) -> str:
        return f"(({self.t(key)})({e}))"

    def f16_round(self, e: str) -> str:
        return f"float(half({e}))"

    def shuffle_xor(self, e: str, mask: str, key: str) -> str:
        return f"simd_shuffle_xor({e}, (ushort)({mask}))"

    def bitcast(self, key: str, e: str) -> str:
        return f"as_type<{self.t(key)}>({e})"

    def int_binary(self, sym: str, a: str, b: str, key: str) -> str:
        if key != "i32":
            return f"({a} {sym} {b})"
        return f"as_type<int>(as_type<uint>({a}) {sym} as_type<uint>({b}))"

    def int_abs(self, a: str) -> str:
        return f"as_type<int>(abs({a}))"

    def enables(self, uses_f16: bool) -> list[str]:
        return ["#include <metal_stdlib>", "using namespace metal;"]

    def kernel(self, buffers: list[Buffer], shared: list[Shared], wg: tuple[int, int, int],
               prelude: list[str], body: list[str]) -> str:
        args = [f"    device {self.t(b.type)}* {b.var} [[buffer({i})]],  // {b.note}"
                for i, b in enumerate(buffers)]
        ids = ["    uint3 rlx_gid [[thread_position_in_grid]],",
               "    uint3 rlx_wg [[threadgroup_position_in_grid]],",
               "    uint3 rlx_lid [[thread_position_in_threadgroup]],",
               "    uint3 rlx_tpg [[threads_per_threadgroup]],",
               "    uint rlx_simd_lane [[thread_index_in_simdgroup]],",
               "    uint rlx_simd_id [[simdgroup_index_in_threadgroup]]"]
        local = [f"  threadgroup {self.t(s.type)} {s.name}"
                 f"{''.join(f'[{n}]' for n in s.dims)};" for s in shared]
        return "\n".join([
            *prelude, f"// threadgroup size {wg[0]} x {wg[1]} x {wg[2]} (set at dispatch)",
            f"kernel void {self.entry}(", *args, *ids, ") {", *local, *body, "}"]) + "\n"


MSL = Msl()
