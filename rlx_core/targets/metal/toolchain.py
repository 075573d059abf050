"""The MSL syntax pass: clang++ -std=c++17 -fsyntax-only over the kernels with shim.py's
``metal_stdlib`` (every warning an error but Metal's own attributes). ``RLX_METAL_CXX``
overrides the compiler (default clang++-14, clang++-15, clang++)."""

from __future__ import annotations

import os
import shutil
import tempfile
from functools import cache
from pathlib import Path

from rlx_core.targets.kernel_check import checker_error
from rlx_core.targets.tool_process import run_tool

FLAGS: tuple[str, ...] = ("-std=c++17", "-fsyntax-only", "-Wall", "-Wextra", "-Werror",
                          "-Wno-unknown-attributes", "-Wno-unused-parameter",
                          "-Wno-unused-variable", "-Wno-unused-function",
                          # generated code the renderer knows is dead: `% 0u` index math of
                          # zero-size axes, a concat's if-chain whose last branch always holds,
                          # the empty range test of a zero-width pad
                          "-Wno-division-by-zero", "-Wno-sometimes-uninitialized",
                          "-Wno-tautological-compare", "-Wno-tautological-overlap-compare",
                          "-nostdinc", "-x", "c++")


@cache
def find_clangxx() -> tuple[str | None, str]:
    names = [os.environ["RLX_METAL_CXX"]] if os.environ.get("RLX_METAL_CXX") else \
        ["clang++-14", "clang++-15", "clang++"]
    for name in names:
        path = shutil.which(name)
        if path:
            return path, ""
    return None, "no clang++ for the MSL syntax pass (Debian: clang)"


def check(source: str) -> str:
    from rlx_core.targets.metal.shim import METAL_STDLIB

    cxx, why = find_clangxx()
    if cxx is None:
        from rlx_core.errors import TargetUnavailableError

        raise TargetUnavailableError(f"target 'metal' is not available: {why}")
    with tempfile.TemporaryDirectory(prefix="rlx-metal-") as tmp:
        (Path(tmp) / "metal_stdlib").write_text(METAL_STDLIB)
        src = Path(tmp) / "kernels.metal"
        src.write_text(source)
        p = run_tool([cxx, *FLAGS, "-I", tmp, str(src)], timeout=300)
        if p.returncode != 0:
            raise checker_error("clang++ -fsyntax-only (MSL shim)", p.stdout + p.stderr,
                                source, "MSL")
    return "a strict clang++ C++17 syntax pass with a metal_stdlib shim"
