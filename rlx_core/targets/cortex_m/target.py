"""CortexMTarget: int8 LIR -> C99 firmware -> arm-none-eabi-gcc -> qemu-system-arm (MPS2).

``build`` checks the graph strictly (legalize.py: every node the firmware cannot run, with a
fix), emits the firmware (emitter.py), checks it fits the board (weights in flash, arena +
I/O buffers + stack in RAM), builds the ELF and returns a Program whose ``run`` executes one
call under QEMU (runtime.firmware_of(exe).run_calls runs many per launch). The board is
``RLX_CORTEX_M_BOARD`` (boards.py; default mps2-an386, a Cortex-M4); ``RLX_CORTEX_M_FLASH`` /
``RLX_CORTEX_M_RAM`` (bytes) check against a smaller part than QEMU's board.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from rlx_core.ir.graph import Graph
from rlx_core.targets.base import Program, Verification
from rlx_core.targets.embedded_common.target import Int8EmbeddedTarget


def _budget(env: str, default: int) -> int:
    val = os.environ.get(env)
    return int(val) if val else default


class CortexMTarget(Int8EmbeddedTarget):
    """Int8 firmware for Cortex-M4 / M33, executed here under QEMU's MPS2 boards."""

    name = "cortex-m"
    verification = Verification.EXECUTES_EMULATED
    description = ("C99 int8 kernels in the CMSIS-NN style (SMLAD where the core has DSP), "
                   "weights in flash, activations in one static arena from the LIR memory "
                   "plan; built by arm-none-eabi-gcc and run under qemu-system-arm "
                   "(mps2-an386 Cortex-M4, mps2-an505 Cortex-M33) with semihosting")
    caps_module = "rlx_core.targets.cortex_m.caps"
    wasm_why = "there is no cross compiler under Pyodide / WebAssembly"
    install_hint = "apt-get install gcc-arm-none-eabi qemu-system-arm"

    def tools(self) -> list[Callable[[], tuple[str | None, str]]]:
        from rlx_core.targets.cortex_m.runtime import find_qemu
        from rlx_core.targets.cortex_m.toolchain import find_gcc

        return [find_gcc, find_qemu]

    def render_sources(self, lir: Graph) -> dict[str, str]:
        """The generated firmware source, without needing the toolchain."""
        _, src = self.firmware_source(lir)
        return {"model.c": src.model_c, "model.h": src.model_h}

    def build(self, lir: Graph, options: Any = None, board: str | None = None,
              dsp: bool = True) -> Program:
        self.require_available()
        from rlx_core.targets.cortex_m.boards import board as get_board
        from rlx_core.targets.cortex_m.memory import check_fits
        from rlx_core.targets.cortex_m.runtime import Firmware
        from rlx_core.targets.cortex_m.toolchain import STACK_BYTES, build_elf

        b = get_board(board or os.environ.get("RLX_CORTEX_M_BOARD"))
        _, src = self.firmware_source(lir)
        flash = _budget("RLX_CORTEX_M_FLASH", b.flash_size)
        ram = _budget("RLX_CORTEX_M_RAM", b.ram_size)
        check_fits(lir.name, src, flash, ram, STACK_BYTES)
        elf = build_elf(src.model_c, src.model_h, b, dsp=dsp)
        check_fits(lir.name, src, flash, ram, STACK_BYTES, elf)
        fw = Firmware(src, elf, b, dict(lir.param_data))
        info = {"project_dir": str(elf.path.parent), "board": b.name, "cpu": b.cpu, "machine": b.machine, "elf": str(elf.path),
                "cache": "hit" if elf.cache_hit else "miss", "dsp": dsp and b.dsp,
                "memory": {"flash_bytes": elf.flash_bytes, "ram_bytes": elf.ram_bytes,
                           "text": elf.text, "data": elf.data, "bss": elf.bss,
                           "arena_bytes": src.plan.peak_bytes,
                           "arena_naive_bytes": src.plan.naive_bytes,
                           "weights_bytes": src.const_bytes, "io_bytes": src.io_bytes,
                           "scratch_bytes": src.scratch_bytes,
                           "stack_bytes": STACK_BYTES, "flash_budget": flash,
                           "ram_budget": ram},
                "arena": [s.__dict__ for s in src.plan.slots],
                "steps": src.kernels, "source": src.model_c,
                "run": f"qemu-system-arm -M {b.machine} -nographic -monitor none -serial none "
                       "-icount shift=0 -semihosting-config enable=on,target=native -kernel "
                       "firmware.elf  (reads rlx_in.bin, writes rlx_out.bin and rlx_ticks.bin)"}
        return Program(run_fn=fw.run, sources={"model.c": src.model_c, "model.h": src.model_h},
                       info=info)
