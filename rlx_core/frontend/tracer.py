"""Tracing: run an ordinary Python function on symbolic Tensors and record an HIR graph."""

from __future__ import annotations

import contextlib
import inspect
import math
import os
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from rlx_core.errors import RlxError, TraceError
from rlx_core.ir import dtypes as dt
from rlx_core.ir.builder import Builder, NameGen, clean_name
from rlx_core.ir.graph import Graph, Level, Loc, TensorType, Value, ValueKind, checked_shape
from rlx_core.ir.verifier import verify

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Arrays with more elements than this become named parameters instead of inline constants.
INLINE_CONSTANT_LIMIT = 16


@dataclass(frozen=True)
class TensorSpec:
    """Shape and dtype of an example argument, for tracing without any array library."""

    shape: tuple[int, ...]
    dtype: dt.DType = dt.f32

    def __init__(self, shape: Sequence[int], dtype: object = "f32"):
        object.__setattr__(self, "shape", checked_shape(shape, "rlx.spec shape"))
        object.__setattr__(self, "dtype", dt.get(dtype))


def spec(shape: Sequence[int], dtype: object = "f32") -> TensorSpec:
    """An example argument of the given shape and dtype (no data needed)."""
    return TensorSpec(shape, dtype)


def type_of_example(arg: object, what: str = "argument") -> TensorType:
    """The TensorType of an example argument: a TensorSpec, an array (numpy-like), a scalar,
    a memoryview / array.array, or a nested list."""
    if isinstance(arg, TensorSpec):
        return TensorType(arg.dtype, arg.shape)
    if hasattr(arg, "shape") and hasattr(arg, "dtype"):
        return TensorType(dt.get(arg.dtype), tuple(int(d) for d in arg.shape))
    if isinstance(arg, bool):
        return TensorType(dt.bool_, ())
    if isinstance(arg, int):
        return TensorType(dt.i64, ())
    if isinstance(arg, float):
        return TensorType(dt.f32, ())
    if isinstance(arg, memoryview):
        return TensorType(_format_dtype(arg.format), tuple(arg.shape or ()))
    if type(arg).__name__ == "array" and hasattr(arg, "typecode"):
        return TensorType(_format_dtype(arg.typecode), (len(arg),))  # type: ignore[arg-type]
    if isinstance(arg, list | tuple):
        flat, shape = flatten_nested(arg)
        kind = dt.f32 if any(isinstance(v, float) for v in flat) else dt.i64
        return TensorType(kind, shape)
    raise TraceError(f"cannot use {type(arg).__name__} as a tensor {what}",
                     hint="pass a numpy array, a list, a scalar, or rlx.spec(shape, dtype)")


_FORMATS = {"f": dt.f32, "d": dt.f64, "e": dt.f16, "i": dt.i32, "l": dt.i64, "q": dt.i64,
            "b": dt.i8, "B": dt.u8, "h": dt.i16, "I": dt.u32, "?": dt.bool_}


def _format_dtype(fmt: str) -> dt.DType:
    fmt = fmt.lstrip("@=<>!")
    if fmt not in _FORMATS:
        raise TraceError(f"buffer format {fmt!r} has no rlx dtype")
    return _FORMATS[fmt]


def flatten_nested(data: Any) -> tuple[list[Any], tuple[int, ...]]:
    """Row-major flat values and the shape of a nested list (ragged lists raise TraceError)."""
    if not isinstance(data, list | tuple):
        return [data], ()
    if not data:
        return [], (0,)
    parts = [flatten_nested(x) for x in data]
    inner = parts[0][1]
    if any(p[1] != inner for p in parts):
        raise TraceError("ragged nested list: rows have different shapes")
    return [v for p in parts for v in p[0]], (len(data),) + inner


def user_loc(scope: str = "") -> Loc:
    """The innermost stack frame outside rlx_core: the user's file and line."""
    frame = sys._getframe(1)
    while frame is not None:
        path = frame.f_code.co_filename
        if not path.startswith(_PACKAGE_DIR) and "<frozen" not in path:
            return Loc(file=_short(path), line=frame.f_lineno, scope=scope)
        frame = frame.f_back  # type: ignore[assignment]
    return Loc(scope=scope)


def _variable_name(obj: object) -> str | None:
    """The name the user's code knows ``obj`` by (locals first, then globals), for readable IR."""
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE_DIR):
        frame = frame.f_back  # type: ignore[assignment]
    while frame is not None:
        for scope in (frame.f_locals, frame.f_globals):
            for key, val in scope.items():
                if val is obj and not key.startswith("_"):
                    return key
        frame = frame.f_back  # type: ignore[assignment]
    return None


def _short(path: str) -> str:
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return path
    return path if rel.startswith("..") else rel


class TraceContext:
    """State of one trace: the builder, declared inputs and parameters, the scope stack."""

    def __init__(self, name: str):
        self.name = clean_name(name)
        self.names = NameGen()
        self.builder = Builder(self.names)
        self.inputs: list[Value] = []
        self.params: list[Value] = []
        self.param_data: dict[str, Any] = {}
        self._param_ids: dict[int, Value] = {}
        self.scopes: list[str] = []

    @property
    def scope(self) -> str:
        return ".".join(self.scopes)

    def emit(self, op: str, inputs: list[Value], attrs: dict[str, Any] | None = None) -> Value:
        return self.builder.emit(op, inputs, attrs, loc=user_loc(self.scope))

    def add_input(self, name: str, ty: TensorType) -> Value:
        v = Value(self.names.claim(name), ty, ValueKind.INPUT)
        self.inputs.append(v)
        return v

    def add_param(self, data: Any, name: str | None = None) -> Value:
        """A weight: shown by name in the IR, its data bound to the executable."""
        key = id(data)
        if key in self._param_ids:
            return self._param_ids[key]
        ty = type_of_example(data, "parameter")
        base = name or _variable_name(data) or "param"
        if self.scope and not name:
            base = f"{self.scope}.{base}"
        v = Value(self.names.claim(base), ty, ValueKind.PARAM)
        self.params.append(v)
        self.param_data[v.name] = data
        self._param_ids[key] = v
        return v

    def finish(self, outputs: list[Value]) -> Graph:
        g = Graph(self.name, Level.HIR, tuple(self.inputs), tuple(self.params),
                  tuple(self.builder.nodes), tuple(v.name for v in outputs),
                  param_data=self.param_data)
        return verify(g)


_state = threading.local()


def current() -> TraceContext:
    """The active trace, or a TraceError explaining that tensors exist only while tracing."""
    ctx = getattr(_state, "ctx", None)
    if ctx is None:
        raise TraceError("rlx tensor operations are only valid inside rlx.trace / rlx.jit / "
                         "rlx.compile", hint="wrap the code in a function and trace it")
    return ctx


@contextlib.contextmanager
def _active(ctx: TraceContext) -> Iterator[TraceContext]:
    prev = getattr(_state, "ctx", None)
    _state.ctx = ctx
    try:
        yield ctx
    finally:
        _state.ctx = prev


@contextlib.contextmanager
def block(name: str) -> Iterator[None]:
    """Group the ops traced inside into a named model block (``encoder.0.attn``); the explorer
    collapses blocks, and every node remembers its block in ``loc.scope``. Outside a trace
    (eager mode, rlx_core/frontend/eager.py) it names nothing and does nothing."""
    ctx = getattr(_state, "ctx", None)
    if ctx is None:
        yield
        return
    ctx.scopes.append(clean_name(name))
    try:
        yield
    finally:
        ctx.scopes.pop()


def _arg_names(fn: Callable[..., Any], n: int) -> list[str]:
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        params = []
    names = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if params and params[-1].kind is inspect.Parameter.VAR_POSITIONAL or len(names) < n:
        names += [f"arg{i}" for i in range(len(names), n)]
    return names[:n]


def trace(fn: Callable[..., Any], *example_args: Any, name: str | None = None) -> Graph:
    """Trace ``fn`` on symbolic tensors shaped like ``example_args`` and return its HIR graph.

    Arrays the function closes over become parameters (weights); small ones inline constants.
    Shape and dtype errors are raised here, naming the op, the shapes and the user's line.
    """
    from rlx_core.frontend.tensor import Tensor

    ctx = TraceContext(name or getattr(fn, "__name__", "fn"))
    with _active(ctx):
        args = []
        for arg_name, arg in zip(_arg_names(fn, len(example_args)), example_args, strict=False):
            args.append(Tensor(ctx.add_input(arg_name, type_of_example(arg))))
        try:
            result = fn(*args)
        except RlxError:
            raise
        except (TypeError, IndexError, ValueError) as err:
            loc = _loc_of_exception(err)
            raise TraceError(f"tracing {ctx.name} failed at {loc}: {type(err).__name__}: {err}",
                             hint="rlx traces with symbolic tensors: data-dependent Python control "
                                  "flow (if/for over tensor values) is not supported") from err
        outs = result if isinstance(result, tuple | list) else (result,)
        values = []
        for i, out in enumerate(outs):
            if not isinstance(out, Tensor):
                raise TraceError(f"{ctx.name} returned {type(out).__name__} as output {i}",
                                 hint="return rlx tensors (or a tuple of them)")
            values.append(out.value)
        if not values:
            raise TraceError(f"{ctx.name} returned no tensors")
        return ctx.finish(values)


def _loc_of_exception(err: BaseException) -> str:
    tb = err.__traceback__
    where = "<unknown>"
    while tb is not None:
        path = tb.tb_frame.f_code.co_filename
        if not path.startswith(_PACKAGE_DIR):
            where = f"{_short(path)}:{tb.tb_lineno}"
        tb = tb.tb_next
    return where


def numel(shape: Sequence[int]) -> int:
    return math.prod(shape)
