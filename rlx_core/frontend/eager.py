"""Eager mode: rlx ops called on plain arrays, outside any trace, compute at once.

``rlx.nn.softmax(np_array)`` behaves as ``jax.nn.softmax`` does: the call is traced as a
one-op function, compiled for the numpy reference target and run. The executable is cached
per (function, static arguments, input shapes and dtypes), so a notebook loop pays the
compile once. Inside a trace the wrapper steps aside and the op records into the graph.

Arguments with ``shape`` and ``dtype`` (numpy arrays and scalars), also inside a list or
tuple (``rlx.concat([a, b])``), become inputs; everything else (Python scalars, shapes,
axes, strings) is baked into the traced function as a constant.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from rlx_core.frontend import tracer

EAGER_TARGET = "numpy"  # the semantic oracle: exact, no toolchain, compiles in milliseconds
_CACHE: dict[tuple[Any, ...], Any] = {}
_CACHE_LIMIT = 512


def _is_array(x: Any) -> bool:
    return hasattr(x, "shape") and hasattr(x, "dtype")


def _split(value: Any, arrays: list[Any]) -> Any:
    """A template of ``value`` with each array replaced by its input slot (an int in a box)."""
    if _is_array(value):
        arrays.append(value)
        return _Slot(len(arrays) - 1)
    if isinstance(value, list | tuple) and any(_is_array(v) for v in value):
        return type(value)(_split(v, arrays) for v in value)
    return value


class _Slot(int):
    """Marks where the i-th traced input goes back into the arguments."""

    def __repr__(self) -> str:
        return f"<input {int(self)}>"


def _fill(template: Any, tensors: tuple[Any, ...]) -> Any:
    if isinstance(template, _Slot):
        return tensors[int(template)]
    if isinstance(template, list | tuple) and any(isinstance(v, _Slot | list | tuple)
                                                 for v in template):
        return type(template)(_fill(v, tensors) for v in template)
    return template


def _key_part(value: Any) -> str:
    # repr tells 1 from 1.0 and True, and a slot from the int it wraps
    return f"{type(value).__name__}:{value!r}"


def tracing() -> bool:
    """True while an rlx trace is active on this thread."""
    return getattr(tracer._state, "ctx", None) is not None


def run_eagerly(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Trace ``fn(*args, **kwargs)`` as a function of its array arguments, compile it for the
    reference target (cached) and run it on those arrays."""
    from rlx_core.api import compile as rlx_compile

    arrays: list[Any] = []
    targs = tuple(_split(a, arrays) for a in args)
    tkw = {k: _split(v, arrays) for k, v in kwargs.items()}
    key = (fn, tuple(_key_part(a) for a in targs),
           tuple(sorted((k, _key_part(v)) for k, v in tkw.items())),
           tuple((tuple(a.shape), str(a.dtype)) for a in arrays))
    exe = _CACHE.get(key)
    if exe is None:
        def one_op(*tensors: Any) -> Any:
            return fn(*_fill(targs, tensors), **{k: _fill(v, tensors) for k, v in tkw.items()})

        one_op.__name__ = getattr(fn, "__name__", "op")
        exe = rlx_compile(one_op, *arrays, target=EAGER_TARGET, record=False)
        if len(_CACHE) >= _CACHE_LIMIT:
            _CACHE.pop(next(iter(_CACHE)))
        _CACHE[key] = exe
    return exe(*arrays)


def eager(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` recording into the active trace, or computing eagerly when there is none."""
    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        if tracing():
            return fn(*args, **kwargs)
        return run_eagerly(fn, args, kwargs)

    call.__rlx_eager__ = True  # type: ignore[attr-defined]
    return call
