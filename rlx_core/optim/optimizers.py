"""SGD with momentum and Adam, written as traced update rules (graph transformations).

An optimizer's ``update(params, grads, state)`` runs inside a trace: it records the update
arithmetic into the same graph as the forward and backward pass, so one compiled graph does
forward + backward + update. ``init(params)`` makes the host-side state (zeros like params).

    SGD:   v = momentum * v + g (+ weight_decay * p);  p = p - lr * (g + momentum * v if nesterov
           else v)                                                    (torch.optim.SGD)
    Adam:  t += 1;  m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2;
           p = p - lr * (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)  (torch.optim.Adam)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from rlx_core.autodiff.pytree import flatten, tree_map, unflatten
from rlx_core.errors import RlxError


class OptimizerError(RlxError):
    """An optimizer hyper-parameter is out of range."""

    code = "RLX-A101"


def _zeros_like_host(x: Any) -> Any:
    """Zeros of ``x``'s shape and dtype: a numpy array, or a HostArray where there is no numpy
    (Pyodide: parameters given as memoryviews or HostArrays)."""
    try:
        import numpy as np  # host state lives in the host array layer
    except ImportError:
        from rlx_core.frontend.tracer import type_of_example

        return _zeros_host(type_of_example(x, "a parameter"))
    arr = np.asarray(x)
    return np.zeros(arr.shape, dtype=arr.dtype)


def _zeros_host(t: Any) -> Any:
    from rlx_core.targets.gpu_common.host_arrays import HostArray

    zero = 0.0 if t.dtype.is_float else 0
    return HostArray(t.dtype.name, tuple(t.shape), (zero,) * math.prod(t.shape))


def _scalar_zero() -> Any:
    """The f32 step counter of Adam's state, numpy-free where numpy is missing."""
    try:
        import numpy as np
    except ImportError:
        from rlx_core.ir import dtypes as dt
        from rlx_core.ir.graph import TensorType

        return _zeros_host(TensorType(dt.f32, ()))
    return np.zeros((), dtype=np.float32)


def _check(name: str, value: float, lo: float, hi: float | None = None) -> None:
    if not (value >= lo and (hi is None or value < hi)):
        rng = f"[{lo}, {hi})" if hi is not None else f">= {lo}"
        raise OptimizerError(f"{name}={value} is out of range", hint=f"use a value in {rng}")


@dataclass(frozen=True)
class SGD:
    """Stochastic gradient descent with optional (Nesterov) momentum and weight decay."""

    lr: float = 0.01
    momentum: float = 0.0
    nesterov: bool = False
    weight_decay: float = 0.0
    name: str = "sgd"

    def __post_init__(self) -> None:
        _check("lr", self.lr, 0.0)
        _check("momentum", self.momentum, 0.0, 1.0)
        _check("weight_decay", self.weight_decay, 0.0)
        if self.nesterov and self.momentum == 0.0:
            raise OptimizerError("nesterov=True needs momentum > 0", hint="set momentum=0.9")

    def init(self, params: Any) -> Any:
        """Host state: one velocity buffer per parameter (empty without momentum)."""
        if self.momentum == 0.0:
            return {}
        return {"velocity": tree_map(_zeros_like_host, params)}

    def update(self, params: Any, grads: Any, state: Any) -> tuple[Any, Any]:
        """(new params, new state), traced."""
        p_leaves, tdef = flatten(params)
        g_leaves = flatten(grads)[0]
        if self.weight_decay:
            g_leaves = [g + self.weight_decay * p for p, g in zip(p_leaves, g_leaves, strict=False)]
        if self.momentum == 0.0:
            new = [p - self.lr * g for p, g in zip(p_leaves, g_leaves, strict=False)]
            return unflatten(tdef, new), {}
        v_leaves = flatten(state["velocity"])[0]
        v_new = [self.momentum * v + g for v, g in zip(v_leaves, g_leaves, strict=False)]
        step = ([g + self.momentum * v for g, v in zip(g_leaves, v_new, strict=False)] if self.nesterov
                else v_new)
        new = [p - self.lr * s for p, s in zip(p_leaves, step, strict=False)]
        return unflatten(tdef, new), {"velocity": unflatten(tdef, v_new)}


@dataclass(frozen=True)
class Adam:
    """Adam (Kingma & Ba) with bias correction, as torch.optim.Adam (no amsgrad)."""

    lr: float = 1e-3
    b1: float = 0.9
    b2: float = 0.999
    eps: float = 1e-8
    weight_decay: float = 0.0
    name: str = "adam"

    def __post_init__(self) -> None:
        _check("lr", self.lr, 0.0)
        _check("b1", self.b1, 0.0, 1.0)
        _check("b2", self.b2, 0.0, 1.0)
        _check("eps", self.eps, 0.0)
        _check("weight_decay", self.weight_decay, 0.0)

    def init(self, params: Any) -> Any:
        """Host state: first and second moments per parameter and the step count."""
        return {"m": tree_map(_zeros_like_host, params), "v": tree_map(_zeros_like_host, params),
                "t": _scalar_zero()}

    def update(self, params: Any, grads: Any, state: Any) -> tuple[Any, Any]:
        """(new params, new state), traced."""
        p_leaves, tdef = flatten(params)
        g_leaves = flatten(grads)[0]
        if self.weight_decay:
            g_leaves = [g + self.weight_decay * p for p, g in zip(p_leaves, g_leaves, strict=False)]
        t = state["t"] + 1.0
        # bias corrections are scalars: computed once, broadcast into every parameter update
        c1 = 1.0 - self.b1 ** t
        c2 = 1.0 - self.b2 ** t
        new_p, new_m, new_v = [], [], []
        for p, g, m, v in zip(p_leaves, g_leaves, flatten(state["m"])[0], flatten(state["v"])[0], strict=False):
            m2 = self.b1 * m + (1.0 - self.b1) * g
            v2 = self.b2 * v + (1.0 - self.b2) * (g * g)
            m_hat = m2 / c1.astype(p.dtype)
            v_hat = v2 / c2.astype(p.dtype)
            new_p.append(p - self.lr * m_hat / (v_hat.sqrt() + self.eps))
            new_m.append(m2)
            new_v.append(v2)
        return unflatten(tdef, new_p), {"m": unflatten(tdef, new_m), "t": t,
                                        "v": unflatten(tdef, new_v)}
