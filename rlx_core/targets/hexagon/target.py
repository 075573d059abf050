"""HexagonTarget: LIR -> C with HVX intrinsics -> clang (v68 check) -> qemu-hexagon (v67 run).

Every build compile-checks the program for ``-mv68 -mhvx -mhvx-length=128b``; where
``qemu-hexagon`` and ``ld.lld`` exist it also links a freestanding v67 program (minirt.py) and
runs it under the emulator, which is what the conformance suite compares with numpy.
"""

from __future__ import annotations

import sys
from typing import Any

from rlx_core.errors import TargetUnavailableError
from rlx_core.ir.graph import Graph
from rlx_core.targets.base import Program, Verification


class HexagonTarget:
    """C + HVX for a Hexagon DSP; executed here under qemu-hexagon (emulated)."""

    name = "hexagon"
    verification = Verification.EXECUTES_EMULATED
    description = ("C with HVX intrinsics (128-byte vectors) for a Hexagon DSP: compile-checked "
                   "by clang for v68 + HVX, linked freestanding and run under qemu-hexagon "
                   "(v67, the newest QEMU 7.2 emulates)")

    def available(self) -> tuple[bool, str]:
        if sys.platform == "emscripten":
            return False, "there is no C compiler under Pyodide / WebAssembly"
        from rlx_core.targets.hexagon.emulator import find_lld, find_qemu
        from rlx_core.targets.hexagon.toolchain import find_clang

        for found, why in (find_clang(), find_lld(), find_qemu()):
            if found is None:
                return False, why
        try:
            import numpy  # noqa: F401
        except ImportError:
            return False, "numpy is not installed (the host side packs buffers with it)"
        return True, ""

    @property
    def caps(self) -> Any:
        from rlx_core.targets.hexagon.caps import caps

        return caps(self.verification)

    def render_sources(self, lir: Graph) -> dict[str, str]:
        """The generated C, without needing clang (``rlx compile --emit source``, the explorer's
        side-by-side kernels), each kernel's head naming the line it was traced from."""
        from rlx_core.targets.hexagon.renderer import HexagonRenderer

        prog = HexagonRenderer().render_program(lir, "rlx_" + lir.name)
        return {"program": prog.shown_source()}

    def build(self, lir: Graph, options: Any = None) -> Program:
        ok, why = self.available()
        if not ok:
            raise TargetUnavailableError(f"target 'hexagon' is not available: {why}",
                                         hint="install clang-14, lld and qemu-user (Debian), "
                                              "or use target cpu")
        from rlx_core.targets.hexagon.emulator import EmulatedProgram, build_elf
        from rlx_core.targets.hexagon.renderer import HexagonRenderer
        from rlx_core.targets.hexagon.toolchain import compile_check

        cprog = HexagonRenderer().render_program(lir, "rlx_" + lir.name)
        clang = compile_check(cprog.source)  # v68 + HVX 128B: the DSP the source is for
        elf, hit = build_elf(cprog)  # v67 + HVX: what QEMU runs
        prog = EmulatedProgram(cprog, elf, dict(lir.param_data))
        info = {"compiler": clang, "checked_for": "v68 hvx-length=128b", "emulated_as": "v67",
                "elf": str(elf), "cache": "hit" if hit else "miss",
                "kernels": {k: {"impl": v} for k, v in cprog.kernel_impl.items()},
                "source": cprog.source}
        return Program(run_fn=prog.run, sources=dict(cprog.kernel_sources), info=info)

    def __repr__(self) -> str:
        return "HexagonTarget()"
