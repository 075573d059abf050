"""The target interface: what every device backend provides to the compiler and runtime.

A target is a folder under ``rlx_core/targets/<name>/`` holding its capability table
(``caps.py``), its renderer / toolchain and its device runtime. The compiler asks it three
things: can you run here (``available``), what do you claim (``caps``), and turn this LIR into
something runnable (``build``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from rlx_core.ir.graph import Graph


class Verification:
    """How a target's output is checked on this machine (DESIGN.md section 6)."""

    EXECUTES = "executes"  # kernels run and are compared against the numpy reference
    # the same, on an emulator of the device (qemu-hexagon, QEMU's Cortex-M boards)
    EXECUTES_EMULATED = "executes (emulated)"
    # a hardware description run cycle by cycle in a simulator (Verilator), not on a device
    SIMULATED = "simulated"
    SYNTAX_CHECKED = "syntax-checked"  # no compiler exists here: a strict parser pass only
    COMPILE_CHECK = "compile-check"  # generated source is compiled by the real toolchain only
    TEXT_ONLY = "text-only"  # source is generated but nothing here can check it


@dataclass
class Program:
    """A built LIR graph for one target: call ``run`` with host inputs (in graph input order).

    ``sources`` maps kernel name to generated source (empty for interpreters).
    """

    run_fn: Any
    sources: dict[str, str] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)
    # optional ``(inputs, params, outs) -> outputs``: writes the outputs into caller buffers
    # (``outs``, None per output for a fresh array) where the target can do so directly
    run_into_fn: Any = None
    # optional ``(args, out) -> outputs | None``: a whole call on the caller's arguments and
    # ``out=`` as they are (no conversion, no parameters), or None where the general path
    # must run; the Executable tries it first once a call has passed its one-time checks
    direct_fn: Any = None
    # optional ``(inputs, params) -> outputs`` for inputs the Executable has checked and
    # converted (each a C-contiguous numpy array of its input's shape and host dtype, in the
    # host's byte order): ``run`` without the target's own second check of them
    run_checked_fn: Any = None

    def run(self, inputs: Sequence[Any], params: dict[str, Any]) -> list[Any]:
        return self.run_fn(inputs, params)


class InPlaceRefused(Exception):
    """The renderer cannot write ``output`` over its donated input (a GEMM that does not store
    its update from its tiles in one KC slice, though the target's ``matmul_in_place`` offered
    the kernel's form): the runtime renders the program again with a fresh output
    (runtime/donation.py)."""

    def __init__(self, output: str):
        super().__init__(output)
        self.output = output


class Target(Protocol):
    """A device backend."""

    name: str
    verification: str
    description: str

    def available(self) -> tuple[bool, str]:
        """(True, "") when this target can build and run here, else (False, why not)."""
        ...

    @property
    def caps(self) -> Any:
        """The capability table the dispatcher consults (rlx_core.dispatch.capabilities)."""
        ...

    def build(self, lir: Graph, options: Any) -> Program:
        """Render, compile and load ``lir``; raise a typed RlxError on failure."""
        ...
