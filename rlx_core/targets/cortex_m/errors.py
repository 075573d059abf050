"""Typed errors of the cortex-m and fpga targets (codes RLX-U001..U039, docs/errors.md)."""

from __future__ import annotations

from typing import Any

from rlx_core.dispatch.errors import LegalizationError
from rlx_core.errors import RlxError


class FirmwareLegalizationError(LegalizationError):
    """Nodes an int8 firmware cannot run: a LegalizationError (the model has no legal route on
    the target), with the target's own codes and one line per offending node in ``lines``."""

    def __init__(self, message: str, *, hint: str | None = None, lines: Any = ()):
        self.target, self.policy, self.failures, self.decisions = "cortex-m", "strict", [], []
        self.lines = list(lines)
        RlxError.__init__(self, message, hint=hint)

    @property
    def codes(self) -> list[str]:
        return [line.split(" ", 1)[0] for line in self.lines]


class FloatOpError(FirmwareLegalizationError):
    """The graph computes in floating point inside the model (not only at its boundary)."""

    code = "RLX-U001"


class NoInt8KernelError(FirmwareLegalizationError):
    """An op (or an op in this dtype / layout) has no int8 kernel on the device."""

    code = "RLX-U002"


class FusedKernelError(NoInt8KernelError):
    """A kernel of several ops fused together has no int8 kernel, while each op alone has one
    (a ``neg`` feeding an ``argmax``, a broadcast of a broadcast): a refusal of the fusion, not
    of any op, so the fuzzer's refusal learning skips it (rlx_core/testing/refusals.py)."""

    code = "RLX-U015"


class ZeroSizeTensorError(FirmwareLegalizationError):
    """A tensor with no elements: nothing for a static firmware buffer to hold or compute."""

    code = "RLX-U014"


class BoardMemoryError(RlxError):
    """The weights do not fit the board's flash, or the arena + stack its RAM."""

    code = "RLX-U003"


class UnknownBoardError(RlxError):
    """A board name that is not in the table (boards.py)."""

    code = "RLX-U004"


class FirmwareBuildError(RlxError):
    """arm-none-eabi-gcc (or the FPGA tools) failed on generated code."""

    code = "RLX-U005"


class EmulatorRunError(RlxError):
    """QEMU (or the Verilator simulation) did not run the program to completion."""

    code = "RLX-U006"


class BakedWeightsError(RlxError):
    """A call passed weights other than those compiled into flash."""

    code = "RLX-U007"


class FirmwareInputError(RlxError):
    """Host inputs that do not match the firmware's input types."""

    code = "RLX-U008"
