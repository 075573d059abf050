"""The MNIST MLP (784-512-512-10 by default): parameters, forward, loss and accuracy."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import rlx_core.frontend.nn as nn
from rlx_core.frontend import ops
from rlx_core.frontend.tracer import block

MNIST_SIZES = (784, 512, 512, 10)


def init_mlp(sizes: Sequence[int] = MNIST_SIZES, seed: int = 0, dtype: str = "float32") -> dict:
    """Parameters as torch.nn.Linear initialises them: U(-1/sqrt(in), 1/sqrt(in)).

    Returns ``{"fc1": {"weight": (out, in), "bias": (out,)}, "fc2": ...}`` (host arrays).
    """
    import numpy as np

    rng = np.random.default_rng(seed)
    params: dict[str, Any] = {}
    for i, (fan_in, fan_out) in enumerate(zip(sizes[:-1], sizes[1:], strict=False), start=1):
        bound = 1.0 / math.sqrt(fan_in)
        params[f"fc{i}"] = {
            "weight": rng.uniform(-bound, bound, (fan_out, fan_in)).astype(dtype),
            "bias": rng.uniform(-bound, bound, (fan_out,)).astype(dtype),
        }
    return params


def mlp_logits(params: dict, x: Any) -> Any:
    """Linear -> ReLU for every hidden layer, a linear head; one ``rlx.block`` per layer."""
    names = sorted(params, key=lambda k: int(k.removeprefix("fc")))
    h = x
    for i, name in enumerate(names):
        with block(name):
            h = nn.linear(h, params[name]["weight"], params[name]["bias"])
            if i < len(names) - 1:
                h = nn.relu(h)
    return h


def one_hot(labels: Any, classes: int, dtype: Any) -> Any:
    """(batch,) integer labels -> (batch, classes) floats, by comparing with an iota."""
    lab = ops.asarray(labels)
    n = lab.shape[0]
    cols = ops.iota((n, classes), dim=1, dtype=lab.dtype)
    return ops.astype(ops.broadcast_to(ops.reshape(lab, (n, 1)), (n, classes)) == cols, dtype)


def cross_entropy(logits: Any, labels: Any) -> Any:
    """Mean softmax cross-entropy of (batch, classes) logits against integer labels."""
    logp = nn.log_softmax(logits, axis=-1)
    target = one_hot(labels, logits.shape[-1], logits.dtype)
    return -(logp * target).sum(axis=-1).mean()


def mlp_loss(params: dict, x: Any, labels: Any) -> Any:
    """The training objective: cross-entropy of the MLP's logits."""
    with block("loss"):
        return cross_entropy(mlp_logits(params, x), labels)


def mlp_predict(params: dict, x: Any) -> Any:
    """The predicted class per row (argmax of the logits)."""
    return mlp_logits(params, x).argmax(axis=-1)
