"""Reference semantics of the splatting ops (rlx_core/ir/ops/splat.py): the numpy oracle.

The equations, the culling rules and the compositing order are written down in
rlx_core/splat/reference.py; it computes in float64 and rounds each result to f32 once.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rlx_core.ir.graph import TensorType
from rlx_core.ir.ops.splat import SPLAT_OPS
from rlx_core.splat import reference as ref


def eval_splat(op: str, a: dict[str, Any], xs: list[np.ndarray], t: TensorType) -> np.ndarray:
    w, h = a["width"], a["height"]
    if op == "splat_project":
        return ref.project(*xs, w, h)
    if op == "splat_project_vjp":
        return ref.project_vjp(*xs[:7], xs[7], w, h)
    if op == "splat_rasterize":
        return ref.rasterize(xs[0], w, h, tuple(a["background"]))
    return ref.rasterize_vjp(xs[0], xs[1], w, h, tuple(a["background"]))


__all__ = ["eval_splat", "SPLAT_OPS"]
