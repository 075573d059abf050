"""hipcc -> device code objects for gfx90a and gfx940: the HIP check.

gfx942 (MI300X) is what the issue names, but Debian's hipcc (LLVM 15) predates it; gfx940 is
the same family's first target that this LLVM knows. ``RLX_HIPCC`` overrides the compiler.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from functools import cache
from pathlib import Path

from rlx_core.targets.kernel_check import checker_error

ARCHES: tuple[str, ...] = ("gfx90a", "gfx940")


@cache
def find_hipcc() -> tuple[str | None, str]:
    path = os.environ.get("RLX_HIPCC") or shutil.which("hipcc")
    return (path, "") if path else (None, "hipcc is not installed (Debian: hipcc)")


def check(source: str) -> str:
    hipcc, why = find_hipcc()
    if hipcc is None:
        from rlx_core.errors import TargetUnavailableError

        raise TargetUnavailableError(f"target 'rocm' is not available: {why}")
    with tempfile.TemporaryDirectory(prefix="rlx-hip-") as tmp:
        src = Path(tmp) / "kernels.hip"
        src.write_text(source)
        p = subprocess.run([hipcc, "-x", "hip", *(f"--offload-arch={a}" for a in ARCHES),
                            "--cuda-device-only", "-O2", "-c", str(src), "-o",
                            str(Path(tmp) / "kernels.o")], capture_output=True, text=True,
                           timeout=600)
        if p.returncode != 0:
            raise checker_error("hipcc", p.stdout + p.stderr, source, "HIP")
    return "hipcc code objects for " + ", ".join(ARCHES)
