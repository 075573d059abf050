"""Automatic mixed precision (``rlx.quant.amp``): an autocast pass and dynamic loss scaling.

    g16 = amp.autocast(g, "bf16")            # a pass over an HIR graph
    loss16 = amp.autocast_fn(loss_fn, "f16")  # the same, applied where loss_fn is traced
    step = amp.compile_amp_step(loss_fn, rlx.optim.Adam(1e-3), params, x, y, dtype="f16")
    for x, y in batches:
        loss = step(x, y)                    # skips the update when a gradient is inf/NaN
    step.scale, step.skipped                 # the loss scale now, the steps skipped

The policy (PyTorch autocast's): the ops whose cost is their multiply-adds — ``linear``,
``dot_general``, ``conv2d`` — compute in the low dtype (their f32 operands cast down, the
result cast back to f32, so every other op keeps its f32 operands); everything else —
reductions, softmax, layer norm, the losses, elementwise math — stays in f32, as written. Each
rewritten node keeps its source node's name as ``loc.origin``, so the numerics lens
(rlx_explorer/views/numerics.py) can compare the autocast graph with its f32 source node by
node. Nothing is narrowed silently: a target without the low dtype fails legalization on
the cast, with that target's hint.

Dynamic loss scaling for f16 training: the loss is multiplied by ``scale`` before the
backward pass and the gradients divided by it after, so small f16 gradients do not flush to
zero; when any gradient is inf or NaN the step's parameter and optimizer-state updates are
discarded inside the compiled graph and the scale halves; after ``growth_interval`` finite
steps in a row it doubles (PyTorch's GradScaler schedule).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rlx_core.ir import dtypes as dt
from rlx_core.ir.builder import Builder, NameGen
from rlx_core.ir.graph import Graph, Level, Value, ValueKind
from rlx_core.quant.errors import QuantConfigError

LOW_PRECISION_OPS: frozenset[str] = frozenset({"linear", "dot_general", "conv2d"})
LOW_DTYPES = ("f16", "bf16")


def _low(dtype: str) -> dt.DType:
    if dtype not in LOW_DTYPES:
        raise QuantConfigError(f"autocast computes in f16 or bf16, not {dtype!r}",
                               hint="autocast(graph, 'bf16') or autocast(graph, 'f16')")
    return dt.get(dtype)


def autocast(g: Graph, dtype: str = "bf16",
             ops: frozenset[str] = LOW_PRECISION_OPS) -> Graph:
    """``g`` with every f32 op in ``ops`` computed in ``dtype`` (see the module docstring)."""
    low = _low(dtype)
    names = NameGen()
    b = Builder(names)
    env: dict[str, Value] = {}
    inputs, params, data = [], [], {}
    for v in g.inputs:
        env[v.name] = Value(names.claim(v.name), v.type, ValueKind.INPUT)
        inputs.append(env[v.name])
    for v in g.params:
        env[v.name] = Value(names.claim(v.name), v.type, ValueKind.PARAM)
        params.append(env[v.name])
        if v.name in g.param_data:
            data[env[v.name].name] = g.param_data[v.name]
    for n in g.nodes:
        ins = [env[i] for i in n.inputs]
        loc = n.loc if n.loc.origin else n.loc.with_origin(n.out.name, n.op)
        if n.op in ops and n.type.dtype == dt.f32 and all(x.type.dtype == dt.f32 for x in ins):
            down = [b.emit("cast", [x], {"dtype": low}, loc=loc) for x in ins]
            y = b.emit(n.op, down, dict(n.attrs), loc=loc)
            env[n.out.name] = b.emit("cast", [y], {"dtype": dt.f32}, loc=loc)
        else:
            env[n.out.name] = b.emit(n.op, ins, dict(n.attrs), loc=loc)
    return Graph(f"{g.name}_{dtype}", Level.HIR, tuple(inputs), tuple(params), tuple(b.nodes),
                 tuple(env[o].name for o in g.outputs), param_data=data,
                 origin=dict(g.origin))


def autocast_fn(fn: Callable[..., Any], dtype: str = "bf16") -> Callable[..., Any]:
    """``fn`` whose traced graph is autocast before it joins the enclosing trace (so
    ``rlx.value_and_grad`` differentiates the low-precision graph, casts included)."""
    _low(dtype)

    def wrapped(*args: Any) -> Any:
        from rlx_core.autodiff.api import _inline, _trace_inner
        from rlx_core.autodiff.pytree import flatten
        from rlx_core.frontend import ops, tracer
        from rlx_core.frontend.tensor import Tensor

        ctx = tracer.current()
        if ctx is None:
            raise QuantConfigError("autocast_fn(fn) runs inside a trace",
                                   hint="call it within rlx.compile / rlx.jit / a training "
                                        "step, or autocast a traced graph")
        leaves, tdef = flatten(args)
        outer = [ops.asarray(x) for x in leaves]
        hir, in_names, _, free = _trace_inner(fn, tdef, [t.value.type for t in outer], ctx,
                                              False)
        low = autocast(hir, dtype)
        mapping = {low.inputs[i].name: t.value for i, t in enumerate(outer)}
        mapping.update({v.name: v for v in free})
        mapping = _inline(low, mapping, ctx)
        return Tensor(mapping[low.outputs[0]])

    wrapped.__name__ = f"{getattr(fn, '__name__', 'fn')}_{dtype}"
    return wrapped


@dataclass
class DynamicLossScaler:
    """The loss-scale schedule (host side): halve on a non-finite step, double after
    ``growth_interval`` finite ones."""

    scale: float = 2.0 ** 15
    growth_factor: float = 2.0
    backoff_factor: float = 0.5
    growth_interval: int = 2000
    min_scale: float = 1.0
    good_steps: int = 0
    skipped: int = 0

    def update(self, finite: bool) -> None:
        if not finite:
            self.scale = max(self.min_scale, self.scale * self.backoff_factor)
            self.good_steps = 0
            self.skipped += 1
            return
        self.good_steps += 1
        if self.good_steps >= self.growth_interval:
            self.scale *= self.growth_factor
            self.good_steps = 0


def _amp_step_function(loss_fn: Callable[..., Any], optimizer: Any, p_def: Any, s_def: Any,
                       n_params: int, n_state: int, dtype: str) -> Callable[..., Any]:
    """``(*params, *state, scale, *batch) -> (loss, finite, *new_params, *new_state)``."""
    from rlx_core.autodiff.api import value_and_grad
    from rlx_core.autodiff.pytree import flatten, unflatten
    from rlx_core.frontend import ops

    low_loss = autocast_fn(loss_fn, dtype)

    def amp_train_step(*flat: Any) -> tuple[Any, ...]:
        p_leaves = list(flat[:n_params])
        s_leaves = list(flat[n_params:n_params + n_state])
        scale = flat[n_params + n_state]
        batch = flat[n_params + n_state + 1:]
        params, state = unflatten(p_def, p_leaves), unflatten(s_def, s_leaves)

        def scaled(p: Any, *b: Any) -> Any:
            return low_loss(p, *b) * scale

        sloss, sgrads = value_and_grad(scaled)(params, *batch)
        g_leaves = [g / scale for g in flatten(sgrads)[0]]
        # x - x is 0 for a finite x and NaN for inf / NaN: one sum says whether all are finite
        bad = None
        for g in g_leaves:
            s = (g - g).sum()
            bad = s if bad is None else bad + s
        finite = bad == 0.0
        new_p, new_s = optimizer.update(params, unflatten(p_def, g_leaves), state)
        keep_p = [ops.where(finite, a, b) for a, b in zip(flatten(new_p)[0], p_leaves,
                                                          strict=True)]
        keep_s = [ops.where(finite, a, b) for a, b in zip(flatten(new_s)[0], s_leaves,
                                                          strict=True)]
        return (sloss / scale, ops.astype(finite, "f32"), *keep_p, *keep_s)

    amp_train_step.__name__ = f"amp_train_step_{getattr(loss_fn, '__name__', 'loss')}"
    return amp_train_step


class AmpStep:
    """A compiled mixed-precision training step with its loss scaler (see the module
    docstring); ``params`` / ``state`` as CompiledStep's."""

    def __init__(self, exe: Any, params: Any, state: Any, scaler: DynamicLossScaler,
                 use_scaling: bool) -> None:
        from rlx_core.autodiff.pytree import flatten

        self.executable = exe
        self._p, self._p_def = flatten(params)
        self._s, self._s_def = flatten(state)
        self.scaler = scaler
        self.use_scaling = use_scaling
        self.steps = 0
        self.last_finite = True

    @property
    def params(self) -> Any:
        from rlx_core.autodiff.pytree import unflatten

        return unflatten(self._p_def, list(self._p))

    @property
    def scale(self) -> float:
        """The loss scale the next step uses (1 without loss scaling)."""
        return self.scaler.scale if self.use_scaling else 1.0

    @property
    def skipped(self) -> int:
        return self.scaler.skipped

    def __call__(self, *batch: Any) -> Any:
        import numpy as np

        scale = np.float32(self.scaler.scale if self.use_scaling else 1.0)
        outs = self.executable(*self._p, *self._s, scale, *batch)
        n, m = len(self._p), len(self._s)
        loss, finite = outs[0], bool(np.asarray(outs[1]) > 0.5)
        self._p = list(outs[2:2 + n])
        self._s = list(outs[2 + n:2 + n + m])
        self.last_finite = finite
        if self.use_scaling:
            self.scaler.update(finite)
        elif not finite:
            self.scaler.skipped += 1
        self.steps += 1
        return loss


def compile_amp_step(loss_fn: Callable[..., Any], optimizer: Any, params: Any, *batch: Any,
                     dtype: str = "f16", target: str = "numpy",
                     scaler: DynamicLossScaler | None = None,
                     loss_scaling: bool | None = None, **options: Any) -> AmpStep:
    """``rlx.optim.compile_step`` under autocast: the loss function's matmuls in ``dtype``,
    the update skipped in-graph on a non-finite gradient; dynamic loss scaling by default for
    f16 (bf16 has f32's range and needs none: ``loss_scaling=False`` keeps the scale at 1)."""
    import numpy as np

    import rlx_core.api as api
    from rlx_core.autodiff.pytree import flatten

    _low(dtype)
    use = (dtype == "f16") if loss_scaling is None else loss_scaling
    state = optimizer.init(params)
    p_leaves, p_def = flatten(params)
    s_leaves, s_def = flatten(state)
    fn = _amp_step_function(loss_fn, optimizer, p_def, s_def, len(p_leaves), len(s_leaves),
                            dtype)
    exe = api.compile(fn, *p_leaves, *s_leaves, np.float32(1.0), *batch, target=target,
                      **options)
    return AmpStep(exe, params, state, scaler or DynamicLossScaler(), use)
