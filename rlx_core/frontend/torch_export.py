"""torch.export importer: ``rlx.from_torch(module, *example_args)`` -> an HIR graph.

The module is exported with ``torch.export.export`` (eval mode, no decompositions run, so
``aten.linear`` / ``aten.layer_norm`` / ``aten.scaled_dot_product_attention`` arrive whole) and
its graph is replayed on rlx tensors inside ``rlx.trace``: each aten op maps to an rlx HIR block
or primitive in ``ATEN_OPS`` below, parameters and buffers become named graph parameters.
Every aten op without a mapping is collected first and reported together in one
``UnsupportedTorchOpError`` — nothing is imported half-way, and nothing is guessed.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

import rlx_core.frontend.nn as nn
from rlx_core.errors import RlxError
from rlx_core.frontend import ops
from rlx_core.frontend.tracer import spec, trace
from rlx_core.ir import dtypes as dt
from rlx_core.ir.graph import Graph


class UnsupportedTorchOpError(RlxError):
    """The exported program uses aten ops (or op variants) rlx cannot import; all listed."""

    code = "RLX-I101"

    def __init__(self, message: str, ops_found: dict[str, int], **kw: Any):
        self.ops = ops_found
        super().__init__(message, **kw)


class TorchImportError(RlxError):
    """The module could not be exported, or an op's arguments are outside what rlx supports."""

    code = "RLX-I102"


_TORCH_DTYPES = {
    "float32": dt.f32, "float64": dt.f64, "float16": dt.f16, "bfloat16": dt.bf16,
    "int64": dt.i64, "int32": dt.i32, "int16": dt.i16, "int8": dt.i8, "uint8": dt.u8,
    "bool": dt.bool_,
}


def rlx_dtype(torch_dtype: Any) -> dt.DType:
    """The rlx dtype of a torch dtype (``torch.float32`` -> f32)."""
    name = str(torch_dtype).removeprefix("torch.")
    if name not in _TORCH_DTYPES:
        raise TorchImportError(f"torch dtype {torch_dtype} has no rlx equivalent",
                               hint=f"use one of {', '.join(_TORCH_DTYPES)}")
    return _TORCH_DTYPES[name]


def _unsupported(op: str, why: str) -> TorchImportError:
    return TorchImportError(f"{op}: {why}", hint="rewrite that part of the model, or add a "
                                                 "mapping to rlx_core/frontend/torch_export.py")


# ---- the aten -> rlx table -----------------------------------------------------------------
# Each handler takes the op's positional and keyword arguments (fx nodes already replaced by
# rlx tensors or Python values) and returns an rlx tensor (or None for assertion-only ops).


def _axis(d: int, rank: int) -> int:
    return d % rank if rank else 0


def _shape(x: Any, size: Sequence[int]) -> tuple[int, ...]:
    return tuple(int(s) for s in size)


def _add(a: Any, b: Any, alpha: Any = 1) -> Any:
    return ops.asarray(a) + (b if alpha == 1 else ops.asarray(b) * alpha)


def _sub(a: Any, b: Any, alpha: Any = 1) -> Any:
    return ops.asarray(a) - (b if alpha == 1 else ops.asarray(b) * alpha)


def _rsub(a: Any, b: Any, alpha: Any = 1) -> Any:
    return _sub(b, a, alpha)


def _div(a: Any, b: Any, rounding_mode: str | None = None) -> Any:
    if rounding_mode not in (None, "floor"):
        raise _unsupported("aten.div", f"rounding_mode={rounding_mode!r}")
    return ops.floordiv(a, b) if rounding_mode == "floor" else ops.asarray(a) / b


def _view(x: Any, size: Sequence[int]) -> Any:
    return ops.reshape(x, [int(s) for s in size])


def _unsqueeze(x: Any, d: int) -> Any:
    shp = list(x.shape)
    shp.insert(_axis(d, len(shp) + 1), 1)
    return ops.reshape(x, shp)


def _squeeze(x: Any, dims: Any = None) -> Any:
    if dims is None:
        return ops.reshape(x, [s for s in x.shape if s != 1])
    ds = {_axis(d, x.ndim) for d in ((dims,) if isinstance(dims, int) else dims)}
    return ops.reshape(x, [s for i, s in enumerate(x.shape) if not (i in ds and s == 1)])


def _expand(x: Any, size: Sequence[int], implicit: bool = False) -> Any:
    size = list(size)
    off = len(size) - x.ndim
    out = [x.shape[i - off] if s == -1 else int(s) for i, s in enumerate(size)]
    return ops.broadcast_to(x, out)


def _slice(x: Any, dim: int = 0, start: Any = None, end: Any = None, step: int = 1) -> Any:
    key = [slice(None)] * x.ndim
    n = x.shape[_axis(dim, x.ndim)]
    s = 0 if start is None else max(min(int(start), n), -n)
    e = n if end is None else max(min(int(end), n), -n)
    key[_axis(dim, x.ndim)] = slice(s, e, int(step))
    return x[tuple(key)]


def _select(x: Any, dim: int, index: int) -> Any:
    key: list[Any] = [slice(None)] * x.ndim
    key[_axis(dim, x.ndim)] = int(index)
    return x[tuple(key)]


def _arange(*args: Any, dtype: Any = None, **_: Any) -> Any:
    start, end, step = (0, args[0], 1) if len(args) == 1 else (
        args[0], args[1], args[2] if len(args) > 2 else 1)
    n = max(0, math.ceil((end - start) / step))
    d = rlx_dtype(dtype) if dtype is not None else (
        dt.i64 if all(isinstance(v, int) for v in (start, end, step)) else dt.f32)
    r = ops.iota((n,), 0, d)
    if step != 1:
        r = r * step
    return r + start if start else r


def _new_full(fill: Any) -> Callable[..., Any]:
    def make(x: Any, size: Sequence[int], dtype: Any = None, **_: Any) -> Any:
        d = rlx_dtype(dtype) if dtype is not None else x.dtype
        return ops.constant(fill, d, _shape(x, size))

    return make


def _to(x: Any, *args: Any, dtype: Any = None, **_: Any) -> Any:
    for a in args:  # positional forms: to(device, dtype) / to(dtype)
        if "dtype" in type(a).__name__:
            dtype = a
    return x if dtype is None else ops.astype(x, rlx_dtype(dtype))


def _index(x: Any, indices: Sequence[Any]) -> Any:
    """Advanced indexing on leading axes: ``x[i0, i1, ...]`` with broadcast index tensors."""
    if any(i is None for i in indices):
        raise _unsupported("aten.index.Tensor", "None (sliced) axes between index tensors")
    k = len(indices)
    if k == 1:
        return ops.take(x, indices[0], axis=0)
    idx = [ops.asarray(i) for i in indices]
    lead = x.shape[:k]
    flat = ops.reshape(x, (math.prod(lead),) + tuple(x.shape[k:]))
    lin = None
    stride = 1
    for axis in reversed(range(k)):
        term = ops.astype(idx[axis], dt.i64) * stride
        lin = term if lin is None else lin + term
        stride *= lead[axis]
    return ops.take(flat, lin, axis=0)


def _sdpa(q: Any, k: Any, v: Any, attn_mask: Any = None, dropout_p: float = 0.0,
          is_causal: bool = False, scale: float | None = None, enable_gqa: bool = False) -> Any:
    if dropout_p:
        raise _unsupported("aten.scaled_dot_product_attention", "dropout_p > 0 (export in eval)")
    if enable_gqa:
        raise _unsupported("aten.scaled_dot_product_attention", "enable_gqa=True")
    if attn_mask is None:
        return nn.attention(q, k, v, mask="causal" if is_causal else "none", scale=scale)
    if is_causal:
        raise _unsupported("aten.scaled_dot_product_attention", "attn_mask with is_causal")
    # a general mask (boolean keep-mask or additive bias) broadcast over (B, H, Sq, Sk): the
    # attention block's own masks are narrower, so spell it with matmul + masked softmax
    s = scale if scale is not None else 1.0 / math.sqrt(q.shape[-1])
    scores = ops.matmul(q, ops.swapaxes(k, -1, -2)) * s
    m = ops.broadcast_to(attn_mask, scores.shape)
    if m.dtype == dt.bool_:
        low = {"f16": -65504.0, "f64": -1.7976931348623157e308}.get(scores.dtype.name,
                                                                      -3.4028234663852886e38)
        scores = ops.where(m, scores, low)
    else:
        scores = scores + m
    return ops.matmul(nn.softmax(scores, axis=-1), v)


def _layer_norm(x: Any, shape: Sequence[int], weight: Any = None, bias: Any = None,
                eps: float = 1e-5, cudnn: bool = True) -> Any:
    if len(shape) != 1:
        raise _unsupported("aten.layer_norm", f"normalized_shape {list(shape)} (only the last "
                                              "axis is supported)")
    return nn.layer_norm(x, weight, bias, eps=eps)


def _dropout(x: Any, p: float = 0.5, train: bool | None = False) -> Any:
    if train:
        raise _unsupported("aten.dropout", "train=True (export the module in eval mode)")
    return x


def _reduce(op: str) -> Callable[..., Any]:
    def run(x: Any, dim: Any = None, keepdim: bool = False, dtype: Any = None) -> Any:
        axis = None if dim is None or dim == [] else (
            (dim,) if isinstance(dim, int) else tuple(dim))
        if dtype is not None:
            x = ops.astype(x, rlx_dtype(dtype))
        if op == "mean":
            return ops.mean(x, axis, keepdim)
        return ops.reduce(op, x, axis, keepdim)

    return run


def _softmax(log: bool) -> Callable[..., Any]:
    def run(x: Any, dim: int, half_or_dtype: Any = None) -> Any:
        return (nn.log_softmax if log else nn.softmax)(x, axis=dim)

    return run


def _cat(xs: Sequence[Any], dim: int = 0) -> Any:
    return ops.concat(list(xs), axis=dim)


def _addmm(bias: Any, a: Any, b: Any, beta: Any = 1, alpha: Any = 1) -> Any:
    prod = ops.matmul(a, b)
    prod = prod if alpha == 1 else prod * alpha
    return prod + (bias if beta == 1 else ops.asarray(bias) * beta)


def _flatten(x: Any, start: int = 0, end: int = -1) -> Any:
    s, e = _axis(start, x.ndim), _axis(end, x.ndim)
    shp = x.shape[:s] + (math.prod(x.shape[s:e + 1]),) + x.shape[e + 1:]
    return ops.reshape(x, shp)


def _conv2d(x: Any, w: Any, b: Any = None, stride: Any = 1, padding: Any = 0, dilation: Any = 1,
            groups: int = 1) -> Any:
    if isinstance(padding, str):
        raise _unsupported("aten.conv2d", f"padding={padding!r}")
    return nn.conv2d(x, w, b, stride=stride, padding=padding, dilation=dilation, groups=groups)


def _clamp(x: Any, lo: Any = None, hi: Any = None) -> Any:
    if lo is not None:
        x = ops.binary("max", x, lo)
    if hi is not None:
        x = ops.binary("min", x, hi)
    return x


def _identity(x: Any, *args: Any, **kw: Any) -> Any:
    return x


def _compare(op: str) -> Callable[..., Any]:
    return lambda a, b: ops.binary(op, a, b)


def _pow(a: Any, b: Any) -> Any:
    if isinstance(b, int | float) and b == 2:
        return ops.asarray(a) * a
    return ops.binary("pow", a, b)


# aten op (overload-qualified name) -> handler. The readable table is the contract.
ATEN_OPS: dict[str, Callable[..., Any]] = {
    # model blocks (become HIR nodes)
    "aten.linear.default": lambda x, w, b=None: nn.linear(x, w, b),
    "aten.layer_norm.default": _layer_norm,
    "aten.embedding.default": lambda w, ids, *rest, **kw: nn.embedding(ids, w),
    "aten.scaled_dot_product_attention.default": _sdpa,
    "aten.gelu.default": lambda x, approximate="none": nn.gelu(x, approximate=approximate),
    "aten.silu.default": nn.silu,
    "aten.softmax.int": _softmax(False),
    "aten._softmax.default": _softmax(False),
    "aten.log_softmax.int": _softmax(True),
    "aten._log_softmax.default": _softmax(True),
    "aten.conv2d.default": _conv2d,
    # elementwise
    "aten.add.Tensor": _add, "aten.add.Scalar": _add,
    "aten.sub.Tensor": _sub, "aten.sub.Scalar": _sub,
    "aten.rsub.Scalar": _rsub, "aten.rsub.Tensor": _rsub,
    "aten.mul.Tensor": lambda a, b: ops.asarray(a) * b, "aten.mul.Scalar": lambda a, b: a * b,
    "aten.div.Tensor": _div, "aten.div.Scalar": _div, "aten.div.Tensor_mode": _div,
    "aten.pow.Tensor_Scalar": _pow, "aten.pow.Tensor_Tensor": _pow,
    "aten.neg.default": lambda x: -x,
    "aten.relu.default": nn.relu,
    "aten.tanh.default": lambda x: ops.unary("tanh", x),
    "aten.sigmoid.default": lambda x: ops.unary("logistic", x),
    "aten.exp.default": lambda x: ops.unary("exp", x),
    "aten.log.default": lambda x: ops.unary("log", x),
    "aten.sqrt.default": lambda x: ops.unary("sqrt", x),
    "aten.rsqrt.default": lambda x: ops.unary("rsqrt", x),
    "aten.abs.default": lambda x: ops.unary("abs", x),
    "aten.erf.default": lambda x: ops.unary("erf", x),
    "aten.clamp.default": _clamp,
    "aten.maximum.default": lambda a, b: ops.binary("max", a, b),
    "aten.minimum.default": lambda a, b: ops.binary("min", a, b),
    "aten.where.self": ops.where,
    "aten.__and__.Tensor": lambda a, b: ops.asarray(a) & b,
    "aten.bitwise_and.Tensor": lambda a, b: ops.asarray(a) & b,
    "aten.logical_and.default": lambda a, b: ops.asarray(a) & b,
    "aten.__or__.Tensor": lambda a, b: ops.asarray(a) | b,
    "aten.logical_not.default": lambda x: ~ops.asarray(x),
    "aten.eq.Scalar": _compare("eq"), "aten.eq.Tensor": _compare("eq"),
    "aten.ne.Scalar": _compare("ne"), "aten.ne.Tensor": _compare("ne"),
    "aten.ge.Scalar": _compare("ge"), "aten.ge.Tensor": _compare("ge"),
    "aten.gt.Scalar": _compare("gt"), "aten.gt.Tensor": _compare("gt"),
    "aten.le.Scalar": _compare("le"), "aten.le.Tensor": _compare("le"),
    "aten.lt.Scalar": _compare("lt"), "aten.lt.Tensor": _compare("lt"),
    # reductions
    "aten.sum.dim_IntList": _reduce("reduce_sum"), "aten.sum.default": _reduce("reduce_sum"),
    "aten.mean.dim": _reduce("mean"), "aten.mean.default": _reduce("mean"),
    "aten.amax.default": _reduce("reduce_max"), "aten.amin.default": _reduce("reduce_min"),
    "aten.argmax.default": lambda x, dim=None, keepdim=False: ops.argmax(x, dim),
    # contraction
    "aten.matmul.default": ops.matmul, "aten.mm.default": ops.matmul,
    "aten.bmm.default": ops.matmul, "aten.addmm.default": _addmm,
    # shape and data movement
    "aten.view.default": _view, "aten.reshape.default": _view, "aten._unsafe_view.default": _view,
    "aten.transpose.int": lambda x, a, b: ops.swapaxes(x, a, b),
    "aten.t.default": lambda x: ops.transpose(x),
    "aten.permute.default": lambda x, dims: ops.transpose(x, [int(d) for d in dims]),
    "aten.unsqueeze.default": _unsqueeze,
    "aten.squeeze.dim": _squeeze, "aten.squeeze.dims": _squeeze, "aten.squeeze.default": _squeeze,
    "aten.expand.default": _expand,
    "aten.slice.Tensor": _slice,
    "aten.select.int": _select,
    "aten.index.Tensor": _index,
    "aten.cat.default": _cat,
    "aten.flatten.using_ints": _flatten,
    "aten.contiguous.default": _identity, "aten.clone.default": _identity,
    "aten.alias.default": _identity, "aten.detach.default": _identity,
    "aten.dropout.default": _dropout,
    # creation and conversion
    "aten.arange.default": _arange, "aten.arange.start": _arange,
    "aten.arange.start_step": _arange,
    "aten.new_ones.default": _new_full(1), "aten.new_zeros.default": _new_full(0),
    "aten.to.dtype": _to, "aten.to.device": _to, "aten.to.dtype_layout": _to,
    "aten._to_copy.default": _to, "aten.type_as.default": lambda x, o: ops.astype(x, o.dtype),
    # checks that export inserts: nothing to compute
    "aten._assert_tensor_metadata.default": lambda *a, **k: None,
    "aten.sym_constrain_range_for_size.default": lambda *a, **k: None,
}


def _op_name(target: Any) -> str:
    return str(target)


def unsupported_ops(ep: Any) -> dict[str, int]:
    """aten ops of an ExportedProgram that have no mapping, with their counts."""
    found: Counter[str] = Counter()
    for n in ep.graph.nodes:
        if n.op == "call_function" and _op_name(n.target) not in ATEN_OPS:
            if _op_name(n.target) == "<built-in function getitem>":
                continue  # tuple indexing of multi-output ops, handled in the replay
            found[_op_name(n.target)] += 1
    return dict(sorted(found.items()))


def _to_numpy(t: Any) -> Any:
    import torch

    t = t.detach().cpu()
    if t.dtype == torch.bfloat16:
        t = t.to(torch.float32)
    return t.contiguous().numpy()


def from_exported(ep: Any, name: str = "torch_module") -> Graph:
    """An HIR graph from a ``torch.export.ExportedProgram`` (user inputs become graph inputs)."""
    missing = unsupported_ops(ep)
    if missing:
        listing = "\n  ".join(f"{op} (x{n})" for op, n in missing.items())
        raise UnsupportedTorchOpError(
            f"{len(missing)} aten op(s) have no rlx mapping:\n  {listing}", missing,
            hint="add them to ATEN_OPS in rlx_core/frontend/torch_export.py, or change the "
                 "model to use supported ops")
    sig = ep.graph_signature
    state = dict(ep.state_dict)
    consts = dict(getattr(ep, "constants", {}) or {})
    lifted: dict[str, tuple[str, Any]] = {}  # placeholder name -> (weight name, tensor)
    user: list[Any] = []
    placeholders = {n.name: n for n in ep.graph.nodes if n.op == "placeholder"}
    for s in sig.input_specs:
        kind = s.kind.name
        if kind == "USER_INPUT":
            user.append(placeholders[s.arg.name])
        elif kind in ("PARAMETER", "BUFFER", "CONSTANT_TENSOR"):
            src = state.get(s.target) if s.target in state else consts.get(s.target)
            if src is None:
                raise TorchImportError(f"no data for {kind.lower()} {s.target}")
            lifted[s.arg.name] = (s.target, src)
        else:
            raise TorchImportError(f"input kind {kind} of {s.arg.name} is not supported",
                                   hint="export a plain inference module")
    specs = []
    for p in user:
        val = p.meta.get("val")
        if val is None or not hasattr(val, "shape"):
            raise TorchImportError(f"input {p.name} is not a tensor",
                                   hint="pass tensors as example arguments")
        specs.append(spec(tuple(int(d) for d in val.shape), rlx_dtype(val.dtype)))
    weights = {ph: (wname, _to_numpy(t)) for ph, (wname, t) in lifted.items()}

    def replay(*inputs: Any) -> Any:
        env: dict[str, Any] = {p.name: x for p, x in zip(user, inputs, strict=False)}
        for ph, (wname, arr) in weights.items():
            env[ph] = ops.param(arr, wname) if arr.ndim else ops.asarray(arr.item())

        def load(a: Any) -> Any:
            if hasattr(a, "op") and hasattr(a, "name") and hasattr(a, "target"):
                return env[a.name]
            if isinstance(a, list | tuple):
                return type(a)(load(x) for x in a)
            if type(a).__name__ in ("device", "layout", "memory_format"):
                return None
            return a

        for n in ep.graph.nodes:
            if n.op == "call_function":
                args = [load(a) for a in n.args]
                kwargs = {k: load(v) for k, v in n.kwargs.items()
                          if k not in ("device", "layout", "pin_memory", "memory_format")}
                if _op_name(n.target) == "<built-in function getitem>":
                    env[n.name] = args[0][args[1]]
                    continue
                env[n.name] = ATEN_OPS[_op_name(n.target)](*args, **kwargs)
            elif n.op == "output":
                outs = load(n.args[0])
                return tuple(outs) if isinstance(outs, list | tuple) else outs
        raise TorchImportError("the exported graph has no output node")

    replay.__name__ = name
    arg_names = [p.name for p in user]
    # give the traced inputs the exported placeholder names (readable IR)
    replay.__signature__ = _signature(arg_names)  # type: ignore[attr-defined]
    return trace(replay, *specs, name=name)


def _signature(names: list[str]) -> Any:
    import inspect

    return inspect.Signature([inspect.Parameter(n, inspect.Parameter.POSITIONAL_ONLY)
                              for n in names])


def from_torch(module: Any, *example_args: Any, name: str | None = None) -> Graph:
    """Export ``module`` (in eval mode) with torch.export at ``example_args`` and import it."""
    try:
        import torch
    except ImportError as err:
        raise TorchImportError("from_torch needs PyTorch",
                               hint="pip install 'rlx-explorer[torch]' (torch==2.13.0)") from err
    if isinstance(module, torch.export.ExportedProgram):
        return from_exported(module, name or "torch_module")
    was_training = module.training
    module.eval()
    try:
        ep = torch.export.export(module, tuple(example_args))
    except Exception as err:  # torch's export errors are many types; keep the message
        raise TorchImportError(f"torch.export failed: {type(err).__name__}: {err}",
                               hint="the module must be exportable (no data-dependent "
                                    "control flow); see torch.export's docs") from err
    finally:
        module.train(was_training)
    return from_exported(ep, name or type(module).__name__)
