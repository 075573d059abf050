"""Int8EmbeddedTarget: the part of a target that every int8 embedded device shares.

cortex-m (firmware under QEMU) and fpga (a datapath under Verilator) take the same input, an
int8 LIR, through the same rules: the strict check before dispatch (cortex_m/check.py, every
offending node with a fix), the legalization into firmware steps and the emitter's source
(the boundary, constants and arena plan the fpga's datapath reads too). A subclass names its
tools, its capability table and how it builds; this class does the rest once.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import Any

from rlx_core.errors import TargetUnavailableError
from rlx_core.ir.graph import Graph


class Int8EmbeddedTarget:
    """Base of cortex-m and fpga (not registered itself)."""

    name = ""
    verification = ""
    description = ""
    # random graphs for the fuzzer: the MIR ops the table claims, no float HIR model ops
    fuzz_hir_ops: tuple[str, ...] = ()
    caps_module = ""  # a module with ``caps(verification) -> Capabilities``
    wasm_why = ""  # why Pyodide / WebAssembly cannot run it
    install_hint = ""  # what to install when a tool is missing

    def tools(self) -> list[Callable[[], tuple[str | None, str]]]:
        """Finders of the tools ``build`` needs, each ``() -> (path or None, why)``."""
        raise NotImplementedError

    def available(self) -> tuple[bool, str]:
        if sys.platform == "emscripten":
            return False, self.wasm_why
        for find in self.tools():
            found, why = find()
            if found is None:
                return False, why
        try:
            import numpy  # noqa: F401
        except ImportError:
            return False, "numpy is not installed (weights and I/O are packed with it)"
        return True, ""

    def require_available(self) -> None:
        """TargetUnavailableError naming the missing tool, before any build."""
        ok, why = self.available()
        if not ok:
            raise TargetUnavailableError(f"target {self.name!r} is not available: {why}",
                                         hint=self.install_hint)

    @property
    def caps(self) -> Any:
        return importlib.import_module(self.caps_module).caps(self.verification)

    def check_hir(self, g: Graph) -> None:
        """The strict int8 check, before dispatch: every offending node with a fix."""
        from rlx_core.targets.cortex_m.check import check_hir

        check_hir(g, self.caps)

    def firmware_source(self, lir: Graph) -> tuple[Any, Any]:
        """(legalized steps, FirmwareSource) of ``lir``; the typed error listing every node
        the int8 rules refuse."""
        from rlx_core.targets.cortex_m.emitter import emit
        from rlx_core.targets.cortex_m.legalize import legalize, raise_problems

        checked = legalize(lir)
        raise_problems(checked.problems, lir.name)
        return checked, emit(lir, checked.steps)

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"
