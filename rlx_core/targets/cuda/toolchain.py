"""nvcc -> PTX (compute_80), then ptxas -> SASS for sm_80 and sm_90: the CUDA check; and where
NVRTC is installed (the runtime's compiler, nvrtc.py), a cubin for sm_90 from it too.

``RLX_NVCC`` / ``RLX_PTXAS`` override the tools (default: on PATH, else /usr/local/cuda/bin).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from functools import cache
from pathlib import Path

from rlx_core.targets.kernel_check import checker_error
from rlx_core.targets.tool_process import run_tool

ARCHES: tuple[str, ...] = ("sm_80", "sm_90")


def _tool(name: str) -> str | None:
    env = os.environ.get("RLX_" + name.upper())
    if env:
        return env
    return shutil.which(name) or (f"/usr/local/cuda/bin/{name}"
                                  if os.path.exists(f"/usr/local/cuda/bin/{name}") else None)


@cache
def find_tools() -> tuple[tuple[str, str] | None, str]:
    nvcc, ptxas = _tool("nvcc"), _tool("ptxas")
    if nvcc is None or ptxas is None:
        return None, ("nvcc and ptxas are not installed (CUDA toolkit, or pip install "
                      "nvidia-cuda-nvcc-cu12)")
    return (nvcc, ptxas), ""


def _ptx(nvcc: str, source: str, tmp: str) -> Path:
    """nvcc's PTX for compute_80 of ``source``; KernelCheckError on failure."""
    cu, ptx = Path(tmp) / "kernels.cu", Path(tmp) / "kernels.ptx"
    cu.write_text(source)
    p = run_tool([nvcc, "-arch=compute_80", "-ptx", "-diag-suppress", "177",
                  str(cu), "-o", str(ptx)], timeout=300)
    if p.returncode != 0:
        raise checker_error("nvcc -ptx", p.stdout + p.stderr, source, "CUDA C")
    return ptx


def ptx(source: str) -> str:
    """The PTX text nvcc makes of ``source`` (what a test reads to see ``dp4a``)."""
    tools, why = find_tools()
    if tools is None:
        from rlx_core.errors import TargetUnavailableError

        raise TargetUnavailableError(f"target 'cuda' is not available: {why}")
    with tempfile.TemporaryDirectory(prefix="rlx-cuda-") as tmp:
        return _ptx(tools[0], source, tmp).read_text()


def check(source: str) -> str:
    """PTX for compute_80, assembled for every arch in ARCHES; KernelCheckError on failure."""
    tools, why = find_tools()
    if tools is None:
        from rlx_core.errors import TargetUnavailableError

        raise TargetUnavailableError(f"target 'cuda' is not available: {why}")
    nvcc, ptxas = tools
    with tempfile.TemporaryDirectory(prefix="rlx-cuda-") as tmp:
        ptx = _ptx(nvcc, source, tmp)
        for arch in ARCHES:
            a = run_tool([ptxas, f"-arch={arch}", str(ptx), "-o",
                          str(Path(tmp) / f"{arch}.cubin")], timeout=300)
            if a.returncode != 0:
                raise checker_error(f"ptxas -arch={arch}", a.stdout + a.stderr, source,
                                    "PTX")
    done = "nvcc -ptx (compute_80) and ptxas for " + ", ".join(ARCHES)
    from rlx_core.targets.cuda.nvrtc import compile_nvrtc, find_nvrtc, version

    lib, _ = find_nvrtc()  # the runtime's own compiler, where installed: a cubin for sm_90
    if lib is not None:
        compile_nvrtc(lib, source, 90)
        done += ", NVRTC {}.{} cubin for sm_90".format(*version(lib))
    return done
