"""OpenCL C 1.2, as a dialect of the shared GPU renderer (gpu_common).

Kernels take their buffers as ``__global`` pointer arguments and declare ``__local`` arrays
inside the kernel. Signed overflow is undefined in C, so 32-bit signed + - * << go through
``as_uint`` and back (the reference wraps); ``abs(int)`` returns uint; float literals carry
``f`` (a bare ``1.0`` is a double). ``OPENCL_F64`` is the variant for devices that report
``cl_khr_fp64``: f64 values are ``double`` in buffers and registers (the extension enabled at the
top of each kernel); the target picks it from the live device's extensions.
"""

from __future__ import annotations

from rlx_core.targets.gpu_common.dialect import Buffer, Dialect, Shared


class OpenCl(Dialect):
    """OpenCL C for the shared GPU renderer (the opencl target)."""

    name = "opencl"
    types = {"f32": "float", "f16": "half", "i32": "int", "u32": "uint", "bool": "bool"}
    barrier = "barrier(CLK_LOCAL_MEM_FENCE);"
    fabs = "fabs"
    round_even = "rint"
    entry = "rlx_kernel"

    _BUILTINS = {"gx": "(uint)get_global_id(0)", "gy": "(uint)get_global_id(1)",
                 "wx": "(uint)get_group_id(0)", "wy": "(uint)get_group_id(1)",
                 "wz": "(uint)get_group_id(2)", "lx": "(uint)get_local_id(0)",
                 "ly": "(uint)get_local_id(1)",
                 "li": "(uint)(get_local_id(0) + get_local_id(1) * get_local_size(0))"}

    def conv(self, key: str, e: str) -> str:
        return f"(({self.t(key)})({e}))"

    def bitcast(self, key: str, e: str) -> str:
        return f"as_{self.t(key)}({e})"

    def int_binary(self, sym: str, a: str, b: str, key: str) -> str:
        if key != "i32":
            return f"({a} {sym} {b})"
        return f"as_int(as_uint({a}) {sym} as_uint({b}))"

    def int_abs(self, a: str) -> str:
        return f"as_int(abs({a}))"

    def kernel(self, buffers: list[Buffer], shared: list[Shared], wg: tuple[int, int, int],
               prelude: list[str], body: list[str]) -> str:
        args = [f"    __global {self.t(b.type)}* restrict {b.var}" for b in buffers]
        params = [f"{a}{',' if i < len(args) - 1 else ''}  // {b.note}"
                  for i, (a, b) in enumerate(zip(args, buffers, strict=True))]
        local = [f"  __local {self.t(s.type)} {s.name}"
                 f"{''.join(f'[{n}]' for n in s.dims)};" for s in shared]
        return "\n".join([
            *prelude,
            f"__kernel __attribute__((reqd_work_group_size({wg[0]}, {wg[1]}, {wg[2]})))",
            f"void {self.entry}(", *params, ") {", *local, *body, "}"]) + "\n"


class OpenClF64(OpenCl):
    """OpenCL C on a device with cl_khr_fp64: f64 computes in double."""

    types = {**OpenCl.types, "f64": "double", "u64": "ulong"}
    has_f64 = True

    def enables(self, uses_f16: bool) -> list[str]:
        return ["#pragma OPENCL EXTENSION cl_khr_fp64 : enable"]


OPENCL = OpenCl()
OPENCL_F64 = OpenClF64()
FP64 = "cl_khr_fp64"  # the extension that selects OPENCL_F64 and the f64 claims
