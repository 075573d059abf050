"""The 784-128-10 MLP of mlp.py, quantized to int8 (static PTQ) for a microcontroller.

``model`` is the quantized graph (quantize -> int_linear -> requantize -> relu -> int_linear
-> dequantize), built at import; the model-file convention accepts a graph as well as a
function. ``rlx compile examples/models/mlp_int8.py --target cortex-m --out build/fw`` writes
the firmware image and its sources, ``--target fpga --out build/hw`` the Verilog project (the
host dequantizes the streamed logits; take their argmax for the class: no softmax needed).
"""

import numpy as np

import rlx_core as rlx
from rlx_core.quant import ptq

_rng = np.random.default_rng(0)
fc1_weight = (_rng.standard_normal((128, 784)) * 0.05).astype(np.float32)
fc1_bias = np.zeros(128, np.float32) + 0.01
fc2_weight = (_rng.standard_normal((10, 128)) * 0.05).astype(np.float32)
fc2_bias = np.zeros(10, np.float32) - 0.01


def logits(x):
    with rlx.block("fc1"):
        h = rlx.nn.relu(rlx.nn.linear(x, fc1_weight, fc1_bias))
    with rlx.block("fc2"):
        return rlx.nn.linear(h, fc2_weight, fc2_bias)


def example_inputs():
    return (np.random.default_rng(1).random((1, 784)).astype(np.float32),)


_calibration = [np.random.default_rng(2).random((1, 784)).astype(np.float32) for _ in range(8)]
model = ptq.quantize_static(logits, *example_inputs(), data=_calibration).graph
