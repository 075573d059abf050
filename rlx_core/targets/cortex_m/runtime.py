"""Run the firmware under ``qemu-system-arm`` with semihosting: many calls per launch.

The host quantizes each call's inputs (the numpy reference's ``quantize``), writes them one
call after another to ``rlx_in.bin``, runs the ELF on the board's MPS2 machine with
``-icount shift=0`` (one instruction = 1 ns of virtual time), and reads back ``rlx_out.bin``
(the outputs, dequantized on the host where the graph ends in ``dequantize``) and
``rlx_ticks.bin`` (SysTick ticks of the processor clock per call, i.e. instructions / 40 at
25 MHz). ``RLX_QEMU_ARM`` overrides the emulator.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from rlx_core.ir import dtypes as dt
from rlx_core.targets.cortex_m.boards import Board
from rlx_core.targets.cortex_m.emitter import FirmwareSource, IoSpec
from rlx_core.targets.cortex_m.errors import (
    BakedWeightsError,
    EmulatorRunError,
    FirmwareInputError,
)
from rlx_core.targets.cortex_m.toolchain import Elf
from rlx_core.targets.tool_process import run_group


@cache
def find_qemu() -> tuple[str | None, str]:
    path = os.environ.get("RLX_QEMU_ARM") or shutil.which("qemu-system-arm")
    if path is None:
        return None, "qemu-system-arm is not installed (Debian: qemu-system-arm)"
    return path, ""


@dataclass
class RunResult:
    """What one firmware launch returned: per call, the outputs and the instruction count."""

    outputs: list[list[Any]]  # per call, the graph's outputs
    instructions: list[int]  # per call, instructions (SysTick ticks at 1 instruction/ns)


class Firmware:
    """A built firmware image and how to feed it."""

    def __init__(self, src: FirmwareSource, elf: Elf, board: Board, params: dict[str, Any]):
        self.src, self.elf, self.board, self.params = src, elf, board, params

    def check_params(self, params: dict[str, Any]) -> None:
        check_params(self.params, params)

    # -- running ---------------------------------------------------------------------------
    def run(self, inputs: Sequence[Any], params: dict[str, Any]) -> list[Any]:
        """One call (the Program interface)."""
        self.check_params(params)
        return self.run_calls([inputs]).outputs[0]

    def run_calls(self, calls: Sequence[Sequence[Any]], timeout: float = 600) -> RunResult:
        """Many calls in one emulator launch; each call is the graph's inputs."""
        specs = self.src.inputs
        by_index = sorted(specs, key=lambda s: s.graph_index)
        blob = bytearray()
        for inputs in calls:
            if len(inputs) != len(by_index):
                raise FirmwareInputError(f"expected {len(by_index)} inputs, got {len(inputs)}",
                                         hint="pass one array per graph input for every call")
            for spec in specs:  # firmware order
                blob += encode(self.src, spec, inputs[spec.graph_index])
        qemu, why = find_qemu()
        if qemu is None:
            from rlx_core.errors import TargetUnavailableError

            raise TargetUnavailableError(f"target 'cortex-m' cannot run here: {why}",
                                         hint="apt-get install qemu-system-arm")
        with tempfile.TemporaryDirectory(prefix="rlx-cortex-m-") as tmp:
            work = Path(tmp)
            (work / "rlx_in.bin").write_bytes(bytes(blob))
            cmd = [qemu, "-M", self.board.machine, "-nographic", "-monitor", "none",
                   "-serial", "none", "-icount", "shift=0",
                   "-semihosting-config", "enable=on,target=native", "-kernel", str(self.elf.path)]
            try:
                proc = run_group(cmd, cwd=work, timeout=timeout)
            except subprocess.TimeoutExpired:
                raise EmulatorRunError(f"qemu-system-arm ({self.board.machine}) did not finish "
                                       f"{len(calls)} call(s) in {timeout:.0f} s",
                                       hint="run fewer calls per launch") from None
            if proc.returncode != 0:
                raise EmulatorRunError(f"the firmware failed under qemu-system-arm "
                                       f"({self.board.machine}), exit {proc.returncode}:\n"
                                       f"{(proc.stdout + proc.stderr)[-2000:]}",
                                       hint="a fault message above names the cause")
            raw = (work / "rlx_out.bin").read_bytes()
            ticks = (work / "rlx_ticks.bin").read_bytes()
        import numpy as np

        per_call = sum(o.nbytes for o in self.src.outputs)
        if len(raw) != per_call * len(calls):
            raise EmulatorRunError(f"the firmware wrote {len(raw)} bytes, expected "
                                   f"{per_call * len(calls)}",
                                   hint="the emulator stopped early: run it by hand on the ELF "
                                        "(exe.program.info['elf']) to see why")
        outs = []
        for c in range(len(calls)):
            at, row = c * per_call, []
            for spec in self.src.outputs:
                row.append(decode(self.src, spec, raw[at:at + spec.nbytes]))
                at += spec.nbytes
            outs.append(row)
        per_tick = 1_000_000_000 // self.board.clock_hz  # instructions per SysTick tick
        instr = [int(t) * per_tick for t in np.frombuffer(ticks, np.uint32)]
        return RunResult(outs, instr)


# -- the host side of the boundary (shared with the fpga target) ------------------------------
def encode(src: FirmwareSource, spec: IoSpec, x: Any) -> bytes:
    """One input as the device reads it: quantized by the reference's rule where the graph
    starts with ``quantize``, in the device dtype, C order."""
    import numpy as np

    from rlx_core.targets.numpy_ref import quant_semantics as qs

    arr = np.asarray(x)
    node = spec.boundary
    want = tuple(node.type.shape) if node is not None else spec.shape
    if arr.shape != want:
        raise FirmwareInputError(f"input {spec.graph_index} has shape {arr.shape}, the "
                                 f"device was built for {want}",
                                 hint="compile for this shape (shapes are static)")
    if node is not None:
        _, scale, zp = node.inputs
        arr = qs.quantize(arr.astype(np.float32), src.consts[scale], src.consts[zp],
                          int(node.attr("axis")), node.attr("dtype"))
    return np.ascontiguousarray(arr.astype(dt.to_numpy_name(dt.get(spec.dtype)))).tobytes()


def decode(src: FirmwareSource, spec: IoSpec, raw: bytes) -> Any:
    """One output from the device's bytes, dequantized by the reference's rule where the
    graph ends with ``dequantize``."""
    import numpy as np

    from rlx_core.targets.numpy_ref import quant_semantics as qs

    arr = np.frombuffer(raw, dt.to_numpy_name(dt.get(spec.dtype))).reshape(spec.shape).copy()
    node = spec.boundary
    if node is None:
        return arr
    _, scale, zp = node.inputs
    return qs.dequantize(arr, src.consts[scale], src.consts[zp], int(node.attr("axis")))


def check_params(baked: dict[str, Any], params: dict[str, Any]) -> None:
    """BakedWeightsError when a call passes weights other than those compiled in."""
    import numpy as np

    for name, value in baked.items():
        given = params.get(name, value)
        if given is not value and not np.array_equal(np.asarray(given), np.asarray(value)):
            raise BakedWeightsError(f"parameter {name!r} differs from the weights compiled "
                                    "into the device (flash / ROM)",
                                    hint="recompile with the new weights")


def firmware_of(exe: Any) -> Firmware:
    """The Firmware behind an Executable (or a Program) built for cortex-m (batched runs)."""
    prog = getattr(exe, "program", exe)
    fw = getattr(getattr(prog, "run_fn", None), "__self__", None)
    if not isinstance(fw, Firmware):
        raise FirmwareInputError(f"{exe!r} was not compiled for target cortex-m",
                                 hint="rlx.compile(graph, target='cortex-m')")
    return fw
