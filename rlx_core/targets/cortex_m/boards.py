"""The boards the firmware is built for and run on: core, compiler flags, memory map, clock.

The memory sizes are QEMU's MPS2 maps (the code SRAM stands in for flash). A real part is
usually smaller: ``budget`` lets a build check against, e.g., 1 MiB flash / 192 KiB RAM.
"""

from __future__ import annotations

from dataclasses import dataclass

from rlx_core.targets.cortex_m.errors import UnknownBoardError


@dataclass(frozen=True)
class Board:
    """A board QEMU emulates: the compiler's CPU and float flags, the flash and RAM map and the
    clock."""

    name: str
    machine: str  # qemu-system-arm -M
    cpu: str  # -mcpu
    float_abi: str  # -mfloat-abi
    fpu: str  # -mfpu ("" for none)
    flash_origin: int
    flash_size: int
    ram_origin: int
    ram_size: int
    clock_hz: int  # the SysTick processor clock QEMU models
    dsp: bool  # the core has the DSP extension (SMLAD)

    def cflags(self, dsp: bool = True) -> list[str]:
        flags = [f"-mcpu={self.cpu}", "-mthumb", f"-mfloat-abi={self.float_abi}"]
        if self.fpu:
            flags.append(f"-mfpu={self.fpu}")
        if not (dsp and self.dsp):
            flags.append("-DRLX_NO_DSP")
        return flags


MIB = 1 << 20
BOARDS: dict[str, Board] = {
    # Cortex-M4F (DSP + single-precision FPU); ZBT SSRAM1 4 MiB at 0 holds code, SSRAM2/3 RAM
    "mps2-an386": Board("mps2-an386", "mps2-an386", "cortex-m4", "hard", "fpv4-sp-d16",
                        0x00000000, 4 * MIB, 0x20000000, 4 * MIB, 25_000_000, True),
    # the same core with the soft-float ABI (no FPU instructions)
    "mps2-an386-soft": Board("mps2-an386-soft", "mps2-an386", "cortex-m4", "soft", "",
                             0x00000000, 4 * MIB, 0x20000000, 4 * MIB, 25_000_000, True),
    # Cortex-M33 (DSP, FPU), secure state: code in SSRAM1's secure alias, RAM in SSRAM2/3's
    "mps2-an505": Board("mps2-an505", "mps2-an505", "cortex-m33", "hard", "fpv5-sp-d16",
                        0x10000000, 4 * MIB, 0x38000000, 4 * MIB, 20_000_000, True),
}
DEFAULT_BOARD = "mps2-an386"


def board(name: str | None) -> Board:
    key = name or DEFAULT_BOARD
    if key not in BOARDS:
        raise UnknownBoardError(f"unknown Cortex-M board {key!r}",
                                hint=f"choose one of: {', '.join(BOARDS)}")
    return BOARDS[key]
