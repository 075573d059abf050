"""Typed errors of the fpga target (codes RLX-U010..U019, docs/errors.md)."""

from __future__ import annotations

from rlx_core.errors import RlxError


class NoDatapathError(RlxError):
    """The graph is int8 but not a chain of layers the datapath implements."""

    code = "RLX-U010"


class SimulationBuildError(RlxError):
    """Verilator rejected the generated Verilog or testbench."""

    code = "RLX-U011"


class SimulationRunError(RlxError):
    """The Verilator simulation did not produce every output."""

    code = "RLX-U012"


class SynthesisError(RlxError):
    """yosys or nextpnr-ice40 failed on the generated design."""

    code = "RLX-U013"
