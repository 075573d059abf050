"""Worker (2+ ranks): a fault in the middle of tensor-, pipeline- or data-parallel training.

    fault_parallel.py KIND MODE [TOKEN]   KIND: tp | pp | dp
                                          MODE: kill | hang | raise | mismatch | none

The last rank fails at step 3 (``kill``: SIGKILLs itself; ``hang``: sleeps; ``raise``:
raises); it prints the wall-clock time first, and every rank that gets a raised typed error
prints it with the wall-clock time. ``mismatch``: the last rank builds another program (TP:
another batch size, so another graph; PP: another hidden width, so other stage shapes), which
the start-up check refuses on every rank. ``none`` runs all steps. The deadline comes from
$RLX_DIST_TIMEOUT; TOKEN only marks the processes (the test looks for leftovers by it).
"""

import os
import signal
import sys
import time

import numpy as np

import rlx_core as rlx
import rlx_core.frontend.nn as nn
from rlx_core.distributed import (
    TensorParallelPlan,
    data_parallel_step,
    init,
    partition,
    shard_batch,
    with_gradients,
)
from rlx_core.distributed.pipeline import PipelineStep, split_layers
from rlx_core.errors import RlxError
from rlx_core.models.mlp import cross_entropy, init_mlp, mlp_loss

kind, mode = sys.argv[1], sys.argv[2]
comm = init()
r, n = comm.rank, comm.size
victim, fault_step, steps = n - 1, 3, 8
odd = mode == "mismatch" and r == victim
sizes, batch = ((8, 12, 4) if odd and kind == "pp" else (8, 16, 4)), (4 if odd and kind == "tp" else 8)
params = init_mlp(sizes, seed=0)
rng = np.random.default_rng(0)
xs = rng.standard_normal((steps, batch, sizes[0])).astype(np.float32)
ys = rng.integers(0, sizes[-1], (steps, batch)).astype(np.int32)


def build():
    global mine
    if kind == "tp":
        def loss(w1, b1, w2, b2, x, y):
            return mlp_loss({"fc1": {"weight": w1, "bias": b1},
                             "fc2": {"weight": w2, "bias": b2}}, x, y)

        flat = [params["fc1"]["weight"], params["fc1"]["bias"], params["fc2"]["weight"],
                params["fc2"]["bias"]]
        prog = partition(rlx.trace(loss, *flat, xs[0], ys[0]),
                         TensorParallelPlan(column=("*fc1",), row=("*fc2",)), r, n)
        prog.check_ranks(comm)
        local = prog.local_inputs(*flat, xs[0], ys[0])
        exe = rlx.compile(with_gradients(prog.graph, [v.name for v in prog.graph.inputs[:4]]),
                          *local, target="numpy")
        mine = [np.array(a) for a in local[:4]]

        def step(s):
            global mine
            out = exe(*mine, xs[s], ys[s])
            mine = [(p - np.float32(0.1) * g).astype(np.float32) for p, g in zip(mine, out[1:], strict=True)]
    elif kind == "pp":
        names = ["fc1", "fc2"]

        def stage_fn(layers):
            def run(p, h):
                for name in layers:
                    h = nn.linear(h, p[name]["weight"], p[name]["bias"])
                    if name != names[-1]:
                        h = nn.relu(h)
                return h
            return run

        ranges = split_layers([1.0] * len(names), n, by="block")
        stages = [[names[i] for i in rg] for rg in ranges]
        pipe = PipelineStep([stage_fn(s) for s in stages], [{k: params[k] for k in s} for s in stages],
                            cross_entropy, xs[0], ys[0], lr=0.1, micro=2, kind="1f1b", comm=comm)

        def step(s):
            pipe(xs[s], ys[s])
    else:
        dp = data_parallel_step(mlp_loss, rlx.optim.SGD(lr=0.1), params, shard_batch(xs[0], r, n),
                                shard_batch(ys[0], r, n), target="numpy")

        def step(s):
            dp(shard_batch(xs[s], r, n), shard_batch(ys[s], r, n))

    return step


try:
    step = build()
    for s in range(steps):
        if r == victim and s == fault_step and mode in ("kill", "hang", "raise"):
            print(f"rank {r}: {mode} at step {s} t={time.time():.3f}", flush=True)
            if mode == "hang":
                time.sleep(3600)
            elif mode == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            else:
                raise RuntimeError(f"rank {r} failed on purpose")
        step(s)
except RlxError as err:
    print(f"rank {r}: typed error {err.code} t={time.time():.3f}: {err.message}", flush=True)
    raise
print(f"rank {r}/{n}: {kind} finished {steps} steps", flush=True)
