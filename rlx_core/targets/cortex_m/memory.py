"""Does the firmware fit the board? Weights in flash; arena, I/O buffers and stack in RAM.

Checked twice: before compiling (from the emitter's figures, so a model far too large fails
in milliseconds) and after linking (from the ELF's sections, which is what the part holds).
"""

from __future__ import annotations

from typing import Any

from rlx_core.targets.cortex_m.emitter import FirmwareSource
from rlx_core.targets.cortex_m.errors import BoardMemoryError


def _kib(n: int) -> str:
    return f"{n} B" if n < 10240 else f"{n / 1024:.1f} KiB"


def check_fits(name: str, src: FirmwareSource, flash: int, ram: int, stack: int,
               elf: Any = None) -> None:
    """BoardMemoryError naming what overflows, by how much, and what to do."""
    need_flash = elf.flash_bytes if elf is not None else src.const_bytes
    need_ram = elf.ram_bytes if elf is not None else (src.plan.peak_bytes + src.io_bytes
                                                        + src.scratch_bytes + stack)
    lines = []
    if need_flash > flash:
        lines.append(f"flash: {_kib(need_flash)} needed ({_kib(src.const_bytes)} of weights "
                     f"and constants), the board has {_kib(flash)}; fix: fewer or narrower "
                     "layers, or int4 weights")
    if need_ram > ram:
        big = max(src.plan.slots, key=lambda s: s.size, default=None)
        what = f"; the largest activation is %{big.value} ({_kib(big.size)})" if big else ""
        lines.append(f"RAM: {_kib(need_ram)} needed (arena {_kib(src.plan.peak_bytes)}, I/O "
                     f"{_kib(src.io_bytes)}, conv scratch {_kib(src.scratch_bytes)}, stack "
                     f"{_kib(stack)}), the board has {_kib(ram)}"
                     f"{what}; fix: a smaller batch or narrower activations")
    if lines:
        raise BoardMemoryError(f"@{name} does not fit the board:\n    " + "\n    ".join(lines),
                               hint="compile for batch 1, or choose a larger board "
                                    "(RLX_CORTEX_M_BOARD)")
