"""Run the datapath in Verilator: many images per simulator launch, cycles per inference.

The host side of the boundary is the cortex-m one (the reference's quantize before, its
dequantize after: cortex_m/runtime.py); the simulator reads ``rlx_in.bin`` (one byte a beat)
and writes the output words and the cycles of each inference.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rlx_core.targets.cortex_m.emitter import FirmwareSource
from rlx_core.targets.cortex_m.runtime import RunResult, check_params, decode, encode
from rlx_core.targets.fpga.errors import SimulationRunError
from rlx_core.targets.fpga.layers import Datapath
from rlx_core.targets.tool_process import run_group


class Simulation:
    """A built Verilator model of the datapath and how to feed it."""

    def __init__(self, src: FirmwareSource, dp: Datapath, folder: Path, params: dict[str, Any]):
        self.src, self.dp, self.folder, self.params = src, dp, folder, params

    def run(self, inputs: Sequence[Any], params: dict[str, Any]) -> list[Any]:
        check_params(self.params, params)
        return self.run_calls([inputs]).outputs[0]

    def run_calls(self, calls: Sequence[Sequence[Any]], timeout: float = 1200) -> RunResult:
        import numpy as np

        spec = self.src.inputs[0]
        blob = b"".join(encode(self.src, spec, c[spec.graph_index]) for c in calls)
        with tempfile.TemporaryDirectory(prefix="rlx-fpga-") as tmp:
            work = Path(tmp)
            for f in self.folder.glob("*.hex"):
                shutil.copy(f, work / f.name)
            (work / "rlx_in.bin").write_bytes(blob)
            try:
                proc = run_group([str(self.folder / "obj" / "Vrlx_top")], cwd=work,
                                 timeout=timeout)
            except subprocess.TimeoutExpired:
                raise SimulationRunError(f"the simulation of {len(calls)} image(s) did not "
                                         f"finish in {timeout:.0f} s",
                                         hint="simulate fewer images per launch") from None
            if proc.returncode != 0:
                raise SimulationRunError(f"the Verilator simulation failed (exit "
                                         f"{proc.returncode}): {(proc.stdout + proc.stderr)[-1500:]}",
                                         hint="a datapath that never answers is a bug: please "
                                              "report it with the model")
            words = np.frombuffer((work / "rlx_out.bin").read_bytes(), np.int32)
            cycles = np.frombuffer((work / "rlx_cycles.bin").read_bytes(), np.uint32)
        per = 1 if self.dp.argmax else self.dp.layers[-1].n
        out_spec = self.src.outputs[0]
        outs = []
        for c in range(len(calls)):
            w = words[c * per:(c + 1) * per]
            raw = w.astype(np.dtype(out_spec.dtype.replace("u8", "uint8").replace(
                "i8", "int8").replace("i32", "int32").replace("i64", "int64"))).tobytes()
            outs.append([decode(self.src, out_spec, raw)])
        return RunResult(outs, [int(v) for v in cycles])
