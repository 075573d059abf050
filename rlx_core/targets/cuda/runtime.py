"""The CUDA device (gpu_common.runtime.Device) on the driver API: the cuda target's runtime path.

One primary context on device ``$RLX_CUDA_DEVICE`` (default 0), made current before every call
(the caller's thread may change). Kernels are compiled per source (comments stripped, as on
OpenCL), all new ones of a graph in one NVRTC unit, to a cubin for the device's own arch
(nvrtc.py), loaded with ``cuModuleLoadData``. Launches go on the legacy default stream, so the
blocking ``cuMemcpyDtoH`` of a download waits for them and reports a kernel's fault.
"""

from __future__ import annotations

import ctypes
import os
import threading
import weakref
from typing import Any

from rlx_core.targets.cuda import driver
from rlx_core.targets.cuda.dialect import CUDA
from rlx_core.targets.gpu_common.kernels import GpuKernel
from rlx_core.targets.gpu_common.plan import AdapterInfo
from rlx_core.targets.gpu_common.runtime import source_key

_u64, _p, _sz, _i = ctypes.c_uint64, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int
# argument types of the calls made (ctypes would pass a 64-bit device pointer as a C int)
SIGNATURES: dict[str, list[Any]] = {
    "cuDeviceGet": [ctypes.POINTER(_i), _i],
    "cuDeviceGetName": [ctypes.c_char_p, _i, _i],
    "cuDeviceTotalMem_v2": [ctypes.POINTER(_sz), _i],
    "cuDevicePrimaryCtxRetain": [ctypes.POINTER(_p), _i],
    "cuCtxSetCurrent": [_p],
    "cuDriverGetVersion": [ctypes.POINTER(_i)],
    "cuMemAlloc_v2": [ctypes.POINTER(_u64), _sz],
    "cuMemFree_v2": [_u64],
    "cuMemcpyHtoD_v2": [_u64, ctypes.c_char_p, _sz],
    "cuMemcpyDtoH_v2": [_p, _u64, _sz],
    "cuModuleLoadData": [ctypes.POINTER(_p), ctypes.c_char_p],
    "cuModuleGetFunction": [ctypes.POINTER(_p), _p, ctypes.c_char_p],
    "cuLaunchKernel": [_p, ctypes.c_uint, ctypes.c_uint, ctypes.c_uint, ctypes.c_uint,
                       ctypes.c_uint, ctypes.c_uint, ctypes.c_uint, _p,
                       ctypes.POINTER(_p), ctypes.POINTER(_p)],
    "cuCtxSynchronize": [],
}


class CudaBuffer:
    """One device allocation; freed when the last reference goes."""

    def __init__(self, lib: Any, nbytes: int) -> None:
        self.ptr = _u64(0)
        driver.check(lib, lib.cuMemAlloc_v2(ctypes.byref(self.ptr), max(nbytes, 4)),
                     "cuMemAlloc", f"{nbytes} bytes")
        weakref.finalize(self, lib.cuMemFree_v2, self.ptr.value)


class CudaDevice:
    """One CUDA device and its primary context (gpu_common.runtime.Device)."""

    def __init__(self) -> None:
        lib = driver.load()
        for name, args in SIGNATURES.items():
            getattr(lib, name).argtypes = args
        self.lib, self.lock = lib, threading.Lock()
        dev = _i(0)
        driver.check(lib, lib.cuDeviceGet(ctypes.byref(dev),
                                          int(os.environ.get("RLX_CUDA_DEVICE", "0"))),
                     "cuDeviceGet")
        self.dev = dev.value
        name = ctypes.create_string_buffer(256)
        driver.check(lib, lib.cuDeviceGetName(name, 256, self.dev), "cuDeviceGetName")
        mem, ver = _sz(0), _i(0)
        driver.check(lib, lib.cuDeviceTotalMem_v2(ctypes.byref(mem), self.dev),
                     "cuDeviceTotalMem")
        lib.cuDriverGetVersion(ctypes.byref(ver))
        self.sm = (driver.device_attribute(lib, self.dev, driver.CC_MAJOR) * 10
                   + driver.device_attribute(lib, self.dev, driver.CC_MINOR))
        self.ctx = _p()
        driver.check(lib, lib.cuDevicePrimaryCtxRetain(ctypes.byref(self.ctx), self.dev),
                     "cuDevicePrimaryCtxRetain")
        self._current()
        self.functions: dict[str, Any] = {}
        self.modules: list[Any] = []
        self.compiled_with = ""
        self.info = AdapterInfo(
            name=name.value.decode(), features=(f"sm_{self.sm}",),
            # kernel parameters are 4 KiB at least: 512 pointers
            max_storage_buffers=512, max_buffer_bytes=int(mem.value),
            max_workgroup_size=driver.device_attribute(lib, self.dev,
                                                       driver.MAX_THREADS_PER_BLOCK),
            backend=f"CUDA driver {ver.value // 1000}.{ver.value % 1000 // 10}, "
                    f"sm_{self.sm}")

    def _current(self) -> None:
        driver.check(self.lib, self.lib.cuCtxSetCurrent(self.ctx), "cuCtxSetCurrent")

    def alloc(self, nbytes: int) -> CudaBuffer:
        self._current()
        return CudaBuffer(self.lib, nbytes)

    def upload(self, buf: CudaBuffer, data: bytes) -> None:
        self._current()
        driver.check(self.lib, self.lib.cuMemcpyHtoD_v2(buf.ptr.value, data, len(data)),
                     "cuMemcpyHtoD", f"{len(data)} bytes")

    def download(self, buf: CudaBuffer, nbytes: int) -> bytes:
        self._current()
        out = ctypes.create_string_buffer(max(nbytes, 1))
        driver.check(self.lib, self.lib.cuMemcpyDtoH_v2(out, buf.ptr.value, nbytes),
                     "cuMemcpyDtoH", "a kernel launched before it may have faulted")
        return out.raw[:nbytes]

    def compile(self, kernels: list[GpuKernel]) -> list[Any]:
        """One module for every kernel not built yet (one NVRTC run per graph)."""
        from rlx_core.targets.cuda.nvrtc import compile_image

        keys = [source_key(k.source) for k in kernels]
        todo = {key: k for key, k in zip(keys, kernels, strict=True)
                if key not in self.functions}
        if todo:
            names = {key: f"rlx_k{len(self.functions) + i}" for i, key in enumerate(todo)}
            source = "\n".join(k.source.replace(f" {CUDA.entry}(", f" {names[key]}(")
                               for key, k in todo.items())
            image, kind, self.compiled_with = compile_image(source, self.sm)
            self._current()
            mod = _p()
            driver.check(self.lib, self.lib.cuModuleLoadData(ctypes.byref(mod), image),
                         "cuModuleLoadData", f"a {kind} from {self.compiled_with}")
            self.modules.append(mod)
            for key, name in names.items():
                fn = _p()
                driver.check(self.lib, self.lib.cuModuleGetFunction(ctypes.byref(fn), mod,
                                                                    name.encode()),
                             "cuModuleGetFunction", name)
                self.functions[key] = fn
        return [self.functions[key] for key in keys]

    def launch(self, handle: Any, kernel: GpuKernel, buffers: list[CudaBuffer]) -> None:
        args = (_p * len(buffers))(*[ctypes.addressof(b.ptr) for b in buffers])
        (gx, gy, gz), (bx, by, bz) = kernel.workgroups, kernel.local
        self._current()
        driver.check(self.lib, self.lib.cuLaunchKernel(handle, gx, gy, gz, bx, by, bz, 0,
                                                       None, args, None),
                     "cuLaunchKernel", kernel.name)

    def synchronize(self) -> None:
        self._current()
        driver.check(self.lib, self.lib.cuCtxSynchronize(), "cuCtxSynchronize")


__all__ = ["CudaBuffer", "CudaDevice", "SIGNATURES"]
