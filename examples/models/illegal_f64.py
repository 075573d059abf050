"""A deliberately illegal model for GPU targets: an f64 least-squares step and an i64 gather.

On the numpy and CPU targets it compiles; on webgpu (no f64, no i64 in shaders) the compile
fails with a LegalizationError that lists every illegal node, its source line and a fix.
Follows the model file convention: ``model(*inputs)`` and ``example_inputs()``.
"""

import numpy as np

import rlx_core as rlx

table = np.random.default_rng(0).standard_normal((100, 8))  # float64 on purpose


def model(a, ids):
    normal = a.T @ a  # f64 matmul: WebGPU has no f64
    rows = rlx.take(table, ids, axis=0)  # f64 table, i64 ids of unknown range
    return normal.sum(axis=0) + rows.sum(axis=0)


def example_inputs():
    rng = np.random.default_rng(1)
    return rng.standard_normal((16, 8)), rng.integers(0, 100, size=(5,), dtype=np.int64)
