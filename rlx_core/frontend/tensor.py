"""Tensor: the symbolic, numpy-like value user code manipulates while being traced."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from rlx_core.frontend import ops
from rlx_core.ir.dtypes import DType
from rlx_core.ir.graph import Value


class Tensor:
    """A traced value. Operators and methods record MIR nodes into the active trace."""

    __slots__ = ("value",)
    __array_priority__ = 1000  # numpy defers `ndarray op Tensor` to us

    def __init__(self, value: Value):
        self.value = value

    # ---- metadata -----------------------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        return self.value.type.shape

    @property
    def dtype(self) -> DType:
        return self.value.type.dtype

    @property
    def ndim(self) -> int:
        return self.value.type.rank

    @property
    def size(self) -> int:
        return self.value.type.size

    @property
    def T(self) -> Tensor:
        return ops.transpose(self)

    def __len__(self) -> int:
        if not self.shape:
            from rlx_core.frontend.numpy_protocol import NumpyInteropError

            raise NumpyInteropError("len() of a 0-d traced tensor", hint="use x.shape")
        return self.shape[0]

    def __iter__(self) -> Iterator[Tensor]:
        """Rows along the leading axis (``for row in x``), one slice op each, as numpy."""
        n = len(self)
        return (ops.getitem(self, i) for i in range(n))

    # ---- numpy's protocols (rlx_core/frontend/numpy_protocol.py) -------------------------------
    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        from rlx_core.frontend.numpy_protocol import apply_ufunc

        return apply_ufunc(ufunc, method, inputs, kwargs)

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        from rlx_core.frontend.numpy_protocol import apply_function

        return apply_function(func, args, kwargs)

    def __array__(self, *args: Any, **kwargs: Any) -> Any:
        from rlx_core.frontend.numpy_protocol import concrete_value_error

        raise concrete_value_error("np.asarray / np.array")

    def __float__(self) -> float:
        from rlx_core.frontend.numpy_protocol import concrete_value_error

        raise concrete_value_error("float()")

    def __int__(self) -> int:
        from rlx_core.frontend.numpy_protocol import concrete_value_error

        raise concrete_value_error("int()")

    def __repr__(self) -> str:
        return f"Tensor(%{self.value.name} : {self.value.type})"

    def __bool__(self) -> bool:
        from rlx_core.errors import TraceError

        raise TraceError("the truth value of a traced tensor is unknown at trace time",
                         hint="use rlx.where(cond, a, b) instead of Python if/and/or on tensors")

    # ---- arithmetic ---------------------------------------------------------------------------
    def __add__(self, o: Any) -> Tensor: return ops.binary("add", self, o)
    def __radd__(self, o: Any) -> Tensor: return ops.binary("add", o, self)
    def __sub__(self, o: Any) -> Tensor: return ops.binary("sub", self, o)
    def __rsub__(self, o: Any) -> Tensor: return ops.binary("sub", o, self)
    def __mul__(self, o: Any) -> Tensor: return ops.binary("mul", self, o)
    def __rmul__(self, o: Any) -> Tensor: return ops.binary("mul", o, self)
    def __truediv__(self, o: Any) -> Tensor: return ops.binary("div", self, o)
    def __rtruediv__(self, o: Any) -> Tensor: return ops.binary("div", o, self)
    def __floordiv__(self, o: Any) -> Tensor: return ops.floordiv(self, o)
    def __mod__(self, o: Any) -> Tensor: return ops.binary("rem", self, o)
    def __pow__(self, o: Any) -> Tensor: return ops.binary("pow", self, o)
    def __rpow__(self, o: Any) -> Tensor: return ops.binary("pow", o, self)
    def __matmul__(self, o: Any) -> Tensor: return ops.matmul(self, o)
    def __rmatmul__(self, o: Any) -> Tensor: return ops.matmul(o, self)
    def __neg__(self) -> Tensor: return ops.unary("neg", self)
    def __abs__(self) -> Tensor: return ops.unary("abs", self)
    def __invert__(self) -> Tensor: return ops.unary("logical_not", self)
    def __and__(self, o: Any) -> Tensor: return ops.binary("and", self, o)
    def __or__(self, o: Any) -> Tensor: return ops.binary("or", self, o)
    def __xor__(self, o: Any) -> Tensor: return ops.binary("xor", self, o)

    # ---- comparisons (return bool tensors) ----------------------------------------------------
    def __eq__(self, o: Any) -> Tensor: return ops.binary("eq", self, o)  # type: ignore[override]
    def __ne__(self, o: Any) -> Tensor: return ops.binary("ne", self, o)  # type: ignore[override]
    def __lt__(self, o: Any) -> Tensor: return ops.binary("lt", self, o)
    def __le__(self, o: Any) -> Tensor: return ops.binary("le", self, o)
    def __gt__(self, o: Any) -> Tensor: return ops.binary("gt", self, o)
    def __ge__(self, o: Any) -> Tensor: return ops.binary("ge", self, o)
    __hash__ = object.__hash__

    # ---- shape and indexing -------------------------------------------------------------------
    def __getitem__(self, key: Any) -> Tensor: return ops.getitem(self, key)
    def reshape(self, *shape: Any) -> Tensor: return ops.reshape(self, *shape)
    def transpose(self, *axes: Any) -> Tensor: return ops.transpose(self, *axes)
    def swapaxes(self, a: int, b: int) -> Tensor: return ops.swapaxes(self, a, b)
    def astype(self, dtype: object) -> Tensor: return ops.astype(self, dtype)
    def flatten(self) -> Tensor: return ops.reshape(self, (self.size,))

    # ---- reductions ---------------------------------------------------------------------------
    def sum(self, axis: Any = None, keepdims: bool = False) -> Tensor:
        return ops.reduce("reduce_sum", self, axis, keepdims)

    def max(self, axis: Any = None, keepdims: bool = False) -> Tensor:
        return ops.reduce("reduce_max", self, axis, keepdims)

    def min(self, axis: Any = None, keepdims: bool = False) -> Tensor:
        return ops.reduce("reduce_min", self, axis, keepdims)

    def prod(self, axis: Any = None, keepdims: bool = False) -> Tensor:
        return ops.reduce("reduce_prod", self, axis, keepdims)

    def mean(self, axis: Any = None, keepdims: bool = False) -> Tensor:
        return ops.mean(self, axis, keepdims)

    def var(self, axis: Any = None, keepdims: bool = False) -> Tensor:
        return ops.var(self, axis, keepdims)

    def argmax(self, axis: int = -1) -> Tensor:
        return ops.argmax(self, axis)

    # ---- elementwise math ---------------------------------------------------------------------
    def exp(self) -> Tensor: return ops.unary("exp", self)
    def log(self) -> Tensor: return ops.unary("log", self)
    def sqrt(self) -> Tensor: return ops.unary("sqrt", self)
    def tanh(self) -> Tensor: return ops.unary("tanh", self)
