"""Elementwise math functions of the public namespace (``rlx.exp``, ``rlx.maximum``, ...)."""

from __future__ import annotations

from typing import Any

from rlx_core.frontend import ops


def exp(x: Any) -> Any: return ops.unary("exp", x)
def log(x: Any) -> Any: return ops.unary("log", x)
def sqrt(x: Any) -> Any: return ops.unary("sqrt", x)
def rsqrt(x: Any) -> Any: return ops.unary("rsqrt", x)
def tanh(x: Any) -> Any: return ops.unary("tanh", x)
def erf(x: Any) -> Any: return ops.unary("erf", x)
def sin(x: Any) -> Any: return ops.unary("sin", x)
def cos(x: Any) -> Any: return ops.unary("cos", x)
def abs(x: Any) -> Any: return ops.unary("abs", x)  # noqa: A001
def floor(x: Any) -> Any: return ops.unary("floor", x)
def ceil(x: Any) -> Any: return ops.unary("ceil", x)
def sign(x: Any) -> Any: return ops.unary("sign", x)
def sigmoid(x: Any) -> Any: return ops.unary("logistic", x)
def maximum(a: Any, b: Any) -> Any: return ops.binary("max", a, b)
def minimum(a: Any, b: Any) -> Any: return ops.binary("min", a, b)
