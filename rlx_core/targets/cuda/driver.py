"""The CUDA driver API through ctypes on ``libcuda.so.1``: the few calls the cuda runtime makes.

No Python binding is needed: the driver library ships with every NVIDIA driver, so a machine
that has a GPU has it. Every call's ``CUresult`` goes through ``check``; a failure is a
``CudaDriverError`` naming the call and the driver's error name and text.
"""

from __future__ import annotations

import ctypes
import os
from typing import Any

from rlx_core.errors import RlxError, TargetUnavailableError

# CUresult values named in messages without asking the driver (it may not have loaded)
NAMES = {0: "CUDA_SUCCESS", 1: "CUDA_ERROR_INVALID_VALUE", 2: "CUDA_ERROR_OUT_OF_MEMORY",
         3: "CUDA_ERROR_NOT_INITIALIZED", 100: "CUDA_ERROR_NO_DEVICE",
         101: "CUDA_ERROR_INVALID_DEVICE", 200: "CUDA_ERROR_INVALID_IMAGE",
         209: "CUDA_ERROR_NO_BINARY_FOR_GPU", 218: "CUDA_ERROR_INVALID_PTX",
         222: "CUDA_ERROR_UNSUPPORTED_PTX_VERSION", 500: "CUDA_ERROR_NOT_FOUND",
         700: "CUDA_ERROR_ILLEGAL_ADDRESS", 701: "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES",
         702: "CUDA_ERROR_LAUNCH_TIMEOUT", 719: "CUDA_ERROR_LAUNCH_FAILED",
         999: "CUDA_ERROR_UNKNOWN"}

# CUdevice_attribute values the runtime reads
MAX_THREADS_PER_BLOCK = 1
CC_MAJOR, CC_MINOR = 75, 76


class CudaDriverError(RlxError):
    """A CUDA driver API call failed (a launch, a copy, loading a module)."""

    code = "RLX-H005"


def _lib_name() -> str:
    return os.environ.get("RLX_LIBCUDA", "libcuda.so.1")


def load() -> Any:
    """The driver library, initialised; TargetUnavailableError when there is none or no GPU."""
    try:
        lib = ctypes.CDLL(_lib_name())
    except OSError as err:
        raise TargetUnavailableError(f"no CUDA driver library ({_lib_name()}: {err})") from None
    res = lib.cuInit(0)
    if res != 0:
        raise TargetUnavailableError(f"cuInit failed: {error_name(lib, res)} (no usable "
                                     "NVIDIA GPU)")
    count = ctypes.c_int(0)
    check(lib, lib.cuDeviceGetCount(ctypes.byref(count)), "cuDeviceGetCount")
    if count.value == 0:
        raise TargetUnavailableError("the CUDA driver sees no device")
    return lib


def error_name(lib: Any, res: int) -> str:
    """``CUDA_ERROR_X (the driver's text)`` for a CUresult."""
    name, text = NAMES.get(res, f"CUresult {res}"), ""
    if lib is not None:
        p = ctypes.c_char_p()
        if lib.cuGetErrorName(res, ctypes.byref(p)) == 0 and p.value:
            name = p.value.decode()
        if lib.cuGetErrorString(res, ctypes.byref(p)) == 0 and p.value:
            text = p.value.decode()
    return f"{name} ({text})" if text else name


def check(lib: Any, res: int, call: str, what: str = "") -> None:
    """Raise CudaDriverError if ``res`` (a CUresult) is not CUDA_SUCCESS."""
    if res != 0:
        raise CudaDriverError(
            f"{call}{' (' + what + ')' if what else ''} failed: {error_name(lib, res)}",
            hint="a launch fault poisons the context: restart the process; if it repeats, "
                 "report it with `rlx compile FILE --target cuda --emit source`")


def device_attribute(lib: Any, dev: int, attr: int) -> int:
    v = ctypes.c_int(0)
    check(lib, lib.cuDeviceGetAttribute(ctypes.byref(v), attr, dev), "cuDeviceGetAttribute")
    return v.value


__all__ = ["CudaDriverError", "check", "device_attribute", "error_name", "load"]
