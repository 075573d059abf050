"""NumpyTarget: interprets LIR kernel by kernel with numpy, through the arena plan."""

from __future__ import annotations

from typing import Any

from rlx_core.errors import TargetUnavailableError
from rlx_core.ir.graph import Graph
from rlx_core.targets.base import Program, Verification


class NumpyTarget:
    """The reference interpreter. It generates no source: its kernels are the IR itself."""

    name = "numpy"
    verification = Verification.EXECUTES
    description = ("numpy reference interpreter: runs every MIR op by its definition in "
                   "targets/numpy_ref/semantics.py; the oracle other targets are compared with")

    def available(self) -> tuple[bool, str]:
        try:
            import numpy  # noqa: F401
        except ImportError:
            return False, "numpy is not installed"
        return True, ""

    @property
    def caps(self) -> Any:
        # imported on use: the table pulls in the dispatch layer, which a bare import must not
        from rlx_core.targets.numpy_ref.caps import CAPS

        return CAPS

    def build(self, lir: Graph, options: Any = None) -> Program:
        ok, why = self.available()
        if not ok:
            raise TargetUnavailableError(f"target 'numpy' is not available: {why}",
                                         hint="pip install numpy (or rlx-explorer[numpy])")
        from rlx_core.targets.numpy_ref.executor import build_program

        return build_program(lir)

    def __repr__(self) -> str:
        return "NumpyTarget()"
