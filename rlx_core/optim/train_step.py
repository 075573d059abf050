"""A training step compiled as ONE graph: forward, backward (rlx.value_and_grad) and update.

    step = rlx.optim.compile_step(loss_fn, rlx.optim.Adam(1e-3), params, x, y, target="cpu")
    for x, y in batches:
        loss = step(x, y)          # runs the one executable; params and state stay on the host
    step.params                    # the trained parameters (same pytree as given)

The graph's inputs are the parameter leaves, the optimizer state leaves and the batch; its
outputs are the loss, the new parameter leaves and the new state leaves.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rlx_core.autodiff.api import value_and_grad
from rlx_core.autodiff.pytree import TreeDef, flatten, unflatten
from rlx_core.ir import dtypes as dt
from rlx_core.ir.graph import Graph
from rlx_core.runtime.executable import Executable


def step_function(loss_fn: Callable[..., Any], optimizer: Any, p_def: TreeDef, s_def: TreeDef,
                  n_params: int, n_state: int,
                  reduce: Callable[[Any, list[Any]], tuple[Any, list[Any]]] | None = None
                  ) -> Callable[..., Any]:
    """The flat traced function ``(*param_leaves, *state_leaves, *batch) -> (loss, *new...)``.

    ``reduce(loss, grad_leaves) -> (loss, grad_leaves)``, when given, runs between the
    backward pass and the update (data parallelism's gradient all-reduce,
    rlx_core/distributed/grad_buckets.py)."""

    def train_step(*flat: Any) -> tuple[Any, ...]:
        params = unflatten(p_def, list(flat[:n_params]))
        state = unflatten(s_def, list(flat[n_params:n_params + n_state]))
        batch = flat[n_params + n_state:]
        loss, grads = value_and_grad(loss_fn)(params, *batch)
        if reduce is not None:
            g_leaves, g_def = flatten(grads)
            loss, g_leaves = reduce(loss, g_leaves)
            grads = unflatten(g_def, list(g_leaves))
        new_params, new_state = optimizer.update(params, grads, state)
        new_s = flatten(new_state)[0]
        return (loss, *flatten(new_params)[0], *new_s)

    train_step.__name__ = f"train_step_{getattr(loss_fn, '__name__', 'loss')}"
    return train_step


def training_graph(loss_fn: Callable[..., Any], optimizer: Any, params: Any,
                   *batch: Any) -> Graph:
    """The HIR graph of one training step (for inspection and the explorer)."""
    from rlx_core.frontend.tracer import trace

    state = optimizer.init(params)
    p_leaves, p_def = flatten(params)
    s_leaves, s_def = flatten(state)
    fn = step_function(loss_fn, optimizer, p_def, s_def, len(p_leaves), len(s_leaves))
    return trace(fn, *p_leaves, *s_leaves, *batch)


def _line_aligned_copy(x: Any) -> Any:
    """A C-contiguous copy of the numpy array ``x`` whose data starts on a 64-byte line.

    An in-place step writes its new leaves over these copies for as long as it runs, and the
    GEMM that stores W - lr * dW from its tiles (cpu/update_store.py) loads and stores W's
    rows as whole vectors: on a row 16-48 bytes off a line each 64-byte vector spans two
    lines. numpy's copies land 0-48 bytes off, varying from run to run. The MLP
    784-128-10/128 step with its leaves 48 bytes off against aligned, in turns in one process
    (FIFO): the step's C 0.983-0.995 of the time (the weight gradient 1.2% faster), the
    CompiledStep 0.990-0.999."""
    import numpy as np

    if not isinstance(x, np.ndarray) or x.dtype.hasobject or x.nbytes == 0:
        return x.copy()
    raw = np.empty(x.nbytes + 64, np.uint8)
    start = -raw.ctypes.data % 64
    out = raw[start:start + x.nbytes].view(x.dtype).reshape(x.shape)
    out[...] = x
    return out


class CompiledStep:
    """One compiled training step plus the host-side parameters and optimizer state.

    The parameters and state are kept as the flat leaves the executable takes and returns,
    so a step flattens and rebuilds no pytree; ``params`` and ``state`` are rebuilt from the
    leaves when read (and cached until the next step), and assigning either replaces its
    leaves. (Flattening and unflattening the MLP's two-layer dict cost ~30 us of a 0.5 ms
    step.)"""

    def __init__(self, executable: Executable, params: Any, state: Any, jitted: Any = None,
                 in_place: bool = False):
        self.executable = executable
        # the compiled step may write new leaves into the old ones (compile_step's in_place):
        # leaves handed in are copied first, so the caller's arrays are never written
        self.in_place = in_place
        # on the CPU target: the step as a jitted function, so that a step whose arguments
        # are exactly the compiled types runs through the specialization cache module
        # (argument checks and output arrays in C, ~40 us less per step than program.run);
        # other arguments take the checked path (converted, or refused with the
        # executable's error)
        self.jitted = jitted
        self.steps = 0
        self.losses: list[float] = []
        p_leaves, self._p_def = self._own(params)
        s_leaves, self._s_def = self._own(state)
        # the one store of the leaves: (*parameter leaves, *state leaves), the module's
        # leading arguments; the first _n_params of them are the parameters'
        self._lead: tuple[Any, ...] = (*p_leaves, *s_leaves)
        self._n_params = len(p_leaves)
        self._trees: tuple[Any, Any] | None = None if in_place else (params, state)
        # (numpy, [(shape, dtype)] of the inputs), for the per-step fast path in __call__
        self._specs: Any = None
        self._leaves_ok = False  # are the leaves known to be exactly the compiled types?
        # the module's guards check each call in C, its misses go to the executable's checked
        # path (SpecializationCache.fallback): with the leaves of the compiled types and a
        # batch of numpy arrays a step calls the module with no check in Python (~1.3 us of
        # _fast on the 784-128-10/128 step)
        self._ndarray: Any = None
        cache = getattr(jitted, "cache", None)
        if cache is not None:
            cache.fallback = executable
            try:
                import numpy as np
            except ImportError:
                np = None
            self._ndarray = np.ndarray if np is not None else None

    @property
    def params(self) -> Any:
        """The current parameters (the same pytree structure as given)."""
        return self._tree(0)

    @params.setter
    def params(self, value: Any) -> None:
        p_leaves, self._p_def = self._own(value)
        self._set_leaves(p_leaves, self._s_leaves)

    @property
    def state(self) -> Any:
        """The current optimizer state."""
        return self._tree(1)

    @state.setter
    def state(self, value: Any) -> None:
        s_leaves, self._s_def = self._own(value)
        self._set_leaves(self._p_leaves, s_leaves)

    @property
    def _p_leaves(self) -> tuple[Any, ...]:
        """The parameters' leaves."""
        return self._lead[:self._n_params]

    @property
    def _s_leaves(self) -> tuple[Any, ...]:
        """The optimizer state's leaves."""
        return self._lead[self._n_params:]

    def _set_leaves(self, p_leaves: Any, s_leaves: Any) -> None:
        """Leaves handed in (a setter's): not yet known to be of the compiled types."""
        self._lead = (*p_leaves, *s_leaves)
        self._n_params = len(p_leaves)
        self._trees, self._leaves_ok = None, False

    def _own(self, tree: Any) -> tuple[list[Any], TreeDef]:
        """``tree``'s leaves (copies of its numpy arrays when the step updates in place)."""
        leaves, tdef = flatten(tree)
        if self.in_place:
            leaves = [_line_aligned_copy(x) if hasattr(x, "copy") and hasattr(x, "flags") else x
                      for x in leaves]
        return leaves, tdef

    def _tree(self, which: int) -> Any:
        if self._trees is None:
            self._trees = (unflatten(self._p_def, list(self._p_leaves)),
                           unflatten(self._s_def, list(self._s_leaves)))
        return self._trees[which]

    def __call__(self, *batch: Any) -> float:
        nd = self._ndarray
        if self._leaves_ok and nd is not None:
            for x in batch:
                if type(x) is not nd:
                    break
            else:  # the per-step path: outputs of the expected shape skip _take's checks
                # (the module stubbed out, SCHED_FIFO: 0.94 against 1.31 us a step in Python;
                # 0.77 through _keep against 0.69 with a copy of it inline, not worth a copy)
                outs = self.jitted(*self._lead, *batch)
                if type(outs) is tuple and len(outs) == 1 + len(self._lead):
                    return self._keep(outs, True)
                return self._take(outs)
        flat = (*self._lead, *batch)
        if not self._fast(flat):
            outs = self.executable(*flat)
        elif self.jitted is not None:
            outs = self.jitted(*flat)  # a hit on the one specialization
        else:
            # every argument already is what check_args/_to_host would produce: skip both
            outs = self.executable.program.run(flat, self.executable.params)
        return self._take(outs)

    async def run_async(self, *batch: Any) -> float:
        """``step(*batch)`` for code that can await: in a browser (Pyodide) the WebGPU target
        reads its results back asynchronously (see ``Executable.run_async``)."""
        return self._take(await self.executable.run_async(*self._lead, *batch))

    def _take(self, outs: Any) -> float:
        """Keep a step's new leaves; record and return its loss."""
        if type(outs) is not tuple:
            outs = tuple(outs) if isinstance(outs, list) else (outs,)
        fresh = self._leaves_ok or self._outputs_keep_types(outs, len(self._lead))
        return self._keep(outs, fresh)

    def _keep(self, outs: tuple[Any, ...], fresh: bool) -> float:
        """Keep the new leaves of a step's outputs (loss, *parameters, *state); record and
        return its loss. ``fresh``: the leaves are of the compiled types (``_leaves_ok``)."""
        self._lead = outs[1:1 + len(self._lead)]
        self._trees, self._leaves_ok = None, fresh
        self.steps += 1
        try:
            loss = float(outs[0])
        except TypeError:  # a HostArray where there is no numpy (Pyodide): its one value
            loss = float(outs[0].values[0])
        self.losses.append(loss)
        return loss

    def _fast(self, flat: tuple[Any, ...]) -> bool:
        """Are all arguments C-contiguous numpy arrays of exactly the compiled type?

        Once the leaves are outputs of an earlier step of the same types, only the batch is
        checked."""
        specs = self._specs
        if specs is None:
            try:
                import numpy as np
            except ImportError:
                return False
            specs = self._specs = (np, [(t.shape, np.dtype(dt.to_numpy_name(t.dtype)))
                                        for t in self.executable.input_types])
        np, want = specs
        if len(flat) != len(want):
            return False
        skip = len(self._lead) if self._leaves_ok else 0
        for x, (shape, dtype) in zip(flat[skip:], want[skip:], strict=True):
            if (type(x) is not np.ndarray or x.dtype != dtype or x.shape != shape
                    or not x.flags.c_contiguous):
                return False
        return True

    def _outputs_keep_types(self, outs: tuple[Any, ...], leaves: int) -> bool:
        """Are the new leaves exactly the compiled input types (so later steps skip them)?"""
        if self._specs is None or len(outs) < 1 + leaves:
            return False
        np, want = self._specs
        return all(type(x) is np.ndarray and x.dtype == dtype and x.shape == shape
                   and x.flags.c_contiguous
                   for x, (shape, dtype) in zip(outs[1:1 + leaves], want[:leaves], strict=True))

    @property
    def graph(self) -> Graph:
        return self.executable.hir

    def __repr__(self) -> str:
        return f"CompiledStep({self.executable.name!r}, steps={self.steps})"


def compile_step(loss_fn: Callable[..., Any], optimizer: Any, params: Any, *batch: Any,
                 target: str = "numpy", in_place: bool = False,
                 **options: Any) -> CompiledStep:
    """Compile ``loss_fn(params, *batch)``'s training step for ``target`` (one executable).

    On a target with a specialization cache module (``cpu``) the step is jitted: the same
    one program, called through the module.

    ``in_place=True`` (cpu; as PyTorch's SGD): the step owns its parameter and optimizer
    state arrays and may write a new leaf over the old one instead of into a fresh array
    (the jit's ``donate``, rlx_core/runtime/donation.py). Where the compiler proves that
    safe: an SGD weight update ``W - lr * dW`` stored from the weight gradient's GEMM tiles
    in one KC slice, after every other kernel that reads W; other leaves come back as new
    arrays. The values are the same bits either way. The arrays given (``params``, or
    assigned to ``step.params`` / ``step.state``) are copied first and never written, but
    arrays read from ``step.params`` or ``step.state`` earlier are overwritten by the next
    step: copy them to keep them. Other targets ignore it."""
    import rlx_core.api as api

    state = optimizer.init(params)
    p_leaves, p_def = flatten(params)
    s_leaves, s_def = flatten(state)
    fn = step_function(loss_fn, optimizer, p_def, s_def, len(p_leaves), len(s_leaves))
    if target in api.SCM_TARGETS:
        if in_place:  # the parameter and state leaves: the graph's first inputs
            options = {**options, "donate": tuple(range(len(p_leaves) + len(s_leaves)))}
        jitted = api.JitFunction(fn, target, dict(options))
        exe = jitted.lookup(*p_leaves, *s_leaves, *batch)
        return CompiledStep(exe, params, state, jitted=jitted, in_place=in_place)
    exe = api.compile(fn, *p_leaves, *s_leaves, *batch, target=target, **options)
    return CompiledStep(exe, params, state)
