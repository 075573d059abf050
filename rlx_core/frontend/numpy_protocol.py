"""numpy's dispatch protocols on traced tensors: ``np.exp(x)``, ``np.maximum(x, 0)``,
``np.sum(x, axis=1)`` inside a traced function record the rlx op, as JAX's tracers do.

``Tensor.__array_ufunc__`` maps ufuncs (and ``ufunc.reduce`` of add/multiply/maximum/minimum),
``Tensor.__array_function__`` maps numpy functions; anything without an rlx counterpart, and any
attempt to turn a traced tensor into concrete numbers (``np.asarray(x)``), raises a typed error
that names the rlx spelling.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rlx_core.errors import TraceError
from rlx_core.frontend import ops


class NumpyInteropError(TraceError):
    """A numpy function or ufunc with no rlx counterpart was applied to a traced tensor."""

    code = "RLX-T010"


class ConcreteValueError(TraceError):
    """A traced tensor was asked for concrete values (``np.asarray``, ``float``, ``int``)."""

    code = "RLX-T011"


def _unary(op: str) -> Callable[..., Any]:
    return lambda x: ops.unary(op, x)


def _binary(op: str) -> Callable[..., Any]:
    return lambda a, b: ops.binary(op, a, b)


# ufunc name -> rlx op, and the spelling shown to the user
UFUNCS: dict[str, Callable[..., Any]] = {
    "exp": _unary("exp"), "log": _unary("log"), "sqrt": _unary("sqrt"), "tanh": _unary("tanh"),
    "sin": _unary("sin"), "cos": _unary("cos"), "absolute": _unary("abs"),
    "fabs": _unary("abs"), "floor": _unary("floor"), "ceil": _unary("ceil"),
    "sign": _unary("sign"), "negative": _unary("neg"), "logical_not": _unary("logical_not"),
    "positive": lambda x: x, "square": lambda x: ops.binary("mul", x, x),
    "reciprocal": lambda x: ops.binary("div", 1.0, x),
    "add": _binary("add"), "subtract": _binary("sub"), "multiply": _binary("mul"),
    "divide": _binary("div"), "true_divide": _binary("div"), "power": _binary("pow"),
    "floor_divide": ops.floordiv, "remainder": _binary("rem"), "mod": _binary("rem"),
    "maximum": _binary("max"), "minimum": _binary("min"), "fmax": _binary("max"),
    "fmin": _binary("min"), "matmul": ops.matmul,
    "equal": _binary("eq"), "not_equal": _binary("ne"), "less": _binary("lt"),
    "less_equal": _binary("le"), "greater": _binary("gt"), "greater_equal": _binary("ge"),
    "logical_and": _binary("and"), "logical_or": _binary("or"), "logical_xor": _binary("xor"),
    "bitwise_and": _binary("and"), "bitwise_or": _binary("or"), "bitwise_xor": _binary("xor"),
}
_REDUCERS = {"add": "reduce_sum", "multiply": "reduce_prod", "maximum": "reduce_max",
             "minimum": "reduce_min"}


def _reduction(op: str) -> Callable[..., Any]:
    def run(x: Any, axis: Any = None, keepdims: bool = False, **kw: Any) -> Any:
        _no_extra(op, kw)
        return ops.reduce(op, x, axis, keepdims)
    return run


def _no_extra(name: str, kw: dict[str, Any]) -> None:
    extra = {k: v for k, v in kw.items() if v is not None}
    if extra:
        raise NumpyInteropError(f"np.{name}: argument(s) {', '.join(extra)} are not supported "
                                "on traced tensors", hint="drop them, or use the rlx op")


def _where(cond: Any, a: Any = None, b: Any = None) -> Any:
    if a is None or b is None:
        raise NumpyInteropError("np.where(cond) with one argument gives data-dependent shapes",
                                hint="use rlx.where(cond, a, b)")
    return ops.where(cond, a, b)


def _clip(x: Any, lo: Any = None, hi: Any = None, **kw: Any) -> Any:
    _no_extra("clip", kw)
    out = x if lo is None else ops.binary("max", x, lo)
    return out if hi is None else ops.binary("min", out, hi)


def _dot(a: Any, b: Any) -> Any:
    if ops.asarray(a).ndim > 2 or ops.asarray(b).ndim > 2:
        raise NumpyInteropError("np.dot of rank > 2 operands is not mapped",
                                hint="use x @ w (rlx.matmul), which batches like np.matmul")
    return ops.matmul(a, b)


def _simple(fn: Callable[..., Any], name: str) -> Callable[..., Any]:
    def run(*args: Any, **kw: Any) -> Any:
        _no_extra(name, {k: v for k, v in kw.items() if k in ("out", "dtype", "where")})
        return fn(*args, **{k: v for k, v in kw.items() if k not in ("out", "dtype", "where")})
    return run


def _expand_dims(x: Any, axis: int) -> Any:
    from rlx_core.ir.ops.base import normalize_axis

    t = ops.asarray(x)
    ax = normalize_axis("expand_dims", axis, t.ndim + 1)
    return ops.reshape(t, t.shape[:ax] + (1,) + t.shape[ax:])


def _squeeze(x: Any, axis: Any = None) -> Any:
    from rlx_core.ir.ops.base import normalize_axis

    t = ops.asarray(x)
    axes = [i for i, d in enumerate(t.shape) if d == 1] if axis is None else [
        normalize_axis("squeeze", a, t.ndim) for a in ((axis,) if isinstance(axis, int) else axis)]
    if any(t.shape[a] != 1 for a in axes):
        raise NumpyInteropError(f"np.squeeze: axis {axis} of {t.shape} is not of size 1")
    return ops.reshape(t, tuple(d for i, d in enumerate(t.shape) if i not in axes))


FUNCTIONS: dict[str, Callable[..., Any]] = {
    "shape": lambda x: x.shape, "ndim": lambda x: x.ndim, "size": lambda x: x.size,
    "expand_dims": _expand_dims, "squeeze": _squeeze,
    "sum": _reduction("reduce_sum"), "prod": _reduction("reduce_prod"),
    "max": _reduction("reduce_max"), "amax": _reduction("reduce_max"),
    "min": _reduction("reduce_min"), "amin": _reduction("reduce_min"),
    "mean": _simple(ops.mean, "mean"), "var": _simple(ops.var, "var"),
    "argmax": lambda x, axis=-1: ops.argmax(x, axis),
    "reshape": lambda x, shape: ops.reshape(x, shape),
    "transpose": lambda x, axes=None: ops.transpose(x, *(() if axes is None else (axes,))),
    "swapaxes": ops.swapaxes, "concatenate": lambda xs, axis=0: ops.concat(xs, axis),
    "stack": lambda xs, axis=0: ops.stack(xs, axis), "where": _where, "clip": _clip,
    "take": lambda x, idx, axis=0: ops.take(x, idx, axis), "dot": _dot,
    "broadcast_to": ops.broadcast_to, "matmul": ops.matmul,
    "exp": UFUNCS["exp"], "tanh": UFUNCS["tanh"],
}

# numpy name -> the rlx spelling to suggest when it is not mapped
SPELLINGS = {"einsum": "x @ w with reshape/transpose", "softmax": "rlx.nn.softmax",
             "erf": "rlx.erf", "argmin": "rlx.argmax(-x)", "std": "rlx.sqrt(x.var(axis))",
             "tile": "rlx.concat([...])", "repeat": "rlx.concat([...])",
             "zeros_like": "rlx.zeros(x.shape, x.dtype)", "ones_like": "rlx.ones(x.shape, x.dtype)",
             "log1p": "rlx.log(1 + x)", "expm1": "rlx.exp(x) - 1"}


def _suggest(name: str) -> str:
    if name in SPELLINGS:
        return f"use {SPELLINGS[name]}"
    return ("use the rlx ops (rlx.exp, rlx.maximum, rlx.where, rlx.nn.*, x.sum(axis), x @ w); "
            "docs/errors.md#rlx-t010 lists the numpy functions that map")


def apply_ufunc(ufunc: Any, method: str, inputs: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``Tensor.__array_ufunc__``: the rlx op for ``ufunc`` (or NumpyInteropError)."""
    name = ufunc.__name__
    if kwargs.get("out") is not None:
        raise NumpyInteropError(f"np.{name}(..., out=...) cannot write into a traced tensor",
                                hint=f"use the returned value: y = np.{name}(...)")
    if method == "reduce" and name in _REDUCERS:
        axis = kwargs.get("axis", 0)
        return ops.reduce(_REDUCERS[name], inputs[0], axis, bool(kwargs.get("keepdims", False)))
    if method != "__call__" or name not in UFUNCS:
        what = f"np.{name}" if method == "__call__" else f"np.{name}.{method}"
        raise NumpyInteropError(f"{what} has no rlx counterpart on traced tensors",
                                hint=_suggest(name))
    _no_extra(name, {k: v for k, v in kwargs.items() if k != "out"})
    return UFUNCS[name](*inputs)


def apply_function(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``Tensor.__array_function__``: the rlx op for the numpy function (or the error)."""
    name = func.__name__
    if name not in FUNCTIONS:
        raise NumpyInteropError(f"np.{name} has no rlx counterpart on traced tensors",
                                hint=_suggest(name))
    return FUNCTIONS[name](*args, **kwargs)


def concrete_value_error(what: str) -> ConcreteValueError:
    return ConcreteValueError(
        f"{what} of a traced tensor: its values are unknown while tracing",
        hint="keep the computation in rlx ops (np.exp(x) and friends map to them); compute "
             "outside the traced function, or call rlx ops on plain arrays (eager mode)")
