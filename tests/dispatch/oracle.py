"""The numpy oracle of the dispatch tests: the numpy target's ``semantics.eval_op``, node by node.

``eval_op`` defines every MIR and HIR op, so a graph before and after legalization can both be
interpreted and compared.
"""

from __future__ import annotations

import numpy as np

from rlx_core.ir import dtypes as dt
from rlx_core.ir.graph import Graph
from rlx_core.targets.numpy_ref.semantics import eval_op


def run_graph(g: Graph, inputs: list[np.ndarray]) -> list[np.ndarray]:
    """Interpret ``g`` node by node (any level); params come from ``g.param_data``."""
    env: dict[str, np.ndarray] = {v.name: np.asarray(x)
                                  for v, x in zip(g.inputs, inputs, strict=True)}
    for p in g.params:
        env[p.name] = np.asarray(g.param_data[p.name], dtype=dt.to_numpy_name(p.type.dtype)
                                 ).reshape(p.type.shape)
    for n in g.nodes:
        res = np.asarray(eval_op(n.op, n.a, [env[i] for i in n.inputs], n.out.type))
        if res.shape != n.out.type.shape:
            raise AssertionError(f"{n.op} produced {res.shape}, declared {n.out.type}")
        env[n.out.name] = res
    return [env[o] for o in g.outputs]
