"""Quantization-aware training of the MNIST MLP and small CNNs, then conversion to a true
int8 graph.

A model is a dict of layers: ``conv<i>`` (2-D convolutions, NCHW, OIHW weights, all with the
same ``stride`` and ``padding``) first, then ``fc<i>`` (linears); relu between layers, a
flatten before the first linear. Every layer sees ``fake_quantize``d operands: its input as
u8 (zero point 0: the inputs are pixels in [0, 1] and relu outputs) and its weight as i8 per
output channel (a linear's row, a conv's filter). The step sizes are learned with LSQ: each
is a parameter ``log_scale`` (the scale is ``exp(log_scale)``, so an optimizer step changes
it by a relative amount, as LSQ's gradient scaling intends), and ``fake_quantize``'s VJP
gives it LSQ's gradient (the straight-through estimator for the operand). Training uses the
existing autodiff and optimizers (``rlx.optim.compile_step``); ``convert_qat`` then writes
the learned scales into the static PTQ rewrite (ptq.convert_static: ``int_conv2d`` /
``int_linear`` -> ``requantize`` chains), whose rounding matches fake_quantize's.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import rlx_core.frontend.nn as nn
from rlx_core.frontend import ops
from rlx_core.frontend.elementwise import exp
from rlx_core.frontend.tracer import block
from rlx_core.quant.ops import fake_quantize
from rlx_core.quant.params import QParams

X_RANGE = (0, 255)  # u8 activations, zero point 0
W_RANGE = (-128, 127)  # i8 weights, symmetric


def _layers(params: dict) -> list[str]:
    """Layer names in forward order: the convolutions, then the linears, each by number."""
    def key(k: str) -> tuple[int, int]:
        conv = k.startswith("conv")
        return (0 if conv else 1, int(k.removeprefix("conv" if conv else "fc")))

    return sorted(params, key=key)


def init_qat(params: dict, x_amax: list[float]) -> dict:
    """The model's f32 parameters plus LSQ step sizes initialised like min-max PTQ:
    ``x_scale = max(x) / 255`` from ``x_amax`` (one per layer input, e.g. from observers)
    and ``w_scale = max|w| / 127`` per output channel."""
    import numpy as np

    out: dict[str, Any] = {}
    for name, amax in zip(_layers(params), x_amax, strict=True):
        w = np.asarray(params[name]["weight"], np.float32)
        ws = np.maximum(np.abs(w).reshape(w.shape[0], -1).max(axis=1), 1e-8) / W_RANGE[1]
        out[name] = {**params[name],
                     "x_log_scale": np.float32(np.log(max(amax, 1e-8) / X_RANGE[1])),
                     "w_log_scale": np.log(ws).astype(np.float32)}
    return out


def _forward(params: dict, x: Any, layer: Any, stride: int, padding: int) -> Any:
    """The model's forward; ``layer(name, p, h)`` gives a layer's (input, weight) operands."""
    names = _layers(params)
    h = x
    for i, name in enumerate(names):
        p = params[name]
        with block(name):
            if name.startswith("fc") and h.ndim > 2:
                h = ops.reshape(h, (h.shape[0], -1))  # flatten before the first linear
            hq, wq = layer(name, p, h)
            h = (nn.conv2d(hq, wq, p["bias"], stride=stride, padding=padding)
                 if name.startswith("conv") else nn.linear(hq, wq, p["bias"]))
            if i < len(names) - 1:
                h = nn.relu(h)
    return h


def _fake_quantized(name: str, p: dict, h: Any) -> tuple[Any, Any]:
    hq = fake_quantize(h, exp(ops.asarray(p["x_log_scale"])), 0.0, *X_RANGE)
    wq = fake_quantize(p["weight"], exp(ops.asarray(p["w_log_scale"])), 0.0, *W_RANGE, axis=0)
    return hq, wq


def qat_logits(params: dict, x: Any, stride: int = 2, padding: int = 1) -> Any:
    """The forward with fake-quantized inputs and weights (relu between layers)."""
    return _forward(params, x, _fake_quantized, stride, padding)


def qat_mlp_logits(params: dict, x: Any) -> Any:
    """The MLP (``fc<i>`` layers only) forward with fake-quantized inputs and weights."""
    return qat_logits(params, x)


def qat_loss(params: dict, x: Any, labels: Any, stride: int = 2, padding: int = 1) -> Any:
    from rlx_core.models.mlp import cross_entropy

    with block("loss"):
        return cross_entropy(qat_logits(params, x, stride, padding), labels)


def qat_mlp_loss(params: dict, x: Any, labels: Any) -> Any:
    return qat_loss(params, x, labels)


def cnn_loss(stride: int = 2, padding: int = 1) -> Any:
    """``qat_loss`` for convolutions of ``stride`` and ``padding`` (for compile_step)."""
    return partial(qat_loss, stride=stride, padding=padding)


def learned_qparams(params: dict) -> tuple[list[QParams], list[QParams]]:
    """(input, weight) QParams per layer from the trained log step sizes."""
    import numpy as np

    xs, ws = [], []
    for name in _layers(params):
        p = params[name]
        xs.append(QParams(np.float32(np.exp(np.float32(p["x_log_scale"]))), np.int32(0), "u8"))
        w_scale = np.exp(np.asarray(p["w_log_scale"], np.float32)).astype(np.float32)
        ws.append(QParams(w_scale, np.zeros(w_scale.shape, np.int32), "i8", 0))
    return xs, ws


def convert_qat(params: dict, example_x: Any, argmax: bool = False, stride: int = 2,
                padding: int = 1) -> Any:
    """The trained QAT model as an int8 graph (quantize -> int_conv2d / int_linear ->
    requantize chain); ``argmax``: the graph returns (logits, predicted class), as a
    firmware would. Each layer's output is requantized at the next layer's learned input
    scale (through the flatten)."""
    import numpy as np

    from rlx_core.frontend.tracer import trace
    from rlx_core.quant.ptq import convert_static, post_value, quantizable_layers

    plain = {k: {"weight": np.asarray(v["weight"], np.float32),
                 "bias": np.asarray(v["bias"], np.float32)} for k, v in params.items()}

    def head(x: Any) -> Any:
        logits = _forward(plain, x, lambda _n, p, h: (h, p["weight"]), stride, padding)
        return (logits, ops.argmax(logits, axis=-1)) if argmax else logits

    g = trace(head, example_x)
    layers = quantizable_layers(g)
    xs, ws = learned_qparams(params)
    act = {n.inputs[0]: p for n, p in zip(layers, xs, strict=True)}
    for n, p in zip(layers, xs[1:], strict=False):  # a layer's output: the next one's input
        act.setdefault(post_value(g, n), p)
    weights = {n.inputs[1]: p for n, p in zip(layers, ws, strict=True)}
    return convert_static(g, act, weights)


def convert_qat_mlp(params: dict, example_x: Any, argmax: bool = False) -> Any:
    """The trained QAT MLP as an int8 graph (quantize -> int_linear -> requantize chain)."""
    return convert_qat(params, example_x, argmax)
