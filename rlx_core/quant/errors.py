"""Typed errors of the quantization API (codes RLX-Q001..Q029, docs/errors.md)."""

from __future__ import annotations

from rlx_core.errors import RlxError


class CalibrationError(RlxError):
    """Calibration saw no data (an empty iterator, or an observer that observed nothing)."""

    code = "RLX-Q001"


class QuantAxisError(RlxError):
    """A per-channel axis is out of range for the tensor it quantizes."""

    code = "RLX-Q002"


class GroupSizeError(RlxError):
    """An int4 block (group) size does not divide the dimension it splits."""

    code = "RLX-Q003"


class QuantConfigError(RlxError):
    """A bad quantization setting: unknown method or scheme, a dtype that cannot hold
    quantized values, a non-positive or non-finite scale."""

    code = "RLX-Q004"
