"""FpgaTarget: int8 LIR -> Verilog datapath (MAC array per layer) -> Verilator simulation.

``build`` applies the int8 rules of cortex-m (the strict check and the boundary), extracts the
layer chain (layers.py), writes the Verilog project (verilog.py: ``rlx_top.v``, the layer
module, ROM init files, the testbench) with ``RLX_FPGA_PARALLELISM`` MAC lanes per layer
(default 8), and builds it with Verilator. ``run`` simulates one image; the Simulation behind
it (``runtime.Simulation.run_calls``) many per launch, with cycles per inference.
``synth.synthesize(project)`` gives the yosys / nextpnr-ice40 report.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from rlx_core.errors import TargetUnavailableError
from rlx_core.ir.graph import Graph
from rlx_core.targets.base import Program, Verification

DEFAULT_PARALLELISM = 8


class FpgaTarget:
    """A streaming int8 datapath in Verilog, verified by Verilator simulation."""

    name = "fpga"
    verification = Verification.SIMULATED
    description = ("synthesizable Verilog for int8 fully connected chains (a MAC array per "
                   "layer, weights in $readmemh ROMs, requantize, relu, argmax, valid/ready "
                   "streams), simulated by Verilator; yosys synth_ice40 + nextpnr-ice40 report")
    fuzz_hir_ops: tuple[str, ...] = ()

    def available(self) -> tuple[bool, str]:
        if sys.platform == "emscripten":
            return False, "there is no Verilator under Pyodide / WebAssembly"
        from rlx_core.targets.fpga.toolchain import find_tool

        path, why = find_tool("verilator", "RLX_VERILATOR")
        if path is None:
            return False, why
        try:
            import numpy  # noqa: F401
        except ImportError:
            return False, "numpy is not installed (weights and I/O are packed with it)"
        return True, ""

    @property
    def caps(self) -> Any:
        from rlx_core.targets.fpga.caps import caps

        return caps(self.verification)

    def check_hir(self, g: Graph) -> None:
        """The int8 rules (targets/cortex_m/check.py): every offending node with a fix."""
        from rlx_core.targets.cortex_m.check import check_hir

        check_hir(g, self.caps)

    def project(self, lir: Graph, parallelism: Any = None) -> Any:
        """(Verilog project, datapath, firmware source) for ``lir``, without any tool."""
        from rlx_core.targets.cortex_m.emitter import emit
        from rlx_core.targets.cortex_m.legalize import legalize, raise_problems
        from rlx_core.targets.fpga.layers import extract
        from rlx_core.targets.fpga.verilog import render

        checked = legalize(lir)
        raise_problems(checked.problems, lir.name)
        src = emit(lir, checked.steps)
        dp = extract(lir, checked.steps, src)
        p = parallelism or int(os.environ.get("RLX_FPGA_PARALLELISM") or DEFAULT_PARALLELISM)
        return render(dp, p), dp, src

    def render_sources(self, lir: Graph) -> dict[str, str]:
        proj, _, _ = self.project(lir)
        return {n: t for n, t in proj.files.items() if n.endswith((".v", ".cpp"))}

    def build(self, lir: Graph, options: Any = None, parallelism: Any = None) -> Program:
        ok, why = self.available()
        if not ok:
            raise TargetUnavailableError(f"target 'fpga' is not available: {why}",
                                         hint="apt-get install verilator")
        from rlx_core.targets.fpga.runtime import Simulation
        from rlx_core.targets.fpga.toolchain import build_simulator

        proj, dp, src = self.project(lir, parallelism)
        folder, hit = build_simulator(proj)
        sim = Simulation(src, dp, folder, dict(lir.param_data))
        layers = [{"k": x.k, "n": x.n, "lanes": p, "requantize": x.requant,
                   "cycles": -(-x.n // p) * (x.k + 3 + p) + 2}
                  for x, p in zip(dp.layers, proj.parallelism, strict=True)]
        info = {"project_dir": str(folder), "cache": "hit" if hit else "miss",
                "parallelism": list(proj.parallelism), "layers": layers, "argmax": dp.argmax,
                "weight_bytes": sum(x.k * x.n for x in dp.layers),
                "cycles_estimate": sum(x["cycles"] for x in layers) + dp.layers[0].k + 2,
                "source": proj.files["rlx_top.v"]}
        return Program(run_fn=sim.run, info=info,
                       sources={n: t for n, t in proj.files.items() if n.endswith(".v")})

    def __repr__(self) -> str:
        return "FpgaTarget()"
