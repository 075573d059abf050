"""Pipeline parallelism: stages on consecutive ranks, micro-batches, GPipe and 1F1B schedules.

    stages = split_layers(costs, ranks, by="cost")         # contiguous layer ranges
    step = PipelineStep(stage_fns, params, loss_fn, ...)    # this rank compiles its stage only
    loss = step(x, y)                                       # one training step (SGD update)
    infer = PipelineInference(stage_fns, params, x, micro=4)
    out = infer(x)                                          # the last stage: the outputs

Rank s runs stage s. A step cuts the batch into ``micro`` micro-batches and runs this rank's
list of actions (``schedule``): ``F i`` (receive micro-batch i's activation from stage s-1,
run the stage, send the result to s+1) and ``B i`` (receive the cotangent of that result from
s+1, run the stage's backward, send the input's cotangent to s-1). The backward recomputes the
stage's forward from the saved input (activation recomputation: a stage keeps one input per
micro-batch in flight, never its intermediate values). Gradients of the micro-batches are
summed, scaled by 1/micro (each micro-batch loss is a mean over its rows), so the update is
the full batch's.

Inference runs the forward actions only (``F 0 .. F m-1``: GPipe and 1F1B are the same
schedule without backwards); the last stage joins the micro-batches' outputs.

Sends are non-blocking (completed, with the deadline, at the end of the step) and receives
wait with the deadline, so no schedule deadlocks and a dead peer is RLX-N001, not a hang.
Every action is timed: ``step.timeline`` feeds the bubble measurement and the explorer
(``timeline=`` / ``$RLX_DIST_TIMELINE``: rank 0 writes every rank's spans to a file after
each step, distributed/timeline.py).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from rlx_core.distributed.communicator import Communicator, init
from rlx_core.distributed.deadline import wait_all
from rlx_core.distributed.errors import PipelineError

SCHEDULES = ("gpipe", "1f1b")
_FWD_TAG, _BWD_TAG = 1 << 12, 2 << 12  # + micro-batch index


def schedule(kind: str, stage: int, stages: int, micro: int) -> list[tuple[str, int]]:
    """Stage ``stage``'s actions for one step: ("F", i) / ("B", i) in execution order.

    GPipe: every forward, then every backward. 1F1B: ``stages - stage - 1`` warm-up forwards,
    then one forward and one backward alternately, then the remaining backwards; a stage then
    holds at most ``stages - stage`` micro-batches' inputs instead of ``micro``."""
    if kind not in SCHEDULES:
        raise PipelineError(f"unknown pipeline schedule {kind!r}",
                            hint=f"use one of {', '.join(SCHEDULES)}")
    if kind == "gpipe":
        return [("F", i) for i in range(micro)] + [("B", i) for i in range(micro)]
    warm = min(stages - stage - 1, micro)
    acts = [("F", i) for i in range(warm)]
    for i in range(micro - warm):
        acts += [("F", warm + i), ("B", i)]
    return acts + [("B", i) for i in range(micro - warm, micro)]


def ideal_bubble(stages: int, micro: int) -> float:
    """The idle fraction of a GPipe/1F1B step with equal stage times: (p-1)/(m+p-1)."""
    return (stages - 1) / (micro + stages - 1)


def split_layers(costs: Sequence[float], stages: int, by: str = "cost") -> list[range]:
    """Contiguous layer ranges, one per stage: ``by="block"`` equal layer counts,
    ``by="cost"`` the split that minimises the most expensive stage (``costs`` per layer,
    e.g. its flops)."""
    n = len(costs)
    if not 1 <= stages <= n:
        raise PipelineError(f"{n} layer(s) cannot fill {stages} pipeline stages",
                            hint="use at most one stage per layer")
    if by == "block":
        cuts = [round(k * n / stages) for k in range(stages + 1)]
        return [range(a, b) for a, b in zip(cuts[:-1], cuts[1:], strict=True)]
    if by != "cost":
        raise PipelineError(f"unknown stage split {by!r}", hint="use 'block' or 'cost'")
    prefix = [0.0]
    for c in costs:
        prefix.append(prefix[-1] + float(c))
    inf = float("inf")
    # best[k][j]: the least max-stage cost of layers [0, j) in k stages; cut[k][j]: last cut
    best = [[inf] * (n + 1) for _ in range(stages + 1)]
    cut = [[0] * (n + 1) for _ in range(stages + 1)]
    best[0][0] = 0.0
    for k in range(1, stages + 1):
        for j in range(k, n + 1):
            for i in range(k - 1, j):
                v = max(best[k - 1][i], prefix[j] - prefix[i])
                if v < best[k][j]:
                    best[k][j], cut[k][j] = v, i
    bounds, j = [], n
    for k in range(stages, 0, -1):
        bounds.append(range(cut[k][j], j))
        j = cut[k][j]
    return bounds[::-1]


def _boundaries(stage_fns: Sequence[Callable[..., Any]], params: Sequence[Any], x: Any,
                micro: int) -> list[tuple[tuple[int, ...], Any]]:
    """(shape, dtype) of every stage's input at micro-batch size, then the last output: each
    rank traces every stage, so the text of these says whether the ranks run one model."""
    import numpy as np

    from rlx_core.autodiff.pytree import flatten, unflatten
    from rlx_core.frontend.tracer import trace
    from rlx_core.ir.dtypes import to_numpy_name

    if len(x) % micro:
        raise PipelineError(f"a batch of {len(x)} rows does not split into {micro} "
                            "micro-batches", hint=f"use a batch divisible by {micro}")
    specs = [((len(x) // micro, *np.shape(x)[1:]), np.asarray(x).dtype)]
    for fn, p in zip(stage_fns, params, strict=True):
        ls, td = flatten(p)
        out = trace(lambda *a, fn=fn, td=td: fn(unflatten(td, list(a[:-1])), a[-1]),
                    *ls, np.zeros(*specs[-1])).output_types()[0]
        specs.append((out.shape, np.dtype(to_numpy_name(out.dtype))))
    return specs


def _describe(specs: list[tuple[tuple[int, ...], Any]]) -> str:
    import numpy as np

    return " -> ".join(f"{np.dtype(d).name}{list(shp)}" for shp, d in specs)


@dataclass(frozen=True)
class Event:
    """One timed action of a rank: ``kind`` F/B, micro-batch, start and end (seconds from the
    step's start, which a barrier aligns across ranks)."""

    rank: int
    kind: str
    micro: int
    start: float
    end: float


class _Stage:
    """What a rank's pipeline stage does in training and inference alike: timed actions,
    activations sent and received with the deadline."""

    comm: Communicator
    timeline: list[Event]
    step_time: float

    def bubble(self) -> float:
        """This rank's measured idle fraction of the last step: 1 - busy / step time."""
        busy = sum(e.end - e.start for e in self.timeline)
        return 1.0 - busy / self.step_time

    def _isend(self, buf: Any, peer: int, tag: int) -> Any:
        return self.comm.comm.Isend(buf, dest=peer, tag=tag)

    def _recv(self, spec: tuple[tuple[int, ...], Any], peer: int, tag: int) -> Any:
        import numpy as np

        return self.comm.recv(np.empty(spec[0], dtype=spec[1]), peer, tag)


class PipelineStep(_Stage):
    """One rank's stage of a pipeline-parallel training step (plain SGD with ``lr``).

    ``stage_fns[s](params_s, h) -> h``; the last stage's output goes to
    ``loss_fn(out, labels)``. ``params[s]`` are stage s's parameters (a pytree); this rank
    keeps and updates only its own. ``x``/``labels`` are examples of one *full* batch."""

    def __init__(self, stage_fns: Sequence[Callable[..., Any]], params: Sequence[Any],
                 loss_fn: Callable[[Any, Any], Any], x: Any, labels: Any, *, lr: float,
                 micro: int, kind: str = "1f1b", comm: Communicator | None = None,
                 target: str = "numpy", timeline: str | None = None):
        import numpy as np

        import rlx_core.api as api
        from rlx_core.autodiff.api import value_and_grad
        from rlx_core.autodiff.pytree import flatten, unflatten
        from rlx_core.distributed.timeline import timeline_path

        self.comm = init() if comm is None else comm
        self.stages, self.stage = len(stage_fns), self.comm.rank
        if self.stages != self.comm.size:
            raise PipelineError(f"{self.stages} pipeline stages on {self.comm.size} ranks",
                                hint="run one stage per rank (mpiexec -n <stages>)")
        self.micro, self.kind, self.lr = micro, kind, lr
        self.actions = schedule(kind, self.stage, self.stages, micro)
        rows = len(x) // micro
        # the activations between stages: trace the stages in order at micro-batch shape
        specs = _boundaries(stage_fns, params, x, micro)
        self.in_spec, self.out_spec = specs[self.stage], specs[self.stage + 1]
        bounds = _describe(specs)
        self.comm.check_same("the pipeline", f"{kind} x{micro} micro-batches, {self.stages} "
                             f"stages: {bounds}; labels {np.asarray(labels).dtype.name}"
                             f"{list(np.shape(labels))}")
        leaves, self._tdef = flatten(params[self.stage])
        self.params = [np.ascontiguousarray(p) for p in leaves]
        n = len(self.params)
        fn, tdef = stage_fns[self.stage], self._tdef
        h0 = np.zeros(*self.in_spec)
        if self.stage == self.stages - 1:
            def backward(*flat: Any) -> Any:
                p = unflatten(tdef, list(flat[:n]))
                loss, (gp, gh) = value_and_grad(
                    lambda pp, hh: loss_fn(fn(pp, hh), flat[n + 1]), argnums=(0, 1))(p, flat[n])
                return (loss, *flatten(gp)[0], gh)

            y0 = np.asarray(labels)[:rows]
            self._bwd = api.compile(backward, *self.params, h0, y0, target=target)
        else:
            def forward(*flat: Any) -> Any:
                return fn(unflatten(tdef, list(flat[:n])), flat[n])

            def backward(*flat: Any) -> Any:  # recomputes the stage from its input
                p, ct = unflatten(tdef, list(flat[:n])), flat[n + 1]
                gp, gh = value_and_grad(lambda pp, hh: (fn(pp, hh) * ct).sum(),
                                        argnums=(0, 1))(p, flat[n])[1]
                return (*flatten(gp)[0], gh)

            self._fwd = api.compile(forward, *self.params, h0, target=target)
            self._bwd = api.compile(backward, *self.params, h0, np.zeros(*self.out_spec),
                                    target=target)
        self.timeline: list[Event] = []
        self.losses: list[float] = []
        self.steps = 0
        # where rank 0 writes each step's measured timeline (``timeline=``, $RLX_DIST_TIMELINE)
        self.timeline_file = timeline_path(timeline)

    def __call__(self, x: Any, labels: Any) -> float | None:
        """One step on the full batch (every rank passes it; stage 0 reads ``x``, the last
        stage ``labels``). Returns the mean loss on the last stage, None elsewhere."""
        import numpy as np

        s, last, first = self.stage, self.stage == self.stages - 1, self.stage == 0
        rows = len(x) // self.micro
        mb = [slice(i * rows, (i + 1) * rows) for i in range(self.micro)]
        saved: dict[int, Any] = {}  # micro-batch -> this stage's input (recomputed from)
        outs: dict[int, Any] = {}
        grads = [np.zeros_like(p) for p in self.params]
        sends: list[Any] = []
        loss_sum = 0.0
        self.comm.barrier()
        t0 = time.perf_counter()
        self.timeline = []
        for kind, i in self.actions:
            if kind == "F":
                h = (np.ascontiguousarray(x[mb[i]]) if first else
                     self._recv(self.in_spec, s - 1, _FWD_TAG + i))
                start = time.perf_counter()
                saved[i] = h
                if not last:
                    outs[i] = np.ascontiguousarray(self._fwd(*self.params, h))
                end = time.perf_counter()
                if not last:
                    sends.append(self._isend(outs.pop(i), s + 1, _FWD_TAG + i))
            else:
                ct = None if last else self._recv(self.out_spec, s + 1, _BWD_TAG + i)
                start = time.perf_counter()
                h = saved.pop(i)
                if last:
                    res = self._bwd(*self.params, h, np.ascontiguousarray(labels[mb[i]]))
                    loss_sum += float(res[0])
                    res = res[1:]
                else:
                    res = self._bwd(*self.params, h, ct)
                for acc, gp in zip(grads, res[:-1], strict=True):
                    acc += gp
                end = time.perf_counter()
                if not first:
                    sends.append(self._isend(np.ascontiguousarray(res[-1]), s - 1,
                                             _BWD_TAG + i))
            self.timeline.append(Event(s, kind, i, start - t0, end - t0))
        wait_all(self.comm.mpi, sends, self.comm.timeout, "pipeline sends", s)
        scale = np.float32(self.lr / self.micro)
        self.params = [(p - scale * g).astype(p.dtype) for p, g in zip(self.params, grads,
                                                                     strict=True)]
        self.step_time = time.perf_counter() - t0
        self.steps += 1
        if self.timeline_file is not None:
            from rlx_core.distributed.timeline import write_timeline

            write_timeline(self, self.timeline_file)
        if last:
            self.losses.append(loss_sum / self.micro)
            return self.losses[-1]
        return None

    def stage_params(self) -> Any:
        from rlx_core.autodiff.pytree import unflatten

        return unflatten(self._tdef, list(self.params))


class PipelineInference(_Stage):
    """One rank's stage of a pipeline-parallel forward pass (inference, no loss, no update).

    Arguments as ``PipelineStep``'s (``x`` an example of one full batch). A call runs
    ``F 0 .. F m-1``: stage s receives micro-batch i from s-1 as soon as s-1 has it, runs it
    and sends it on, so the stages overlap on different micro-batches (the bubble is
    (p-1)/(m+p-1) of a step with equal stage times)."""

    def __init__(self, stage_fns: Sequence[Callable[..., Any]], params: Sequence[Any], x: Any,
                 *, micro: int, comm: Communicator | None = None, target: str = "numpy"):
        import numpy as np

        import rlx_core.api as api
        from rlx_core.autodiff.pytree import flatten, unflatten

        self.comm = init() if comm is None else comm
        self.stages, self.stage = len(stage_fns), self.comm.rank
        if self.stages != self.comm.size:
            raise PipelineError(f"{self.stages} pipeline stages on {self.comm.size} ranks",
                                hint="run one stage per rank (mpiexec -n <stages>)")
        self.micro = micro
        specs = _boundaries(stage_fns, params, x, micro)
        self.in_spec, self.out_spec = specs[self.stage], specs[self.stage + 1]
        self.comm.check_same("the pipeline", f"inference x{micro} micro-batches, "
                             f"{self.stages} stages: {_describe(specs)}")
        leaves, tdef = flatten(params[self.stage])
        self.params = [np.ascontiguousarray(p) for p in leaves]
        n, fn = len(self.params), stage_fns[self.stage]
        self._fwd = api.compile(lambda *flat: fn(unflatten(tdef, list(flat[:n])), flat[n]),
                                *self.params, np.zeros(*self.in_spec), target=target)
        self.timeline = []

    def __call__(self, x: Any) -> Any:
        """The full batch's outputs on the last stage (micro-batches joined in order), None
        elsewhere; every rank passes ``x`` (stage 0 reads it)."""
        import numpy as np

        s, first, last = self.stage, self.stage == 0, self.stage == self.stages - 1
        rows = len(x) // self.micro
        outs, sends = [], []
        self.comm.barrier()
        t0 = time.perf_counter()
        self.timeline = []
        for i in range(self.micro):
            h = (np.ascontiguousarray(x[i * rows:(i + 1) * rows]) if first else
                 self._recv(self.in_spec, s - 1, _FWD_TAG + i))
            start = time.perf_counter()
            out = np.ascontiguousarray(self._fwd(*self.params, h))
            end = time.perf_counter()
            if last:
                outs.append(out)
            else:
                sends.append(self._isend(out, s + 1, _FWD_TAG + i))
            self.timeline.append(Event(s, "F", i, start - t0, end - t0))
        wait_all(self.comm.mpi, sends, self.comm.timeout, "pipeline sends", s)
        self.step_time = time.perf_counter() - t0
        return np.concatenate(outs) if last else None


__all__ = ["SCHEDULES", "schedule", "ideal_bubble", "split_layers", "Event", "PipelineStep",
           "PipelineInference"]
