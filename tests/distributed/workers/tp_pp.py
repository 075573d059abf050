"""Worker (4 ranks): tensor and pipeline parallelism combined, TP=2 x PP=2.

World rank w runs pipeline stage w // 2 and tensor-parallel shard w % 2. The MLP 12-32-32-16-5
(relu between layers) is cut into two stages of a Megatron pair each (fc1 column- and fc2
row-parallel; fc3 column- and fc4 row-parallel). Each stage's collectives (``replicate``,
``all_reduce``) run on its TP group's communicator, the pipeline's send/recv on the PP group
of equal TP shards. 10 SGD steps of 1F1B over 4 micro-batches equal single-process training
within 1e-6 (the shards gathered over the TP group)."""

import numpy as np

import rlx_core as rlx
import rlx_core.distributed as D
import rlx_core.frontend.nn as nn
from rlx_core.distributed import Communicator, init
from rlx_core.distributed.collective_exec import use_communicator
from rlx_core.distributed.pipeline import PipelineStep
from rlx_core.distributed.tensor_parallel import shard_array
from rlx_core.models.mlp import cross_entropy, init_mlp, mlp_loss

world = init(timeout=120)
assert world.size == 4, "launch on 4 ranks"
tp_size = 2
stage, shard = divmod(world.rank, tp_size)
tp = Communicator(world.comm.Split(color=stage, key=shard), timeout=120)
pp = Communicator(world.comm.Split(color=shard, key=stage), timeout=120)
sizes, batch, micro, steps, lr = (12, 32, 32, 16, 5), 16, 4, 10, 0.1
params = init_mlp(sizes, seed=4)
pairs = [("fc1", "fc2"), ("fc3", "fc4")]


def local(col: str, row: str) -> dict:
    """This shard's part of a Megatron pair: column layer rows, row layer columns."""
    c, r = params[col], params[row]
    return {col: {"weight": shard_array(c["weight"], 0, shard, tp_size),
                  "bias": shard_array(c["bias"], 0, shard, tp_size)},
            row: {"weight": shard_array(r["weight"], 1, shard, tp_size), "bias": r["bias"]}}


def stage_fn(col: str, row: str, last: bool):
    def run(p, h):
        h = D.replicate(h, ranks=tp_size)  # f: the stage input is replicated over the group
        h = nn.relu(nn.linear(h, p[col]["weight"], p[col]["bias"]))
        h = D.all_reduce(nn.linear(h, p[row]["weight"]), ranks=tp_size) + p[row]["bias"]  # g
        return h if last else nn.relu(h)
    return run


fns = [stage_fn(c, r, i == len(pairs) - 1) for i, (c, r) in enumerate(pairs)]
with use_communicator(tp):
    step = PipelineStep(fns, [local(c, r) for c, r in pairs], cross_entropy,
                        np.zeros((batch, sizes[0]), np.float32), np.zeros(batch, np.int32),
                        lr=lr, micro=micro, kind="1f1b", comm=pp)
ref = rlx.optim.compile_step(mlp_loss, rlx.optim.SGD(lr=lr), params,
                             np.zeros((batch, sizes[0]), np.float32), np.zeros(batch, np.int32))
rng = np.random.default_rng(12)
for s in range(steps):
    x = rng.standard_normal((batch, sizes[0])).astype(np.float32)
    y = rng.integers(0, sizes[-1], batch).astype(np.int32)
    with use_communicator(tp):
        loss = step(x, y)
    ref_loss = ref(x, y)
    if loss is not None:
        assert abs(loss - float(ref_loss)) < 1e-5, (s, loss, ref_loss)
mine = step.stage_params()
col, row = pairs[stage]
full = {col: {"weight": tp.all_gather(mine[col]["weight"]).reshape(-1, sizes[2 * stage]),
              "bias": tp.all_gather(mine[col]["bias"]).reshape(-1)},
        row: {"weight": np.concatenate(list(tp.all_gather(mine[row]["weight"])), axis=1),
              "bias": mine[row]["bias"]}}
worst = max(float(np.max(np.abs(full[k][w] - ref.params[k][w]))) for k in full
            for w in ("weight", "bias"))
moved = max(float(np.max(np.abs(ref.params[k]["weight"] - params[k]["weight"]))) for k in full)
assert moved > 1e-3 and worst <= 1e-6, (worst, moved)
print(f"rank {world.rank}/4: TP=2 x PP=2 (stage {stage}, shard {shard}) 1f1b over {micro} "
      f"micro-batches vs 1 process after {steps} steps: max |dparam| = {worst:.3g}", flush=True)
