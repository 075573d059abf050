"""Worker (2 or 4 ranks): the MLP trained 10 SGD steps pipeline-parallel (one stage per
rank, 4 micro-batches, the schedule from argv) equals single-process training within 1e-6;
prints the measured bubble next to (p-1)/(m+p-1). Four ranks get a layer each."""

import sys

import numpy as np

import rlx_core as rlx
import rlx_core.frontend.nn as nn
from rlx_core.distributed import init
from rlx_core.distributed.pipeline import (
    PipelineInference,
    PipelineStep,
    ideal_bubble,
    split_layers,
)
from rlx_core.models.mlp import cross_entropy, init_mlp, mlp_logits, mlp_loss

kind = sys.argv[1] if len(sys.argv) > 1 else "1f1b"
comm = init(timeout=60)
r, n = comm.rank, comm.size
sizes = (12, 32, 16, 5) if n < 4 else (12, 32, 24, 16, 5)[: n + 1]
batch, micro, steps, lr = 16, 4, 10, 0.1
params = init_mlp(sizes, seed=3)
names = sorted(params, key=lambda k: int(k.removeprefix("fc")))
ranges = split_layers([a * b for a, b in zip(sizes[:-1], sizes[1:], strict=False)], n, by="cost")


def stage_fn(layers):
    def run(p, h):
        for name in layers:
            h = nn.linear(h, p[name]["weight"], p[name]["bias"])
            if name != names[-1]:
                h = nn.relu(h)
        return h
    return run


stages = [[names[i] for i in rg] for rg in ranges]
step = PipelineStep([stage_fn(ls) for ls in stages], [{k: params[k] for k in ls} for ls in stages],
                    cross_entropy, np.zeros((batch, sizes[0]), np.float32),
                    np.zeros(batch, np.int32), lr=lr, micro=micro, kind=kind, comm=comm)
ref = rlx.optim.compile_step(mlp_loss, rlx.optim.SGD(lr=lr), params,
                             np.zeros((batch, sizes[0]), np.float32), np.zeros(batch, np.int32))
rng = np.random.default_rng(11)
bubbles = []
for s in range(steps):
    x = rng.standard_normal((batch, sizes[0])).astype(np.float32)
    y = rng.integers(0, sizes[-1], batch).astype(np.int32)
    loss = step(x, y)
    ref_loss = ref(x, y)
    if loss is not None:
        assert abs(loss - float(ref_loss)) < 1e-5, (s, loss, ref_loss)
    bubbles.append(step.bubble())
mine = step.stage_params()
worst = max(float(np.max(np.abs(mine[k][w] - ref.params[k][w]))) for k in mine
            for w in ("weight", "bias"))
assert worst <= 1e-6, worst
moved = max(float(np.max(np.abs(ref.params[k]["weight"] - params[k]["weight"]))) for k in mine)
assert moved > 1e-3, moved
order = " ".join(f"{e.kind}{e.micro}" for e in step.timeline)
print(f"rank {r}/{n}: PP={n} {kind} over {micro} micro-batches, stage {stages[r]}: "
      f"max |dparam| = {worst:.3g} after {steps} steps; schedule {order}; bubble measured "
      f"{np.median(bubbles[1:]):.3f} (ideal {ideal_bubble(n, micro):.3f})", flush=True)

# inference: the forward half, micro-batched through the stages, equals one process's logits
x = rng.standard_normal((batch, sizes[0])).astype(np.float32)
infer = PipelineInference([stage_fn(ls) for ls in stages],
                          [{k: params[k] for k in ls} for ls in stages], x, micro=micro,
                          comm=comm)
got = infer(x)
if r == n - 1:
    want = rlx.compile(lambda a: mlp_logits(params, a), x, target="numpy")(x)
    diff = float(np.max(np.abs(got - want)))
    assert got.shape == want.shape and diff <= 1e-5, diff
    print(f"rank {r}/{n}: PP={n} inference over {micro} micro-batches: max |dlogits| = "
          f"{diff:.3g}", flush=True)
else:
    assert got is None
