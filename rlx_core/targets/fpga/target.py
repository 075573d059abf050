"""FpgaTarget: int8 LIR -> Verilog datapath (MAC array per layer) -> Verilator simulation.

``build`` applies the int8 rules of cortex-m (the strict check and the boundary), extracts the
layer chain (layers.py), writes the Verilog project (verilog.py: ``rlx_top.v``, the layer
module, ROM init files, the testbench) with ``RLX_FPGA_PARALLELISM`` MAC lanes per layer
(default 8; ``RLX_FPGA_PIPELINE=1`` registers the MAC lanes' products), and builds it with
Verilator. ``run`` simulates one image; the Simulation behind
it (``runtime.Simulation.run_calls``) many per launch, with cycles per inference.
``synth.synthesize(project)`` gives the yosys / nextpnr-ice40 report.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from rlx_core.ir.graph import Graph
from rlx_core.targets.base import Program, Verification
from rlx_core.targets.embedded_common.target import Int8EmbeddedTarget

DEFAULT_PARALLELISM = 8


class FpgaTarget(Int8EmbeddedTarget):
    """A streaming int8 datapath in Verilog, verified by Verilator simulation."""

    name = "fpga"
    verification = Verification.SIMULATED
    description = ("synthesizable Verilog for int8 fully connected chains (a MAC array per "
                   "layer, weights in $readmemh ROMs, requantize, relu, argmax, valid/ready "
                   "streams), simulated by Verilator; yosys synth_ice40 + nextpnr-ice40 report")
    caps_module = "rlx_core.targets.fpga.caps"
    wasm_why = "there is no Verilator under Pyodide / WebAssembly"
    install_hint = "apt-get install verilator"

    def tools(self) -> list[Callable[[], tuple[str | None, str]]]:
        from rlx_core.targets.fpga.toolchain import find_tool

        return [lambda: find_tool("verilator", "RLX_VERILATOR")]

    def project(self, lir: Graph, parallelism: Any = None, pipeline: bool | None = None) -> Any:
        """(Verilog project, datapath, firmware source) for ``lir``, without any tool."""
        from rlx_core.targets.fpga.layers import extract
        from rlx_core.targets.fpga.verilog import render

        checked, src = self.firmware_source(lir)
        dp = extract(lir, checked.steps, src)
        p = parallelism or int(os.environ.get("RLX_FPGA_PARALLELISM") or DEFAULT_PARALLELISM)
        if pipeline is None:
            pipeline = os.environ.get("RLX_FPGA_PIPELINE", "") not in ("", "0")
        return render(dp, p, pipeline), dp, src

    def render_sources(self, lir: Graph) -> dict[str, str]:
        proj, _, _ = self.project(lir)
        return {n: t for n, t in proj.files.items() if n.endswith((".v", ".cpp"))}

    def build(self, lir: Graph, options: Any = None, parallelism: Any = None,
              pipeline: bool | None = None) -> Program:
        self.require_available()
        from rlx_core.targets.fpga.runtime import Simulation
        from rlx_core.targets.fpga.toolchain import build_simulator
        from rlx_core.targets.fpga.verilog import layer_cycles

        proj, dp, src = self.project(lir, parallelism, pipeline)
        folder, hit = build_simulator(proj)
        sim = Simulation(src, dp, folder, dict(lir.param_data))
        layers = [{"k": x.k, "n": x.n, "lanes": p, "requantize": x.requant,
                   "weight_bits": x.weight_bits,
                   "cycles": layer_cycles(x, p, proj.pipeline)}
                  for x, p in zip(dp.layers, proj.parallelism, strict=True)]
        info = {"project_dir": str(folder), "cache": "hit" if hit else "miss",
                "parallelism": list(proj.parallelism), "pipeline": proj.pipeline,
                "layers": layers, "argmax": dp.argmax,
                "weight_bytes": sum(-(-x.k * x.n * x.weight_bits // 8) for x in dp.layers),
                "cycles_estimate": sum(x["cycles"] for x in layers) + dp.layers[0].k + 2,
                "source": proj.files["rlx_top.v"]}
        return Program(run_fn=sim.run, info=info,
                       sources={n: t for n, t in proj.files.items() if n.endswith(".v")})
