"""hipcc -> device code objects for gfx90a and gfx940: the HIP check; and their disassembly
(``disassemble``), where LLVM's offload bundler and objdump are installed.

gfx942 (MI300X) is what the issue names, but Debian's hipcc (LLVM 15) predates it; gfx940 is
the same family's first target that this LLVM knows. ``RLX_HIPCC`` overrides the compiler.
"""

from __future__ import annotations

import glob
import os
import shutil
import tempfile
from functools import cache
from pathlib import Path

from rlx_core.targets.kernel_check import checker_error
from rlx_core.targets.tool_process import run_tool

ARCHES: tuple[str, ...] = ("gfx90a", "gfx940")


@cache
def find_hipcc() -> tuple[str | None, str]:
    path = os.environ.get("RLX_HIPCC") or shutil.which("hipcc")
    return (path, "") if path else (None, "hipcc is not installed (Debian: hipcc)")


def _compile(hipcc: str, source: str, tmp: str) -> Path:
    """The offload bundle of device code objects for ARCHES; KernelCheckError on failure."""
    src, obj = Path(tmp) / "kernels.hip", Path(tmp) / "kernels.o"
    src.write_text(source)
    p = run_tool([hipcc, "-x", "hip", *(f"--offload-arch={a}" for a in ARCHES),
                  "--cuda-device-only", "-O2", "-c", str(src), "-o", str(obj)], timeout=600)
    if p.returncode != 0:
        raise checker_error("hipcc", p.stdout + p.stderr, source, "HIP")
    return obj


def _hipcc() -> str:
    hipcc, why = find_hipcc()
    if hipcc is None:
        from rlx_core.errors import TargetUnavailableError

        raise TargetUnavailableError(f"target 'rocm' is not available: {why}")
    return hipcc


def check(source: str) -> str:
    with tempfile.TemporaryDirectory(prefix="rlx-hip-") as tmp:
        _compile(_hipcc(), source, tmp)
    return "hipcc code objects for " + ", ".join(ARCHES)


@cache
def find_llvm_tools() -> tuple[tuple[str, str] | None, str]:
    """(clang-offload-bundler, llvm-objdump) of the newest LLVM here (hipcc's own is Debian's
    llvm-15; an older objdump does not know gfx940), or None and why. ``RLX_LLVM_BIN`` names
    the folder."""
    dirs = [os.environ["RLX_LLVM_BIN"]] if os.environ.get("RLX_LLVM_BIN") else sorted(
        glob.glob("/usr/lib/llvm-*/bin"), key=lambda d: int(d.split("-")[-1].split("/")[0]),
        reverse=True)
    for d in dirs:
        tools = (str(Path(d) / "clang-offload-bundler"), str(Path(d) / "llvm-objdump"))
        if all(os.path.exists(t) for t in tools):
            return tools, ""
    return None, "no clang-offload-bundler and llvm-objdump (Debian: llvm-15, clang-15)"


def disassemble(source: str) -> dict[str, str]:
    """Each arch's device code, disassembled (``llvm-objdump -d`` of the unbundled code
    object): what the test reads to see that a builtin became the instruction it names."""
    tools, why = find_llvm_tools()
    if tools is None:
        from rlx_core.errors import TargetUnavailableError

        raise TargetUnavailableError(f"cannot disassemble HIP code objects: {why}")
    bundler, objdump = tools
    out = {}
    with tempfile.TemporaryDirectory(prefix="rlx-hip-") as tmp:
        obj = _compile(_hipcc(), source, tmp)
        for arch in ARCHES:
            co = Path(tmp) / f"{arch}.co"
            run_tool([bundler, "--unbundle", "--type=o", f"--input={obj}",
                      f"--targets=hipv4-amdgcn-amd-amdhsa--{arch}", f"--output={co}"],
                     check=True, timeout=120)
            out[arch] = run_tool([objdump, "-d", str(co)], check=True, timeout=120).stdout
    return out
