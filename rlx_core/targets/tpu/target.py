"""TpuTarget: LIR -> StableHLO module -> XLA (PJRT through jaxlib) -> run.

Here XLA's CPU backend compiles and runs the module; on a machine where jax reports a TPU the
same module goes to the TPU's PJRT client instead.
"""

from __future__ import annotations

import importlib.util
from typing import Any

from rlx_core.errors import TargetUnavailableError
from rlx_core.ir.graph import Graph
from rlx_core.targets.base import Program, Verification


class TpuTarget:
    """StableHLO for TPUs; executed by XLA (CPU backend here, TPU through PJRT where present)."""

    name = "tpu"
    verification = Verification.EXECUTES
    description = ("StableHLO (MLIR text) compiled and run by XLA through jaxlib: XLA's CPU "
                   "backend here, a TPU through PJRT where jax.devices('tpu') exists")

    def available(self) -> tuple[bool, str]:
        for mod in ("numpy", "jax", "jaxlib", "ml_dtypes"):
            if importlib.util.find_spec(mod) is None:
                return False, f"{mod} is not installed (pip install 'jax[cpu]')"
        return True, ""

    @property
    def caps(self) -> Any:
        from rlx_core.targets.tpu.caps import CAPS

        return CAPS

    def render_sources(self, lir: Graph) -> dict[str, str]:
        """The StableHLO module, without needing jax (``rlx compile --emit source``)."""
        from rlx_core.targets.tpu.renderer import render_module

        return {"main": render_module(lir).text}

    def build(self, lir: Graph, options: Any = None) -> Program:
        ok, why = self.available()
        if not ok:
            raise TargetUnavailableError(f"target 'tpu' is not available: {why}",
                                         hint="pip install 'jax[cpu]' (XLA's CPU backend runs "
                                              "the StableHLO), or use target cpu")
        from rlx_core.targets.tpu.renderer import render_module
        from rlx_core.targets.tpu.runtime import XlaProgram

        mod = render_module(lir)
        inputs = {v.name: i for i, v in enumerate(lir.inputs)}
        values = lir.values()
        checks = tuple(dict.fromkeys(
            (inputs[n.inputs[1]], values[n.inputs[0]].type.shape[n.attr("axis")], n.op)
            for n in lir.nodes if n.op in ("gather", "scatter_add") and n.inputs[1] in inputs))
        prog = XlaProgram(mod, dict(lir.param_data), checks)
        info = {"platform": prog.platform, "device": str(prog.device),
                "cache": "hit" if prog.cache_hit else "miss", "module_lines":
                mod.text.count("\n"), "kernels": len(lir.kernels), "source": mod.text,
                "notes": ["XLA fuses the whole module; LIR kernels are marked by comments"]}
        return Program(run_fn=prog.run, sources={"main": mod.text}, info=info)

    def __repr__(self) -> str:
        return "TpuTarget()"
