"""rlx.quant: integer quantization - ops, observers and calibration, PTQ and QAT.

Imports with the standard library alone; numpy is needed once observers or PTQ run.
"""

from __future__ import annotations

from rlx_core.quant.errors import CalibrationError, GroupSizeError, QuantAxisError, QuantConfigError
from rlx_core.quant.ops import (
    dequantize,
    fake_quantize,
    int4_linear,
    int_conv2d,
    int_linear,
    quantize,
    requantize,
)
from rlx_core.quant.params import QParams, qparams_from_range, quantize_multiplier


def __getattr__(name: str) -> object:
    # the submodules that need numpy load on first use (rlx_core imports without it)
    if name in ("ptq", "observers", "int4", "qat", "amp"):
        import importlib

        return importlib.import_module(f"rlx_core.quant.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = ["quantize", "dequantize", "requantize", "int_linear", "int_conv2d", "int4_linear", "fake_quantize", "QParams",
           "qparams_from_range", "quantize_multiplier", "CalibrationError", "QuantAxisError",
           "GroupSizeError", "QuantConfigError"]
