"""The Target of a GPU language checked by a vendor toolchain, where no device runs it here.

A subclass names its dialect, its table and its checker (``check(source)``, raising
KernelCheckError). ``build`` renders the plan, checks every kernel in one translation unit
(entry points renamed per kernel so they can share it) and returns a Program whose ``run``
says that nothing executes here. ``render_sources`` needs no toolchain at all.
"""

from __future__ import annotations

from typing import Any

from rlx_core.errors import TargetUnavailableError
from rlx_core.ir.graph import Graph
from rlx_core.targets.base import Program
from rlx_core.targets.gpu_common.dialect import Dialect
from rlx_core.targets.gpu_common.kernels import render_graph


def unit(dialect: Any, kernels: Any) -> str:
    """Every launchable kernel's source in one unit, each entry point named after its kernel."""
    entry = getattr(dialect, "entry", "rlx_kernel")
    return "\n".join(k.source.replace(entry, f"{entry}_{k.name}") for k in kernels
                     if k.constant is None)


class CheckedGpuTarget:
    """Base of cuda, rocm and metal: render with gpu_common, check, never run."""

    name = "checked-gpu"
    verification = "compile-check"
    description = ""
    dialect: Dialect
    install_hint = ""
    runs_on = ""  # where the kernels would execute ("an NVIDIA GPU")

    def checker(self) -> tuple[str | None, str]:
        """(the checking tool, "") or (None, why it is missing)."""
        raise NotImplementedError

    def check(self, source: str) -> str:
        """Run the checker over ``source``; return what was checked (e.g. "sm_80, sm_90")."""
        raise NotImplementedError

    def table(self) -> Any:
        raise NotImplementedError

    def available(self) -> tuple[bool, str]:
        tool, why = self.checker()
        return (True, "") if tool else (False, why)

    @property
    def caps(self) -> Any:
        return self.table()

    def render_sources(self, lir: Graph) -> dict[str, str]:
        return {k.name: k.source for k in render_graph(self.dialect, lir)
                if k.constant is None}

    def build(self, lir: Graph, options: Any = None) -> Program:
        tool, why = self.checker()
        if tool is None:
            raise TargetUnavailableError(f"target {self.name!r} is not available: {why}",
                                         hint=self.install_hint)
        kernels = render_graph(self.dialect, lir)
        checked = self.check(unit(self.dialect, kernels))
        name, where = self.name, self.runs_on

        def run(inputs: Any, params: Any) -> list[Any]:
            raise TargetUnavailableError(
                f"target {name!r} is {self.verification} here: its kernels passed {checked}, "
                f"but nothing runs them on this machine (they need {where})",
                hint="use target cpu (or webgpu/opencl) to run; rlx compile FILE --target "
                     f"{name} --emit source prints the kernels")

        return Program(run_fn=run, sources={k.name: k.source for k in kernels
                                            if k.constant is None},
                       info={"checked": checked, "tool": tool})

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"
