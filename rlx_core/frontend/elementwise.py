"""Elementwise math functions of the public namespace (``rlx.exp``, ``rlx.maximum``, ...).

The float functions (all but ``abs`` and ``sign``) take an integer argument as f32 (numpy:
as f64)."""

from __future__ import annotations

from typing import Any

from rlx_core.frontend import ops


def exp(x: Any) -> Any:
    """``e ** x``, elementwise."""
    return ops.unary("exp", x)


def log(x: Any) -> Any:
    """The natural logarithm, elementwise."""
    return ops.unary("log", x)


def sqrt(x: Any) -> Any:
    """The square root, elementwise."""
    return ops.unary("sqrt", x)


def rsqrt(x: Any) -> Any:
    """``1 / sqrt(x)``, elementwise."""
    return ops.unary("rsqrt", x)


def tanh(x: Any) -> Any:
    """The hyperbolic tangent, elementwise."""
    return ops.unary("tanh", x)


def erf(x: Any) -> Any:
    """The Gauss error function, elementwise."""
    return ops.unary("erf", x)


def sin(x: Any) -> Any:
    """The sine (radians), elementwise."""
    return ops.unary("sin", x)


def cos(x: Any) -> Any:
    """The cosine (radians), elementwise."""
    return ops.unary("cos", x)


def abs(x: Any) -> Any:  # noqa: A001
    """The absolute value, elementwise."""
    return ops.unary("abs", x)


def floor(x: Any) -> Any:
    """Rounded down to a whole number, elementwise."""
    return ops.unary("floor", x)


def ceil(x: Any) -> Any:
    """Rounded up to a whole number, elementwise."""
    return ops.unary("ceil", x)


def sign(x: Any) -> Any:
    """-1, 0 or 1 by the sign of ``x``, elementwise."""
    return ops.unary("sign", x)


def sigmoid(x: Any) -> Any:
    """The logistic function ``1 / (1 + exp(-x))``, elementwise."""
    return ops.unary("logistic", x)


def maximum(a: Any, b: Any) -> Any:
    """The larger of ``a`` and ``b``, elementwise (broadcast, dtypes promoted)."""
    return ops.binary("max", a, b)


def minimum(a: Any, b: Any) -> Any:
    """The smaller of ``a`` and ``b``, elementwise (broadcast, dtypes promoted)."""
    return ops.binary("min", a, b)
