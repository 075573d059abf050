"""Firmware source -> ELF with arm-none-eabi-gcc, and its flash / RAM figures from the ELF.

One ELF per (source, board, flags, compiler), cached on disk under the sha256 of all four and
written through a temporary folder + ``os.replace``, so a second process builds nothing. The
ELF's record is written inside the folder before the rename and checked on a hit; a damaged or
record-less entry is quarantined and built again (``verified_files``' folder entries).
``RLX_ARM_GCC`` overrides the compiler.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from rlx_core.targets import verified_files
from rlx_core.targets.build_cache import target_cache_dir
from rlx_core.targets.cortex_m.boards import Board
from rlx_core.targets.cortex_m.errors import FirmwareBuildError
from rlx_core.targets.tool_process import run_tool

CSRC = Path(__file__).resolve().parent / "csrc"
RUNTIME_FILES = ("rlx_nn.h", "rlx_conv.h", "semihost.h", "semihost.c", "startup.c", "main.c")
# -ffp-contract=off: no fused multiply-add, so float steps round as the numpy reference does
CFLAGS = ("-std=c99", "-Os", "-ffreestanding", "-ffunction-sections", "-fdata-sections",
          "-ffp-contract=off", "-Wall", "-Werror=implicit-function-declaration")
STACK_BYTES = 4096
# what a cache hit runs (qemu loads it; its sizes are read from it): recorded, verified on a hit
ARTEFACTS = ("firmware.elf",)


@cache
def find_gcc() -> tuple[str | None, str]:
    path = os.environ.get("RLX_ARM_GCC") or shutil.which("arm-none-eabi-gcc")
    if path is None:
        return None, "arm-none-eabi-gcc is not installed (Debian: gcc-arm-none-eabi)"
    return path, ""


@cache
def gcc_version(gcc: str) -> str:
    return run_tool([gcc, "--version"], timeout=60).stdout.split("\n")[0]


def _size_tool(gcc: str) -> str:
    return gcc[: -len("gcc")] + "size" if gcc.endswith("gcc") else "arm-none-eabi-size"


@dataclass(frozen=True)
class Elf:
    """A linked firmware image: its path, section sizes and whether it came from the cache."""

    path: Path
    text: int  # code + constants (flash)
    data: int  # initialised data (flash and RAM)
    bss: int  # zeroed RAM: the arena, I/O buffers
    cache_hit: bool

    @property
    def flash_bytes(self) -> int:
        return self.text + self.data

    @property
    def ram_bytes(self) -> int:
        return self.data + self.bss  # .bss holds the arena, the I/O buffers and the stack


def linker_script(board: Board) -> str:
    text = (CSRC / "link.ld.in").read_text()
    for key, val in (("board", board.name), ("flash_origin", hex(board.flash_origin)),
                     ("flash_size", hex(board.flash_size)), ("ram_origin", hex(board.ram_origin)),
                     ("ram_size", hex(board.ram_size)), ("stack_size", str(STACK_BYTES))):
        text = text.replace("{" + key + "}", val)
    return text


def cache_root() -> Path:
    """Where built firmware is kept (build_cache: ``<RLX_CACHE_DIR>/cortex-m``, else
    ``~/.cache/rlx/cortex-m``)."""
    return target_cache_dir("cortex-m")


def elf_sizes(gcc: str, elf: Path) -> tuple[int, int, int]:
    out = run_tool([_size_tool(gcc), str(elf)], check=True,
                   timeout=60).stdout.splitlines()[1].split()
    return int(out[0]), int(out[1]), int(out[2])


def build_elf(model_c: str, model_h: str, board: Board, dsp: bool = True) -> Elf:
    """Compile and link the firmware; FirmwareBuildError with gcc's output on failure."""
    gcc, why = find_gcc()
    if gcc is None:
        from rlx_core.errors import TargetUnavailableError

        raise TargetUnavailableError(f"target 'cortex-m' is not available: {why}",
                                     hint="apt-get install gcc-arm-none-eabi")
    flags = [*CFLAGS, *board.cflags(dsp)]
    runtime = {name: (CSRC / name).read_text() for name in RUNTIME_FILES}
    key = hashlib.sha256("\0".join([model_c, model_h, linker_script(board), " ".join(flags),
                                    gcc_version(gcc), *runtime.values()]).encode()).hexdigest()
    final = cache_root() / key[:32]
    elf = final / "firmware.elf"
    if verified_files.lookup_folder(final, ARTEFACTS):
        return Elf(elf, *elf_sizes(gcc, elf), cache_hit=True)
    tmp = verified_files.build_dir(cache_root())
    for name, text in {**runtime, "model.c": model_c, "model.h": model_h,
                       "link.ld": linker_script(board)}.items():
        (tmp / name).write_text(text)
    cmd = [gcc, *flags, "-nostdlib", "-Wl,--gc-sections", "-Wl,-T,link.ld",
           "-Wl,-Map,firmware.map", "-o", "firmware.elf", "startup.c", "semihost.c", "main.c",
           "model.c", "-lgcc"]
    proc = run_tool(cmd, cwd=tmp, timeout=600)
    if proc.returncode != 0:
        shutil.rmtree(tmp, ignore_errors=True)
        errors = [ln for ln in proc.stderr.splitlines() if "error" in ln]
        raise FirmwareBuildError(f"arm-none-eabi-gcc failed for {board.name}:\n"
                                 + "\n".join(errors[:20] or proc.stderr.splitlines()[-40:]),
                                 hint="this is a bug in the generated firmware: please report "
                                      "it with the model")
    verified_files.publish_folder(tmp, final, ARTEFACTS)
    return Elf(elf, *elf_sizes(gcc, elf), cache_hit=False)
