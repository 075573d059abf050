"""Quantization-aware training of the MNIST MLP, then conversion to a true int8 graph.

Every linear sees ``fake_quantize``d operands: its input as u8 (zero point 0: the inputs are
pixels in [0, 1] and relu outputs) and its weight as i8 per output channel. The step sizes
are learned with LSQ: each is a parameter ``log_scale`` (the scale is ``exp(log_scale)``, so
an optimizer step changes it by a relative amount, as LSQ's gradient scaling intends), and
``fake_quantize``'s VJP gives it LSQ's gradient. Training uses the existing autodiff and
optimizers (``rlx.optim.compile_step``); ``convert_qat_mlp`` then writes the learned scales
into the static PTQ rewrite (ptq.convert_static), whose rounding matches fake_quantize's.
"""

from __future__ import annotations

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
    return sorted(params, key=lambda k: int(k.removeprefix("fc")))


def init_qat(params: dict, x_amax: list[float]) -> dict:
    """The MLP's f32 parameters plus LSQ step sizes initialised like min-max PTQ:
    ``x_scale = max(x) / 255`` from ``x_amax`` (one per layer input, e.g. from observers)
    and ``w_scale = max|w| / 127`` per output channel."""
    import numpy as np

    out: dict[str, Any] = {}
    for name, amax in zip(_layers(params), x_amax, strict=True):
        w = np.asarray(params[name]["weight"], np.float32)
        ws = np.maximum(np.abs(w).max(axis=1), 1e-8) / W_RANGE[1]
        out[name] = {**params[name],
                     "x_log_scale": np.float32(np.log(max(amax, 1e-8) / X_RANGE[1])),
                     "w_log_scale": np.log(ws).astype(np.float32)}
    return out


def qat_mlp_logits(params: dict, x: Any) -> Any:
    """The MLP forward with fake-quantized inputs and weights (relu between layers)."""
    names = _layers(params)
    h = x
    for i, name in enumerate(names):
        p = params[name]
        with block(name):
            hq = fake_quantize(h, exp(ops.asarray(p["x_log_scale"])), 0.0, *X_RANGE)
            wq = fake_quantize(p["weight"], exp(ops.asarray(p["w_log_scale"])), 0.0, *W_RANGE,
                               axis=0)
            h = nn.linear(hq, wq, p["bias"])
            if i < len(names) - 1:
                h = nn.relu(h)
    return h


def qat_mlp_loss(params: dict, x: Any, labels: Any) -> Any:
    from rlx_core.models.mlp import cross_entropy

    with block("loss"):
        return cross_entropy(qat_mlp_logits(params, x), labels)


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


def convert_qat_mlp(params: dict, example_x: Any, argmax: bool = False) -> Any:
    """The trained QAT MLP as an int8 graph (quantize -> int_linear -> requantize chain);
    ``argmax``: the graph returns (logits, predicted class), as a firmware would."""
    import numpy as np

    from rlx_core.frontend.tracer import trace
    from rlx_core.models.mlp import mlp_logits
    from rlx_core.quant.ptq import convert_static, quantizable

    plain = {k: {"weight": np.asarray(v["weight"], np.float32),
                 "bias": np.asarray(v["bias"], np.float32)} for k, v in params.items()}
    def head(x: Any) -> Any:
        logits = mlp_logits(plain, x)
        return (logits, ops.argmax(logits, axis=-1)) if argmax else logits

    g = trace(head, example_x)
    lins = quantizable(g)
    xs, ws = learned_qparams(params)
    act = {n.inputs[0]: p for n, p in zip(lins, xs, strict=True)}
    weights = {n.inputs[1]: p for n, p in zip(lins, ws, strict=True)}
    return convert_static(g, act, weights)
