"""What the pattern work of rlx_core/sparse/layout.py does to values: a gather (a transpose's
permutation, SpGEMM's operands) or a segment sum (duplicates, SpGEMM's products). Numpy
values are computed at once; traced values record MIR ``gather`` / ``scatter_add``, so they
stay differentiable and legal on every target."""

from __future__ import annotations

from typing import Any

from rlx_core.sparse.layout import is_concrete


def take(values: Any, index: Any) -> Any:
    """``values[index]``."""
    if is_concrete(values):
        import numpy as np

        return np.asarray(values)[np.asarray(index)]
    from rlx_core.frontend import ops

    return ops.take(values, index, 0)


def segment_sum(values: Any, segment: Any, count: int) -> Any:
    """out[s] = sum of values[i] with segment[i] == s, for s < count."""
    if is_concrete(values):
        import numpy as np

        v = np.asarray(values)
        out = np.zeros(count, v.dtype)
        np.add.at(out, np.asarray(segment), v)
        return out
    from rlx_core.frontend import ops
    from rlx_core.frontend.tensor import Tensor
    from rlx_core.frontend.tracer import current

    v = ops.asarray(values)
    zeros = ops.zeros((count,), v.dtype)
    idx = ops.asarray(segment)
    return Tensor(current().emit("scatter_add", [zeros.value, idx.value, v.value], {"axis": 0}))
