"""Keyword arguments of a jitted function, bound to positions: specializations, guards and
traced graphs take their inputs in order, so ``f(x=a, y=b)`` is the call ``f(a, b)``."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any

from rlx_core.errors import ArgumentError

_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


def positional_args(fn: Callable[..., Any], args: tuple[Any, ...],
                    kwargs: Mapping[str, Any]) -> tuple[Any, ...]:
    """``args`` plus ``kwargs`` as one positional tuple in ``fn``'s parameter order.

    Raises ArgumentError (RLX-R001) when they do not bind to ``fn``'s signature, or when a
    keyword cannot be given a position (a keyword-only parameter, or one after a parameter
    left to its default, which tracing keeps as a Python value, not an input).
    """
    name = getattr(fn, "__name__", "function")
    if not kwargs:
        return args
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        raise ArgumentError(f"{name}: keyword arguments {sorted(kwargs)} cannot be matched to "
                            "a function without a signature",
                            hint="pass the arguments by position") from None
    try:
        bound = sig.bind(*args, **kwargs)
    except TypeError as err:
        raise ArgumentError(f"{name}: {err}",
                            hint="call it with the arguments of the jitted function") from None
    out: list[Any] = []
    skipped = ""
    for p in sig.parameters.values():
        if p.kind is inspect.Parameter.VAR_POSITIONAL:
            out.extend(bound.arguments.get(p.name, ()))
            continue
        if p.kind not in _POSITIONAL:
            if p.name in kwargs:
                raise ArgumentError(
                    f"{name}: keyword-only argument {p.name!r} cannot be a traced input",
                    hint=f"make {p.name!r} an ordinary parameter, or bind it with "
                         "functools.partial before jitting")
            continue
        if p.name not in bound.arguments:
            skipped = skipped or p.name
            continue
        if skipped:
            raise ArgumentError(
                f"{name}: {p.name!r} is given but {skipped!r} before it is left to its default",
                hint=f"pass {skipped!r} too, or pass the arguments by position")
        out.append(bound.arguments[p.name])
    return tuple(out)
