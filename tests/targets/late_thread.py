"""A compiled cpu program's team hooks, for tests that make one thread come late."""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import Any


def team_delay(exe: Any, threads: Callable[[int], Any]) -> Any:
    """Two threads, the team's state reset (the next call is a team call), and the program's
    ``team_delay(tid, us)``: thread ``tid`` comes ``us`` microseconds late to the next call."""
    from rlx_core.targets.cpu.runtime import load_library

    lib = load_library(exe.program.info["so_path"])
    prefix = exe.program.info["entry"].removesuffix("_run")
    threads(2)
    getattr(lib, f"{prefix}_team_reset")()
    delay = getattr(lib, f"{prefix}_team_delay")
    delay.argtypes = [ctypes.c_int, ctypes.c_int]
    return delay
