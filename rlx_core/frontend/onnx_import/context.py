"""The state of one import and the helpers converters use: typed attribute access, static
(import-time) values, and MIR emission with ONNX broadcasting made explicit."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from rlx_core.errors import RlxError
from rlx_core.frontend.onnx_import import dtypes as odt
from rlx_core.frontend.onnx_import.errors import Reject
from rlx_core.ir import dtypes as dt
from rlx_core.ir.builder import Builder, NameGen
from rlx_core.ir.dtypes import DType
from rlx_core.ir.graph import Loc, Node, TensorType, Value, ValueKind, checked_shape
from rlx_core.ir.ops.base import broadcast_shapes

# Arrays with more elements than this become parameters rather than inline `constant` nodes,
# so the text form stays readable (the tracer uses the same limit).
INLINE_LIMIT = 16


class ImportContext:
    """One model's import: the builder, ONNX names -> rlx values, data of constant values."""

    def __init__(self, graph_name: str):
        self.names = NameGen()
        self.builder = Builder(self.names)
        self.env: dict[str, Value] = {}  # ONNX value name -> rlx value
        self.inputs: list[Value] = []
        self.params: list[Value] = []
        self.param_data: dict[str, Any] = {}
        self.known: dict[str, Any] = {}  # rlx value name -> host array, for static evaluation
        self.input_values: dict[str, Any] = {}  # graph inputs the caller gave values for
        self.folded_inputs: list[str] = []  # those of them some op needed at import time
        self.onnx_input_name: dict[str, str] = {}  # rlx input name -> ONNX name
        self.graph_name = graph_name

    # -- values ----------------------------------------------------------------------------------
    def add_input(self, onnx_name: str, ty: TensorType, value: Any = None) -> Value:
        v = Value(self.names.claim(onnx_name), ty, ValueKind.INPUT)
        self.inputs.append(v)
        self.env[onnx_name] = v
        self.onnx_input_name[v.name] = onnx_name
        if value is not None:
            if getattr(getattr(value, "dtype", None), "name", "") == "bfloat16":
                value = value.astype("float32")  # the host form of bf16
            self.input_values[v.name] = value
        return v

    def add_param(self, onnx_name: str, data: Any, ty: TensorType) -> Value:
        if ty.dtype == dt.bf16 and getattr(data, "dtype", None) is not None \
                and data.dtype.name == "bfloat16":
            data = data.astype("float32")  # the host form of bf16 (exact: bf16 widens)
        v = Value(self.names.claim(onnx_name or "const"), ty, ValueKind.PARAM)
        self.params.append(v)
        self.param_data[v.name] = data
        self.known[v.name] = data
        if onnx_name:
            self.env[onnx_name] = v
        return v

    def static(self, v: Value) -> Any | None:
        """The host array of ``v`` if it is computable now (constants, parameters, inputs whose
        value the caller supplied, and ops over those), else None."""
        if v.name in self.known:
            return self.known[v.name]
        if v.kind is ValueKind.INPUT:
            if v.name in self.input_values:
                if v.name not in self.folded_inputs:
                    self.folded_inputs.append(v.name)
                self.known[v.name] = self.input_values[v.name]
                return self.known[v.name]
            return None
        node = self._producers().get(v.name)
        if node is None:
            return None
        args = []
        for name in node.inputs:
            arg = self.static(self._value(name))
            if arg is None:
                return None
            args.append(arg)
        from rlx_core.targets.numpy_ref.semantics import eval_op  # numpy comes with onnx

        check_static_size(node.type, f"the import-time value of %{node.out.name} ({node.op})")
        try:
            out = eval_op(node.op, node.a, args, node.type)
        except RlxError:
            return None  # e.g. an out-of-range index: leave it to run time to report
        self.known[v.name] = out
        return out

    def _producers(self) -> dict[str, Node]:
        # rebuilt lazily: static() is rare (shape inputs), emission is hot
        if getattr(self, "_prod_len", -1) != len(self.builder.nodes):
            self._prod = {n.out.name: n for n in self.builder.nodes}
            self._prod_len = len(self.builder.nodes)
        return self._prod

    def _value(self, name: str) -> Value:
        for v in (*self.inputs, *self.params):
            if v.name == name:
                return v
        return self._producers()[name].out


def check_static_size(t: TensorType, what: str) -> None:
    """Refuse (Reject) to compute a value at import time that would not fit the memory budget
    (runtime/memory_budget.py): ``Range(0, 1e10, 1)`` must not allocate 37 GiB to find out."""
    from rlx_core.runtime.memory_budget import fmt_bytes, resolve_limit

    limit = resolve_limit(None)
    if limit is not None and t.nbytes > limit:
        raise Reject(f"{what} would be {t} ({fmt_bytes(t.nbytes)}), over the memory budget of "
                     f"{fmt_bytes(limit)} (RLX_MEMORY_LIMIT)")


def np_isfinite_all(arr: Any) -> bool:
    import numpy as np

    return bool(np.isfinite(arr).all())


def tensor_array(t: Any, what: str) -> Any:
    """A TensorProto (an attribute's or an initializer's) as a numpy array; a tensor whose
    data does not match its dims or type is refused instead of raising numpy's error."""
    from onnx import numpy_helper

    try:
        return numpy_helper.to_array(t)
    except (ValueError, TypeError, RuntimeError, KeyError, OverflowError, MemoryError) as err:
        raise Reject(f"{what} cannot be read: {type(err).__name__}: {str(err)[:120]}") from None


# Index tables built in Python at import time (a Pad's or a Gather's constant indices) longer
# than this are refused: a pad of 10**10 must not build a list of 10**10 ints to find out.
MAX_INDEX_TABLE = 1 << 22


def check_index_table(count: int, what: str) -> None:
    if count > MAX_INDEX_TABLE:
        raise Reject(f"{what} needs an import-time index table of {count} entries (at most "
                     f"{MAX_INDEX_TABLE})")


class NodeCtx:
    """What a converter sees of one ONNX node: its inputs as rlx values, its attributes, and
    the emission helpers. Converters return one rlx value per ONNX output they produce."""

    def __init__(self, cx: ImportContext, node: Any, inputs: list[Value | None],
                 attrs: dict[str, Any], version: int, loc: Loc):
        self.cx = cx
        self.node = node
        self.op_type: str = node.op_type
        self.inputs = inputs
        self.attrs = attrs
        self.version = version
        self.n_outputs = len(node.output)
        self.loc = loc

    # -- inputs and attributes --------------------------------------------------------------------
    def x(self, i: int) -> Value:
        """Required input ``i``."""
        if i >= len(self.inputs) or self.inputs[i] is None:
            raise Reject(f"input {i} is required")
        return self.inputs[i]  # type: ignore[return-value]

    def opt(self, i: int) -> Value | None:
        """Optional input ``i`` (None when absent or given as the empty name)."""
        return self.inputs[i] if i < len(self.inputs) else None

    def attr(self, name: str, default: Any = None) -> Any:
        return self.attrs.get(name, default)

    def text(self, name: str, default: str) -> str:
        """String attribute ``name`` as text (ONNX hands strings over as bytes), or ``default``
        when the node does not set it."""
        v = self.attrs.get(name)
        if v is None:
            return default
        return v.decode() if isinstance(v, bytes) else str(v)

    def has(self, name: str) -> bool:
        return name in self.attrs

    def output_wanted(self, i: int) -> bool:
        return i < self.n_outputs and bool(self.node.output[i])

    def static(self, v: Value | None, what: str) -> Any:
        """The import-time value of ``v`` (a host array), or a rejection naming ``what``."""
        if v is None:
            raise Reject(f"{what} is missing")
        out = self.cx.static(v)
        if out is None:
            raise Reject(f"{what} must be known when the model is imported (an initializer, "
                         f"a Constant, or an input given in static_inputs=)")
        return out

    def static_ints(self, v: Value | None, what: str) -> list[int]:
        arr = self.static(v, what)
        kind = getattr(arr.dtype, "kind", "i")
        if kind not in "iubf" or (kind == "f" and not np_isfinite_all(arr)):
            raise Reject(f"{what} must be integers, got {arr.dtype} values")
        return [int(a) for a in arr.reshape(-1).tolist()]

    def static_scalar(self, v: Value | None, what: str) -> Any:
        arr = self.static(v, what)
        if arr.size != 1:
            raise Reject(f"{what} must hold one value, got shape {list(arr.shape)}")
        return arr.reshape(-1).tolist()[0]

    # -- emission ---------------------------------------------------------------------------------
    def emit(self, op: str, inputs: Sequence[Value], attrs: dict[str, Any] | None = None) -> Value:
        return self.cx.builder.emit(op, list(inputs), attrs or {}, loc=self.loc)

    def const(self, value: Any, dtype: DType, shape: Sequence[int] = ()) -> Value:
        """A scalar splat over ``shape`` (a Python scalar), or a flat row-major sequence."""
        shape = tuple(int(s) for s in shape)
        if isinstance(value, list | tuple):
            flat = tuple(dt.python_scalar(v, dtype) for v in value)
            if len(flat) > INLINE_LIMIT or not all(_finite(v) for v in flat):
                import numpy as np  # the importer runs with onnx, which brings numpy

                data = np.array(flat, dtype=dt.to_numpy_name(dtype)).reshape(shape)
                return self.cx.add_param("", data, TensorType(dtype, shape))
            return self.emit("constant", [], {"value": flat, "dtype": dtype, "shape": shape})
        scalar = dt.python_scalar(value, dtype)
        if not _finite(scalar):
            import numpy as np

            # one element, broadcast: a splat over a huge shape is never materialised here
            data = np.full((), scalar, dtype=dt.to_numpy_name(dtype))
            one = self.cx.add_param("", data, TensorType(dtype, ()))
            return self.broadcast(one, shape) if shape else one
        return self.emit("constant", [], {"value": scalar, "dtype": dtype, "shape": shape})

    def array(self, data: Any, dtype: DType | None = None) -> Value:
        """A host array as a constant (small) or a parameter (large)."""
        import numpy as np

        d = dtype or dt.get(data.dtype)
        data = np.asarray(data).astype(dt.to_numpy_name(d))
        return self.const(tuple(data.reshape(-1).tolist()), d, data.shape) if data.size \
            <= INLINE_LIMIT and np.isfinite(data.astype(np.complex128)).all() \
            else self.cx.add_param("", data, TensorType(d, tuple(data.shape)))

    def full_like(self, value: Any, like: Value) -> Value:
        return self.const(value, like.type.dtype, like.type.shape)

    def cast(self, v: Value, d: DType) -> Value:
        return v if v.type.dtype == d else self.emit("cast", [v], {"dtype": d})

    def reshape(self, v: Value, shape: Sequence[int]) -> Value:
        shape = tuple(int(s) for s in shape)
        return v if v.type.shape == shape else self.emit("reshape", [v], {"shape": shape})

    def transpose(self, v: Value, perm: Sequence[int]) -> Value:
        perm = tuple(perm)
        return v if perm == tuple(range(len(perm))) else self.emit("transpose", [v],
                                                                   {"perm": perm})

    def broadcast(self, v: Value, shape: Sequence[int]) -> Value:
        """numpy-style (right-aligned) broadcast of ``v`` to ``shape``."""
        shape = tuple(shape)
        if v.type.shape == shape:
            return v
        offset = len(shape) - v.type.rank
        if offset < 0:
            raise Reject(f"cannot broadcast {v.type} to {list(shape)}")
        return self.emit("broadcast_in_dim", [v], {"shape": shape,
                                                   "dims": tuple(range(offset, len(shape)))})

    def bshape(self, *vals: Value) -> tuple[int, ...]:
        try:
            return broadcast_shapes(self.op_type, *(v.type.shape for v in vals))
        except RlxError as err:
            raise Reject(err.message) from None

    def same_shape(self, *vals: Value) -> list[Value]:
        """Multidirectional (numpy) broadcasting of all ``vals`` to one shape."""
        shape = self.bshape(*vals)
        return [self.broadcast(v, shape) for v in vals]

    def binary(self, op: str, a: Value, b: Value) -> Value:
        a, b = self.same_shape(a, b)
        return self.emit(op, [a, b])

    def scalar_op(self, op: str, a: Value, value: Any) -> Value:
        """``op(a, value)`` with a Python scalar in ``a``'s dtype."""
        return self.emit(op, [a, self.full_like(value, a)])

    def select(self, pred: Value, a: Value, b: Value) -> Value:
        pred, a, b = self.same_shape(pred, a, b)
        return self.emit("select", [pred, a, b])

    def reduce(self, op: str, v: Value, axes: Sequence[int], keepdims: bool) -> Value:
        axes = tuple(sorted(set(axes)))
        out = self.emit(op, [v], {"axes": axes})
        if keepdims:
            out = self.reshape(out, [1 if i in axes else d for i, d in enumerate(v.type.shape)])
        return out

    def axis(self, axis: int, rank: int, what: str = "axis") -> int:
        if not -max(rank, 1) <= axis < max(rank, 1):
            raise Reject(f"{what} {axis} is out of range for rank {rank}")
        return axis % rank if rank else 0

    def slice_axis(self, v: Value, axis: int, start: int, stop: int, step: int = 1) -> Value:
        shape = v.type.shape
        if (start, stop, step) == (0, shape[axis], 1):
            return v
        lo = [0] * len(shape)
        hi = list(shape)
        st = [1] * len(shape)
        lo[axis], hi[axis], st[axis] = start, stop, step
        return self.emit("slice", [v], {"start": tuple(lo), "limit": tuple(hi),
                                        "stride": tuple(st)})

    def take(self, v: Value, axis: int, indices: Sequence[int]) -> Value:
        """Static indices along one axis: a slice when they form a forward stride, else a
        gather with a constant index vector."""
        import numpy as np  # the importer runs with onnx, which brings numpy

        # numpy throughout: an index vector may hold millions of entries (a large pad)
        idx = np.asarray(indices, dtype=np.int64).reshape(-1)
        n = v.type.shape[axis]
        if not idx.size:
            return self.slice_axis(v, axis, 0, 0)
        if ((idx >= 0) & (idx < n)).all():
            step = int(idx[1] - idx[0]) if idx.size > 1 else 1
            if step >= 1 and (np.diff(idx) == step).all():
                return self.slice_axis(v, axis, int(idx[0]), int(idx[-1]) + 1, step)
        iv = self.array(idx, dt.i64)
        return self.emit("gather", [v, iv], {"axis": axis})

    def float_type(self, v: Value, what: str = "input") -> DType:
        d = v.type.dtype
        if not d.is_float:
            raise Reject(f"{what} must be a float tensor, got {d}")
        return d


def _finite(v: Any) -> bool:
    if isinstance(v, float):
        return math.isfinite(v)
    if isinstance(v, complex):
        return math.isfinite(v.real) and math.isfinite(v.imag)
    return True


def type_from_value_info(vi: Any, override: Sequence[int] | None = None) -> TensorType:
    """The rlx type of an ONNX graph input/output; symbolic dims need ``override``."""
    t = vi.type
    if t.WhichOneof("value") != "tensor_type":
        raise Reject(f"value {vi.name!r} is a {t.WhichOneof('value')}; only tensors are "
                     f"supported")
    d = odt.to_rlx(t.tensor_type.elem_type)
    if d is None:
        raise Reject(f"value {vi.name!r} has element type "
                     f"{odt.onnx_type_name(t.tensor_type.elem_type)}, which rlx has no dtype for")
    if override is not None:
        return TensorType(d, checked_shape(override, f"input_shapes[{vi.name!r}]"))
    if not t.tensor_type.HasField("shape"):
        raise Reject(f"value {vi.name!r} has no shape; pass input_shapes=")
    dims = []
    for dim in t.tensor_type.shape.dim:
        if dim.WhichOneof("value") != "dim_value":
            raise Reject(f"value {vi.name!r} has a symbolic dimension "
                         f"{dim.dim_param or '?'!r}; pass input_shapes= with concrete sizes")
        dims.append(int(dim.dim_value))
    return TensorType(d, checked_shape(dims, f"ONNX value {vi.name!r} shape"))


def numel(shape: Sequence[int]) -> int:
    return math.prod(shape)
