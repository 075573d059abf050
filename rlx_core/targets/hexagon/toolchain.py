"""Clang's Hexagon backend: find it, compile-check generated C with HVX, link with ld.lld.

``RLX_HEXAGON_CC`` overrides the compiler (default: the first of clang-14, clang-15, clang that
accepts ``--target=hexagon``). The check compiles for ``-mv68 -mhvx -mhvx-length=128b`` against
Clang's resource headers and the freestanding string.h/math.h (freestanding.py).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from functools import cache
from pathlib import Path

from rlx_core.targets.kernel_check import checker_error
from rlx_core.targets.tool_process import run_tool

CHECK_FLAGS: tuple[str, ...] = ("--target=hexagon", "-mv68", "-mhvx", "-mhvx-length=128b",
                                "-O2", "-ffreestanding", "-fno-builtin", "-Wall",
                                "-Wno-unused-function", "-Werror=implicit-function-declaration",
                                # clang-14's Hexagon Vector Combine pass crashes on some
                                # generated loop nests (the avg_pool2d conformance case)
                                "-mllvm", "-hexagon-vector-combine=false")


@cache
def find_clang() -> tuple[str | None, str]:
    """(clang path, "") when a clang with the Hexagon backend is here, else (None, why)."""
    names = [os.environ["RLX_HEXAGON_CC"]] if os.environ.get("RLX_HEXAGON_CC") else \
        ["clang-14", "clang-15", "clang"]
    tried = []
    for name in names:
        path = shutil.which(name)
        if path is None:
            tried.append(f"{name}: not found")
            continue
        probe = run_tool([path, "--target=hexagon", "-mv68", "-mhvx", "-x", "c", "-c",
                          "-o", os.devnull, "-"], input="int x;\n", timeout=60)
        if probe.returncode == 0:
            return path, ""
        tried.append(f"{name}: no Hexagon backend ({probe.stderr.strip()[:80]})")
    return None, "no clang with the Hexagon backend (" + "; ".join(tried) + ")"


@cache
def resource_include(clang: str) -> str:
    out = run_tool([clang, "-print-resource-dir"], timeout=60).stdout.strip()
    return str(Path(out) / "include")


def include_dir() -> Path:
    """A folder holding the freestanding headers (written once per content)."""
    from rlx_core.targets.hexagon.freestanding import HEADERS

    digest = hashlib.sha256(repr(sorted(HEADERS.items())).encode()).hexdigest()[:12]
    root = Path(tempfile.gettempdir()) / f"rlx-hexagon-include-{os.getuid()}-{digest}"
    if not root.is_dir():
        tmp = Path(tempfile.mkdtemp(prefix="rlx-hexagon-inc-"))
        for name, text in HEADERS.items():
            (tmp / name).write_text(text)
        try:
            os.replace(tmp, root)
        except OSError:  # another process made it first
            shutil.rmtree(tmp, ignore_errors=True)
    return root


def compile_flags(clang: str, arch: str = "v68") -> list[str]:
    flags = [f if f != "-mv68" else f"-m{arch}" for f in CHECK_FLAGS]
    return [clang, *flags, "-nostdinc", "-isystem", resource_include(clang), "-isystem",
            str(include_dir())]


def compile_object(source: str, out: Path, arch: str = "v68", what: str = "Hexagon C") -> None:
    """Compile ``source`` to the object ``out``; KernelCheckError with the diagnostics."""
    clang, why = find_clang()
    if clang is None:
        from rlx_core.errors import TargetUnavailableError

        raise TargetUnavailableError(f"target 'hexagon' is not available: {why}",
                                     hint="install clang (Debian clang-14 has the Hexagon "
                                          "backend) or set RLX_HEXAGON_CC")
    src = out.with_suffix(".c")
    src.write_text(source)
    proc = run_tool([*compile_flags(clang, arch), "-c", str(src), "-o", str(out)], timeout=300)
    if proc.returncode != 0:
        raise checker_error(f"clang --target=hexagon -m{arch}", proc.stderr, source, what)


def compile_check(source: str) -> str:
    """Compile ``source`` for v68 + HVX 128B into a throwaway object; return the clang used."""
    with tempfile.TemporaryDirectory(prefix="rlx-hexagon-") as tmp:
        compile_object(source, Path(tmp) / "kernels.o")
    return find_clang()[0] or ""
