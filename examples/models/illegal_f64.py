"""A deliberately illegal model for GPU targets: an f64 least-squares step and an i64 gather.

On numpy and CPU it compiles; on webgpu (f64 tanh: webgpu/df64.py emulates f64 arithmetic,
not tanh; i64 ids of unknown range) it fails listing every illegal node, its line and a fix.
Follows the model file convention: ``model(*inputs)`` and ``example_inputs()``.
"""

import numpy as np

import rlx_core as rlx

table = np.random.default_rng(0).standard_normal((100, 8))  # float64 on purpose


def model(a, ids):
    normal = np.tanh(a).T @ a  # f64 tanh: WebGPU emulates f64 arithmetic, not tanh
    rows = np.tanh(rlx.take(table, ids, axis=0))  # f64 table, i64 ids of unknown range
    return normal.sum(axis=0) + rows.sum(axis=0)


def example_inputs():
    rng = np.random.default_rng(1)
    return rng.standard_normal((16, 8)), rng.integers(0, 100, size=(5,), dtype=np.int64)
