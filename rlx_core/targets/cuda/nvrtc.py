"""CUDA C -> a loadable image (cubin for the device's arch, else PTX) for the cuda runtime.

NVRTC through ctypes: the library of PyPI's ``nvidia-cuda-nvrtc-cu12`` wheel (the ``cuda``
extra; it runs on any driver of CUDA 12.0 or newer), ``$RLX_NVRTC``, or a system
``libnvrtc.so``. NVRTC 12.4 has no ``cuda_fp16.h`` built in: it comes from the
``nvidia-cuda-runtime-cu12`` wheel's include folder (or ``$RLX_CUDA_INCLUDE``, or the toolkit's). Without NVRTC, ``nvcc -cubin`` (toolchain.py) builds the same image. A
rejection is the checker's ``KernelCheckError`` (RLX-H003) with NVRTC's log and the line.
"""

from __future__ import annotations

import ctypes
import glob
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from typing import Any

from rlx_core.errors import TargetUnavailableError
from rlx_core.targets.kernel_check import checker_error
from rlx_core.targets.tool_process import run_tool


def _candidates() -> list[str]:
    env = os.environ.get("RLX_NVRTC")
    if env:
        return [env]
    found: list[str] = []
    try:
        import nvidia.cuda_nvrtc as pkg  # the wheel's lib/ folder

        for root in pkg.__path__:
            found += sorted(glob.glob(os.path.join(root, "lib", "libnvrtc.so.*")))
    except ImportError:
        pass
    return [*found, "libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12"]


@cache
def find_nvrtc() -> tuple[Any, str]:
    """(the loaded NVRTC library, "") or (None, why not)."""
    tried = []
    for path in _candidates():
        try:
            return ctypes.CDLL(path), ""
        except OSError as err:
            tried.append(f"{path}: {err}")
    return None, ("NVRTC is not installed (pip install 'rlx-explorer[cuda]', i.e. "
                  "nvidia-cuda-nvrtc-cu12)")


def include_dirs() -> list[str]:
    """Folders holding cuda_fp16.h for NVRTC's ``-I``."""
    dirs = [os.environ.get("RLX_CUDA_INCLUDE", ""), "/usr/local/cuda/include"]
    try:
        import nvidia.cuda_runtime as rt

        dirs = [os.path.join(root, "include") for root in rt.__path__] + dirs
    except ImportError:
        pass
    return [d for d in dirs if d and os.path.exists(os.path.join(d, "cuda_fp16.h"))][:1]


def version(lib: Any) -> tuple[int, int]:
    major, minor = ctypes.c_int(), ctypes.c_int()
    lib.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor))
    return major.value, minor.value


def supported_archs(lib: Any) -> list[int]:
    """The sm_XY numbers this NVRTC can build cubins for (e.g. [50, ..., 90])."""
    n = ctypes.c_int()
    if lib.nvrtcGetNumSupportedArchs(ctypes.byref(n)) != 0:
        return []
    arr = (ctypes.c_int * n.value)()
    lib.nvrtcGetSupportedArchs(arr)
    return list(arr)


def _log(lib: Any, prog: Any) -> str:
    size = ctypes.c_size_t()
    lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
    buf = ctypes.create_string_buffer(size.value)
    lib.nvrtcGetProgramLog(prog, buf)
    return buf.value.decode(errors="replace")


def _take(lib: Any, prog: Any, what: str) -> bytes:
    size = ctypes.c_size_t()
    getattr(lib, f"nvrtcGet{what}Size")(prog, ctypes.byref(size))
    buf = ctypes.create_string_buffer(size.value)
    getattr(lib, f"nvrtcGet{what}")(prog, buf)
    return buf.raw


@contextmanager
def _thread_locale_kept() -> Iterator[None]:
    """Give the calling thread its locale back after NVRTC.

    NVRTC switches the thread to the "C" locale (``uselocale``) while it compiles and leaves it
    there: afterwards ``locale.getpreferredencoding()`` said ASCII, so every later ``open()``
    of a UTF-8 text file in the process failed (found by the suite: tests reading docs/errors.md
    after a cuda compile on the same worker).
    """
    try:
        libc = ctypes.CDLL(None)
        uselocale = libc.uselocale
        uselocale.restype, uselocale.argtypes = ctypes.c_void_p, [ctypes.c_void_p]
        saved = uselocale(None)  # (locale_t) 0: only asks
    except (OSError, AttributeError):
        yield
        return
    try:
        yield
    finally:
        uselocale(saved)


def compile_nvrtc(lib: Any, source: str, sm: int) -> tuple[bytes, str]:
    """(image, kind): a cubin for sm_``sm`` if this NVRTC knows the arch, else PTX for its
    newest arch (the driver compiles PTX for a newer GPU)."""
    with _thread_locale_kept():
        return _compile_nvrtc(lib, source, sm)


def _compile_nvrtc(lib: Any, source: str, sm: int) -> tuple[bytes, str]:
    archs = supported_archs(lib)
    cubin = not archs or sm in archs
    arch = f"sm_{sm}" if cubin else f"compute_{max(archs)}"
    prog = ctypes.c_void_p()
    res = lib.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), b"kernels.cu", 0,
                                 None, None)
    if res != 0:
        raise TargetUnavailableError(f"nvrtcCreateProgram failed ({res})")
    try:
        opts = [f"--gpu-architecture={arch}".encode(), b"--std=c++17",
                b"--diag-suppress=177", *(f"-I{d}".encode() for d in include_dirs())]
        arr = (ctypes.c_char_p * len(opts))(*opts)
        if lib.nvrtcCompileProgram(prog, len(opts), arr) != 0:
            raise checker_error(f"nvrtc --gpu-architecture={arch}", _log(lib, prog), source,
                                "CUDA C")
        return (_take(lib, prog, "CUBIN"), "cubin") if cubin else (_take(lib, prog, "PTX"),
                                                                   "ptx")
    finally:
        lib.nvrtcDestroyProgram(ctypes.byref(prog))


def compile_nvcc(nvcc: str, source: str, sm: int) -> tuple[bytes, str]:
    """The same image through ``nvcc -cubin`` (where the toolkit, not NVRTC, is installed)."""
    with tempfile.TemporaryDirectory(prefix="rlx-cuda-") as tmp:
        cu, out = Path(tmp) / "kernels.cu", Path(tmp) / "kernels.cubin"
        cu.write_text(source)
        p = run_tool([nvcc, f"-arch=sm_{sm}", "-cubin", "-diag-suppress", "177",
                      str(cu), "-o", str(out)], timeout=300)
        if p.returncode != 0:
            raise checker_error(f"nvcc -cubin -arch=sm_{sm}", p.stdout + p.stderr, source,
                                "CUDA C")
        return out.read_bytes(), "cubin"


def compile_image(source: str, sm: int) -> tuple[bytes, str, str]:
    """(image, "cubin" | "ptx", the compiler that made it) for a device of sm_``sm``."""
    lib, why = find_nvrtc()
    if lib is not None:
        major, minor = version(lib)
        image, kind = compile_nvrtc(lib, source, sm)
        return image, kind, f"NVRTC {major}.{minor}"
    from rlx_core.targets.cuda.toolchain import find_tools

    tools, why_nvcc = find_tools()
    if tools is None:
        raise TargetUnavailableError(f"no CUDA compiler for the runtime: {why}; {why_nvcc}")
    image, kind = compile_nvcc(tools[0], source, sm)
    return image, kind, "nvcc"


__all__ = ["compile_image", "compile_nvcc", "compile_nvrtc", "find_nvrtc", "supported_archs"]
