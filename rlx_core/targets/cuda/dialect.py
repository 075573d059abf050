"""CUDA C++, as a dialect of the shared GPU renderer; HIP is the same language with another
header (``rocm/dialect.py``).

Kernels are ``extern "C" __global__`` functions with ``__launch_bounds__`` of the workgroup
size, buffers as ``__restrict__`` pointers, ``__shared__`` arrays and ``__syncthreads()``.
Signed 32-bit + - * << go through unsigned arithmetic (signed overflow is undefined in C++;
the reference wraps); bit casts go through ``memcpy`` in a small template; ``clamp`` (a
builtin in OpenCL, GLSL and MSL) is defined for int. Reductions combine a warp's 32 lanes
with ``__shfl_xor_sync`` before shared memory. f16 is ``__half`` storage (``cuda_fp16.h``)
computed in f32 and rounded to half after every op: for + - * / and sqrt that is exactly
IEEE half arithmetic (f32 has more than 2 x 11 + 2 bits), and it is what the reference does.
int8 dot products on packed words are ``__dp4a`` (HIP: ``__builtin_amdgcn_sdot4``).
"""

from __future__ import annotations

from rlx_core.targets.gpu_common.dialect import Buffer, Dialect, Shared, Subgroup


class Cuda(Dialect):
    """CUDA C for the shared GPU renderer (gpu_common): types, barrier, builtins, shuffles."""

    name = "cuda"
    types = {"f32": "float", "f16": "__half", "i32": "int", "u32": "uint", "bool": "bool"}
    barrier = "__syncthreads();"
    fabs = "fabsf"
    round_even = "rintf"
    entry = "rlx_kernel"
    header = ""  # HIP: #include <hip/hip_runtime.h>
    half_header = "#include <cuda_fp16.h>"
    has_f16 = True
    # a warp is 32 lanes (HIP: shuffles of width 32 also on 64-wide CDNA wavefronts)
    subgroup = Subgroup("32u", "({lid} & 31u)", "({lid} >> 5u)", "({wg}u >> 5u)", 32)

    _BUILTINS = {"gx": "(blockIdx.x * blockDim.x + threadIdx.x)",
                 "gy": "(blockIdx.y * blockDim.y + threadIdx.y)",
                 "wx": "blockIdx.x", "wy": "blockIdx.y", "wz": "blockIdx.z",
                 "lx": "threadIdx.x", "ly": "threadIdx.y",
                 "li": "(threadIdx.x + threadIdx.y * blockDim.x)"}

    def conv(self, key: str, e: str) -> str:
        if key == "f16":
            return f"__float2half_rn({e})"
        return f"(({self.t(key)})({e}))"

    def f16_round(self, e: str) -> str:
        return f"__half2float(__float2half_rn({e}))"

    def shuffle_xor(self, e: str, mask: str, key: str) -> str:
        return f"__shfl_xor_sync(0xffffffffu, {e}, (int)({mask}))"

    def bitcast(self, key: str, e: str) -> str:
        return f"rlx_bits<{self.t(key)}>({e})"

    def int_binary(self, sym: str, a: str, b: str, key: str) -> str:
        if key != "i32":
            return f"({a} {sym} {b})"
        return f"((int)((uint)({a}) {sym} (uint)({b})))"

    def int_abs(self, a: str) -> str:
        return f"((int)(({a}) < 0 ? 0u - (uint)({a}) : (uint)({a})))"

    # int8 (gpu_common/int8.py): __dp4a (sm_61+) multiplies four signed bytes of each word and
    # adds them and the accumulator in one instruction (PTX dp4a.s32.s32), wrapping in 32 bits
    int8_path = "packed-dot"

    def dot4_i8(self, a: str, b: str) -> str | None:
        return f"__dp4a((int)({a}), (int)({b}), 0)"

    def dot4_i8_acc(self, a: str, b: str, acc: str) -> str | None:
        return f"__dp4a((int)({a}), (int)({b}), {acc})"

    def enables(self, uses_f16: bool) -> list[str]:
        return [*([self.header] if self.header else []),
                *([self.half_header] if uses_f16 else []),
                "#ifndef RLX_CUDA_BASE", "#define RLX_CUDA_BASE",
                "typedef unsigned int uint;",
                "__device__ inline int clamp(int x, int lo, int hi) "
                "{ return x < lo ? lo : (x > hi ? hi : x); }",
                "template <typename T, typename S> __device__ inline T rlx_bits(S s) "
                "{ T t; memcpy(&t, &s, sizeof t); return t; }",
                "#endif"]

    def function(self, name: str, params: list[tuple[str, str]], ret: str) -> str:
        args = ", ".join(f"{self.t(k)} {p}" for p, k in params)
        return f"__device__ inline {self.t(ret)} {name}({args}) {{"

    def kernel(self, buffers: list[Buffer], shared: list[Shared], wg: tuple[int, int, int],
               prelude: list[str], body: list[str]) -> str:
        args = [f"    {self.t(b.type)}* __restrict__ {b.var}" for b in buffers]
        params = [f"{a}{',' if i < len(args) - 1 else ''}  // {b.note}"
                  for i, (a, b) in enumerate(zip(args, buffers, strict=True))]
        local = [f"  __shared__ {self.t(s.type)} {s.name}"
                 f"{''.join(f'[{n}]' for n in s.dims)};" for s in shared]
        return "\n".join([
            *prelude,
            f"extern \"C\" __global__ void __launch_bounds__({wg[0] * wg[1] * wg[2]}) "
            f"{self.entry}(", *params, ") {", *local, *body, "}"]) + "\n"


CUDA = Cuda()
