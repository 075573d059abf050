"""HIR: model blocks and composite ops. Each lowers to MIR through a registered decomposition
(rlx_core/dispatch/decompositions.py) unless a target claims it natively."""

from __future__ import annotations

from typing import Any

from rlx_core.errors import DTypeError
from rlx_core.ir.graph import Level, TensorType
from rlx_core.ir.ops.base import AttrSpec, OpDef, normalize_axis, require, require_same_dtype
from rlx_core.ir.ops.linalg import linalg_defs
from rlx_core.ir.ops.quant import quant_defs
from rlx_core.ir.ops.sparse import sparse_defs
from rlx_core.ir.ops.splat import splat_defs

T = TensorType


def _float_op(op: str, x: T) -> None:
    require(x.dtype.is_float, op, f"needs a float input, got {x}",
            hint="cast to f32 first (x.astype('f32'))", exc=DTypeError)


def _linear(ins: list[T], a: dict[str, Any]) -> T:
    x, w = ins[0], ins[1]
    _float_op("linear", x)
    require(w.rank == 2, "linear", f"weight must be 2-D (out, in), got {w}")
    require(x.rank >= 1 and x.shape[-1] == w.shape[1], "linear",
            f"input {x} does not match weight {w}: last axis {x.shape[-1] if x.rank else '-'} "
            f"!= in_features {w.shape[1]}",
            hint="the weight is (out_features, in_features), as in torch.nn.Linear")
    if len(ins) == 3:
        require(ins[2].shape == (w.shape[0],), "linear", f"bias {ins[2]} must be [{w.shape[0]}]")
    require_same_dtype("linear", ins)
    return T(x.dtype, x.shape[:-1] + (w.shape[0],))


def _norm(op: str, n_params: int):
    def infer(ins: list[T], a: dict[str, Any]) -> T:
        x = ins[0]
        _float_op(op, x)
        require(x.rank >= 1, op, "needs at least one axis")
        for p in ins[1:1 + n_params]:
            require(p.shape == (x.shape[-1],), op,
                    f"parameter {p} must match the normalized axis [{x.shape[-1]}]")
        require_same_dtype(op, ins)
        return x

    return infer


def _unary_float(op: str):
    def infer(ins: list[T], a: dict[str, Any]) -> T:
        _float_op(op, ins[0])
        if "axis" in a:
            normalize_axis(op, a["axis"], ins[0].rank)
        if "approximate" in a:
            require(a["approximate"] in ("none", "tanh"), op,
                    f"approximate must be 'none' or 'tanh', got {a['approximate']!r}")
        return ins[0]

    return infer


# attention's operand layouts: (batch, heads, seq, dim), or (batch, seq, heads, dim) - the
# projections' own layout, which the CPU kernel reads in place (no head split or merge)
ATTENTION_LAYOUTS = ("bhsd", "bshd")
HEADS_SWAP = (0, 2, 1, 3)  # the transpose between the two layouts (it is its own inverse)


def attention_dims(t: T, layout: str) -> tuple[int, int, int, int]:
    """(batch, heads, seq, dim) of an attention operand in ``layout``."""
    b, x, y, d = t.shape
    return (b, x, y, d) if layout == "bhsd" else (b, y, x, d)


def _attention(ins: list[T], a: dict[str, Any]) -> T:
    q, k, v = ins[:3]
    layout = a["layout"]
    require(layout in ATTENTION_LAYOUTS, "attention",
            f"layout must be bhsd or bshd, got {layout!r}")
    what = "(batch, heads, seq, dim)" if layout == "bhsd" else "(batch, seq, heads, dim)"
    for t in (q, k, v):
        _float_op("attention", t)
        require(t.rank == 4, "attention", f"q, k, v must be {what}, got {t}")
    (qb, qh, qs, qd), (kb, kh, ks, kd), (vb, vh, vs, vd) = (attention_dims(t, layout)
                                                            for t in (q, k, v))
    require(qb == kb == vb and qh == kh == vh, "attention", f"batch/heads differ: {q}, {k}, {v}")
    require(qd == kd, "attention", f"q {q} and k {k} head dims differ")
    require(ks == vs, "attention", f"k {k} and v {v} sequence lengths differ")
    mask = a["mask"]
    require(mask in ("none", "causal", "padding"), "attention",
            f"mask must be none, causal or padding, got {mask!r}")
    if mask == "padding":
        require(len(ins) == 4, "attention", "mask='padding' needs a mask operand (batch, seq_k)")
        require(ins[3].shape == (qb, ks), "attention",
                f"padding mask {ins[3]} must be [{qb},{ks}]")
    else:
        require(len(ins) == 3, "attention", f"mask={mask!r} takes no mask operand")
    require_same_dtype("attention", [q, k, v])
    return T(q.dtype, q.shape[:3] + (vd,))


def _embedding(ins: list[T], a: dict[str, Any]) -> T:
    ids, table = ins
    require(ids.dtype.is_int, "embedding", f"ids must be integers, got {ids}", exc=DTypeError)
    require(table.rank == 2, "embedding", f"table must be (num, dim), got {table}")
    return T(table.dtype, ids.shape + (table.shape[1],))


def _out_size(op: str, size: int, k: int, s: int, p: int, d: int = 1) -> int:
    out = (size + 2 * p - d * (k - 1) - 1) // s + 1
    require(out >= 1, op, f"window {k} (dilation {d}) does not fit input size {size} + 2*{p}")
    return out


def _conv2d(ins: list[T], a: dict[str, Any]) -> T:
    x, w = ins[0], ins[1]
    _float_op("conv2d", x)
    require(x.rank == 4 and w.rank == 4, "conv2d",
            f"needs x (N,C,H,W) and w (O,C/groups,KH,KW), got {x}, {w}")
    g = a["groups"]
    require(x.shape[1] == w.shape[1] * g and w.shape[0] % g == 0, "conv2d",
            f"channels: input {x.shape[1]} != {w.shape[1]} * groups {g}")
    if len(ins) == 3:
        require(ins[2].shape == (w.shape[0],), "conv2d", f"bias {ins[2]} must be [{w.shape[0]}]")
    require_same_dtype("conv2d", ins)
    (sh, sw), (ph, pw), (dh, dw) = a["stride"], a["padding"], a["dilation"]
    oh = _out_size("conv2d", x.shape[2], w.shape[2], sh, ph, dh)
    ow = _out_size("conv2d", x.shape[3], w.shape[3], sw, pw, dw)
    return T(x.dtype, (x.shape[0], w.shape[0], oh, ow))


CONV_ACTS = ("none", "max", "min", "clip")


def _conv2d_fused(ins: list[T], a: dict[str, Any]) -> T:
    residual = bool(a["residual"])
    require(len(ins) >= 2 + int(residual), "conv2d_fused", "residual=True needs a 4th input")
    out = _conv2d(ins[:len(ins) - int(residual)], a)
    require(a["act"] in CONV_ACTS, "conv2d_fused", f"act must be one of {CONV_ACTS}")
    if residual:
        require(ins[-1].shape == out.shape and ins[-1].dtype == out.dtype, "conv2d_fused",
                f"residual {ins[-1]} must be {out}")
    return out


def _conv2d_pair(ins: list[T], a: dict[str, Any]) -> T:
    out = _conv2d(ins[:3], a)
    second = {"stride": a["stride2"], "padding": (0, 0), "dilation": (1, 1), "groups": 1}
    require(_conv2d(ins[3:], second) == out, "conv2d_pair",
            f"the second convolution of {ins[3]} must give {out} as the first does")
    require(a["act"] in CONV_ACTS, "conv2d_pair", f"act must be one of {CONV_ACTS}")
    return out


def _pool(op: str):
    def infer(ins: list[T], a: dict[str, Any]) -> T:
        x = ins[0]
        if not (op == "max_pool2d" and x.dtype.name in ("i8", "u8")):
            # max commutes with a monotone requantization: int8 values pool with their scale
            # and zero point unchanged (the cortex-m firmware's kernel)
            _float_op(op, x)
        require(x.rank == 4, op, f"needs (N,C,H,W), got {x}")
        (kh, kw), (sh, sw), (ph, pw) = a["kernel"], a["stride"], a["padding"]
        require(ph * 2 <= kh and pw * 2 <= kw, op, "padding must be at most half the window")
        return T(x.dtype, x.shape[:2] + (_out_size(op, x.shape[2], kh, sh, ph),
                                         _out_size(op, x.shape[3], kw, sw, pw)))

    return infer


def _defs() -> dict[str, OpDef]:
    hir = Level.HIR
    pair = lambda v: AttrSpec("ints", v)  # noqa: E731
    t: dict[str, OpDef] = {}

    def add(name, arity, attrs, infer, doc):
        t[name] = OpDef(name, hir, "composite", arity, attrs, infer, doc)

    add("linear", (2, 3), {}, _linear, "x @ w.T (+ b); w is (out, in)")
    add("layer_norm", (1, 3), {"eps": AttrSpec("float", 1e-5)}, _norm("layer_norm", 2),
        "normalize the last axis to zero mean, unit variance, then * weight + bias")
    add("rms_norm", (1, 2), {"eps": AttrSpec("float", 1e-6)}, _norm("rms_norm", 1),
        "x / sqrt(mean(x^2) + eps) * weight over the last axis")
    add("softmax", (1, 1), {"axis": AttrSpec("int", -1)}, _unary_float("softmax"),
        "exp(x - max) / sum(exp(x - max)) along axis")
    add("log_softmax", (1, 1), {"axis": AttrSpec("int", -1)}, _unary_float("log_softmax"),
        "x - max - log(sum(exp(x - max))) along axis")
    add("gelu", (1, 1), {"approximate": AttrSpec("str", "none")}, _unary_float("gelu"),
        "x * Phi(x): exact erf form ('none') or the tanh approximation")
    add("silu", (1, 1), {}, _unary_float("silu"), "x * sigmoid(x)")
    add("attention", (3, 4), {"mask": AttrSpec("str", "none"), "scale": AttrSpec("float", 0.0),
                              "layout": AttrSpec("str", "bhsd")},
        _attention, "softmax(q @ k^T * scale + mask) @ v; scale 0 means 1/sqrt(head_dim); "
                    "operands and result in layout bhsd or bshd")
    add("embedding", (2, 2), {}, _embedding, "rows of table picked by integer ids")
    add("conv2d", (2, 3), {"stride": pair((1, 1)), "padding": pair((0, 0)),
                           "dilation": pair((1, 1)), "groups": AttrSpec("int", 1)},
        _conv2d, "2-D convolution, NCHW input, OIHW weight")
    # made by passes/conv_epilogue.py only where a target claims it (the CPU's conv kernel)
    add("conv2d_fused", (2, 4), {"stride": pair((1, 1)), "padding": pair((0, 0)),
                                 "dilation": pair((1, 1)), "groups": AttrSpec("int", 1),
                                 "act": AttrSpec("str", "none"), "lo": AttrSpec("float", 0.0),
                                 "hi": AttrSpec("float", 0.0),
                                 "residual": AttrSpec("bool", False)},
        _conv2d_fused, "act(conv2d(x, w, b) + residual): act is none, max(., lo), min(., hi) "
        "or clip; residual=True: the last input is added before act")
    # made by passes/conv_epilogue.py only where a target asks for it (the CPU's blocked conv)
    add("conv2d_pair", (6, 6), {"stride": pair((1, 1)), "padding": pair((0, 0)),
                                "dilation": pair((1, 1)), "groups": AttrSpec("int", 1),
                                "stride2": pair((1, 1)), "act": AttrSpec("str", "none"),
                                "lo": AttrSpec("float", 0.0), "hi": AttrSpec("float", 0.0),
                                "packed": AttrSpec("bool", False)},
        _conv2d_pair, "act(conv2d(x, w, b) + conv2d(x2, w2, b2)): inputs (x, w, b, x2, w2, b2), "
        "the second convolution of stride stride2, unpadded, groups 1; a ResNet block's last "
        "1x1 and its projection shortcut as one output; packed=True: made by "
        "passes/conv_epilogue.py from filters the target prepacks (no effect on the value)")
    for op in ("max_pool2d", "avg_pool2d"):
        add(op, (1, 1), {"kernel": AttrSpec("ints"), "stride": AttrSpec("ints"),
                         "padding": pair((0, 0))}, _pool(op), f"2-D {op[:3]} pooling, NCHW"
                         + (" (float, or i8 / u8: the max of quantized values)"
                            if op == "max_pool2d" else ""))
    return t


# the quantization, splatting, linear algebra and sparse ops live in files of their own
# (ops/quant.py, ops/splat.py, ops/linalg.py, ops/sparse.py) but are HIR ops like these
HIR_OPS: dict[str, OpDef] = {**_defs(), **quant_defs(), **splat_defs(), **linalg_defs(),
                             **sparse_defs()}
