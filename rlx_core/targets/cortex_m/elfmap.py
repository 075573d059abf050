"""Flash and RAM of a firmware ELF, buffer by buffer (``arm-none-eabi-readelf -s``).

Every sized symbol is placed by its address in the board's memory map: flash (code, the
``const`` weight arrays, requantize tables) or RAM (the arena, the I/O buffers, the stack).
What the explorer's memory view lists; the totals are ``toolchain.Elf``'s section sizes.
"""

from __future__ import annotations

import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from rlx_core.targets.cortex_m.boards import Board
from rlx_core.targets.tool_process import run_group


@dataclass(frozen=True)
class Symbol:
    """One symbol of a linked firmware image: where it sits (flash or RAM), its size and what it
    holds."""

    name: str
    address: int
    size: int
    region: str  # "flash" or "ram"
    kind: str  # "code", "weights", "arena", "io", "stack", "data"

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _kind(name: str, func: bool, region: str) -> str:
    if func:
        return "code"
    if name == "rlx_arena":
        return "arena"
    if "stack" in name:
        return "stack"
    if region == "flash":
        return "weights" if name.startswith("v_") else "data"
    return "io" if name.startswith("v_") else "data"


def symbols(elf: str | Path, board: Board, gcc: str | None = None) -> list[Symbol]:
    """The sized functions and objects of ``elf``, largest first (empty without readelf)."""
    from rlx_core.targets.cortex_m.toolchain import find_gcc

    gcc = gcc or find_gcc()[0]
    if gcc is None:
        return []
    tool = gcc[: -len("gcc")] + "readelf" if gcc.endswith("gcc") else "arm-none-eabi-readelf"
    try:
        out = run_group([tool, "-sW", str(elf)], check=True, timeout=60).stdout
    except (OSError, subprocess.CalledProcessError, subprocess.TimeoutExpired):
        return []
    found, seen = [], set()
    for line in out.splitlines():
        parts = line.split()  # Num: Value Size Type Bind Vis Ndx Name
        if len(parts) != 8 or parts[3] not in ("FUNC", "OBJECT") or parts[7] in seen:
            continue
        addr, size = int(parts[1], 16) & ~1, int(parts[2], 0)  # thumb bit off
        if size == 0:
            continue
        seen.add(parts[7])
        in_ram = board.ram_origin <= addr < board.ram_origin + board.ram_size
        region = "ram" if in_ram else "flash"
        found.append(Symbol(parts[7], addr, size, region,
                            _kind(parts[7], parts[3] == "FUNC", region)))
    return sorted(found, key=lambda s: -s.size)
