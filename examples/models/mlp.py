"""A 2-layer MLP classifier (784-128-10), deterministic random weights.

Model file convention (every file in examples/models follows it; see README "Model files"):
  - ``model(*inputs)``: the function to compile, written with rlx ops;
  - ``example_inputs()``: a tuple of example arguments (arrays or ``rlx.spec(shape, dtype)``).
"""

import numpy as np

import rlx_core as rlx

_rng = np.random.default_rng(0)
fc1_weight = (_rng.standard_normal((128, 784)) * 0.05).astype(np.float32)
fc1_bias = np.zeros(128, np.float32) + 0.01
fc2_weight = (_rng.standard_normal((10, 128)) * 0.05).astype(np.float32)
fc2_bias = np.zeros(10, np.float32) - 0.01


def model(x):
    with rlx.block("fc1"):
        h = rlx.nn.relu(rlx.nn.linear(x, fc1_weight, fc1_bias))
    with rlx.block("fc2"):
        logits = rlx.nn.linear(h, fc2_weight, fc2_bias)
    return rlx.nn.log_softmax(logits, axis=-1)


def example_inputs():
    return (np.random.default_rng(1).standard_normal((4, 784)).astype(np.float32),)
