"""rlx.nn: model-level ops. Each records one HIR node (decomposed or claimed per target later)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rlx_core.errors import TraceError
from rlx_core.frontend import ops
from rlx_core.frontend.tensor import Tensor
from rlx_core.frontend.tracer import block, current

__all__ = ["linear", "layer_norm", "rms_norm", "softmax", "log_softmax", "gelu", "silu", "relu",
           "sigmoid", "attention", "embedding", "conv2d", "max_pool2d", "avg_pool2d", "block"]


def _hir(op: str, args: Sequence[Any], attrs: dict[str, Any] | None = None) -> Tensor:
    first = ops.asarray(args[0])
    vals = [first.value] + [ops.asarray(a, like=first.dtype).value for a in args[1:]]
    return Tensor(current().emit(op, vals, attrs))


def linear(x: Any, weight: Any, bias: Any = None) -> Tensor:
    """``x @ weight.T + bias`` with ``weight`` shaped (out_features, in_features)."""
    return _hir("linear", [x, weight] + ([bias] if bias is not None else []))


def layer_norm(x: Any, weight: Any = None, bias: Any = None, eps: float = 1e-5) -> Tensor:
    """Layer normalisation over the last axis (biased variance, as torch)."""
    if bias is not None and weight is None:
        raise TraceError("layer_norm: a bias needs a weight", hint="pass weight=ones(dim)")
    args = [x] + [a for a in (weight, bias) if a is not None]
    return _hir("layer_norm", args, {"eps": float(eps)})


def rms_norm(x: Any, weight: Any = None, eps: float = 1e-6) -> Tensor:
    """``x / sqrt(mean(x**2, -1) + eps) * weight``."""
    return _hir("rms_norm", [x] + ([weight] if weight is not None else []), {"eps": float(eps)})


def softmax(x: Any, axis: int = -1) -> Tensor:
    """Numerically stable softmax along ``axis``."""
    return _hir("softmax", [x], {"axis": axis})


def log_softmax(x: Any, axis: int = -1) -> Tensor:
    """Numerically stable log-softmax along ``axis``."""
    return _hir("log_softmax", [x], {"axis": axis})


def gelu(x: Any, approximate: str = "none") -> Tensor:
    """GELU: the exact erf form (``"none"``) or the tanh approximation (``"tanh"``)."""
    return _hir("gelu", [x], {"approximate": approximate})


def silu(x: Any) -> Tensor:
    """``x * sigmoid(x)``."""
    return _hir("silu", [x])


def relu(x: Any) -> Tensor:
    """``max(x, 0)`` (a MIR primitive, no HIR node needed)."""
    t = ops.asarray(x)
    return ops.binary("max", t, 0)


def sigmoid(x: Any) -> Tensor:
    """The logistic function."""
    return ops.unary("logistic", x)


def attention(q: Any, k: Any, v: Any, mask: str = "none", padding_mask: Any = None,
              scale: float | None = None, layout: str = "bhsd") -> Tensor:
    """Scaled dot-product attention over (batch, heads, seq, head_dim) tensors.

    ``mask``: ``"none"``, ``"causal"``, or ``"padding"`` with ``padding_mask`` (batch, seq_k),
    nonzero where a key may be attended to. ``layout="bshd"`` takes and returns
    (batch, seq, heads, head_dim) instead: the projections' own layout, with no head split
    or merge (the split-transpose-attend-transpose pattern becomes this on targets that keep
    attention whole).
    """
    args = [q, k, v]
    attrs = {"mask": mask, "scale": float(scale or 0.0), "layout": layout}
    if mask == "padding":
        if padding_mask is None:
            raise TraceError("attention: mask='padding' needs padding_mask", hint="pass padding_mask=(batch, seq_k) with 1 where a key is visible")
        args.append(ops.astype(ops.asarray(padding_mask), "bool"))
        vals = [ops.asarray(a).value for a in args]
        return Tensor(current().emit("attention", vals, attrs))
    return _hir("attention", args, attrs)


def embedding(ids: Any, table: Any) -> Tensor:
    """Rows of ``table`` (num, dim) selected by integer ``ids``."""
    t = ops.asarray(table)
    i = ops.asarray(ids)
    return Tensor(current().emit("embedding", [i.value, t.value]))


def _pair(v: int | Sequence[int]) -> tuple[int, int]:
    return (v, v) if isinstance(v, int) else (int(v[0]), int(v[1]))


def conv2d(x: Any, weight: Any, bias: Any = None, stride: Any = 1, padding: Any = 0,
           dilation: Any = 1, groups: int = 1) -> Tensor:
    """2-D convolution, NCHW input and OIHW weight (as torch.nn.functional.conv2d)."""
    attrs = {"stride": _pair(stride), "padding": _pair(padding), "dilation": _pair(dilation),
             "groups": int(groups)}
    return _hir("conv2d", [x, weight] + ([bias] if bias is not None else []), attrs)


def max_pool2d(x: Any, kernel: Any, stride: Any = None, padding: Any = 0) -> Tensor:
    """2-D max pooling (NCHW)."""
    k = _pair(kernel)
    return _hir("max_pool2d", [x], {"kernel": k, "stride": _pair(stride or k),
                                    "padding": _pair(padding)})


def avg_pool2d(x: Any, kernel: Any, stride: Any = None, padding: Any = 0) -> Tensor:
    """2-D average pooling (NCHW; padding counts as zeros)."""
    k = _pair(kernel)
    return _hir("avg_pool2d", [x], {"kernel": k, "stride": _pair(stride or k),
                                    "padding": _pair(padding)})
