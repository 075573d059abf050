"""Worker (2 or 4 ranks): tensor parallelism against single-process runs.

``mlp``: the MLP trained 10 SGD steps with fc1 column- and fc2 row-parallel; the gathered
parameters equal single-process training within 1e-6. ``minilm``: all-MiniLM-L6-v2 with
Megatron's BERT plan; the embeddings equal the single-process ones within 1e-5."""

import sys

import numpy as np

import rlx_core as rlx
import rlx_core.distributed as D
from rlx_core.distributed.tensor_parallel import (
    TensorParallelPlan,
    bert_plan,
    partition,
    with_gradients,
)

comm = D.init(timeout=120)
r, n = comm.rank, comm.size
what = sys.argv[1:] or ["mlp", "minilm"]


def gather(local, axis):
    return D.all_gather(np.ascontiguousarray(local), axis=axis)


if "mlp" in what:
    from rlx_core.models.mlp import init_mlp, mlp_loss

    sizes, batch, steps, lr = (12, 16, 5), 8, 10, 0.1
    params = init_mlp(sizes, seed=1)
    rng = np.random.default_rng(7)
    xs = rng.standard_normal((steps, batch, sizes[0])).astype(np.float32)
    ys = rng.integers(0, sizes[-1], (steps, batch)).astype(np.int32)

    def loss(w1, b1, w2, b2, x, y):
        return mlp_loss({"fc1": {"weight": w1, "bias": b1},
                         "fc2": {"weight": w2, "bias": b2}}, x, y)

    flat = [params["fc1"]["weight"], params["fc1"]["bias"], params["fc2"]["weight"],
            params["fc2"]["bias"]]
    g = rlx.trace(loss, *flat, xs[0], ys[0])
    prog = partition(g, TensorParallelPlan(column=("*fc1",), row=("*fc2",)), r, n)
    ops = [nd.op for nd in prog.graph.nodes]
    assert ops.count("all_reduce") == 1 and ops.count("replicate") == 1, ops
    wrt = [v.name for v in prog.graph.inputs[:4]]
    local = prog.local_inputs(*flat, xs[0], ys[0])
    step = rlx.compile(with_gradients(prog.graph, wrt), *local)
    ref = rlx.optim.compile_step(mlp_loss, rlx.optim.SGD(lr=lr), params, xs[0], ys[0])
    mine = [np.array(a) for a in local[:4]]
    for s in range(steps):
        out = step(*mine, xs[s], ys[s])
        mine = [(p - np.float32(lr) * gr).astype(np.float32) for p, gr in zip(mine, out[1:], strict=False)]
        ref_loss = ref(xs[s], ys[s])
        assert abs(float(out[0]) - float(ref_loss)) < 1e-5, (s, out[0], ref_loss)
    full = [gather(mine[0], 0), gather(mine[1], 0), gather(mine[2], 1), mine[3]]
    want = [ref.params["fc1"]["weight"], ref.params["fc1"]["bias"],
            ref.params["fc2"]["weight"], ref.params["fc2"]["bias"]]
    worst = max(float(np.max(np.abs(a - b))) for a, b in zip(full, want, strict=False))
    moved = float(np.max(np.abs(want[0] - flat[0])))
    assert moved > 1e-3 and worst <= 1e-6, (worst, moved)
    print(f"rank {r}/{n}: MLP TP={n} vs 1 process after {steps} steps: max |dparam| = "
          f"{worst:.3g} (moved {moved:.3g})", flush=True)

if "minilm" in what:
    from rlx_core.models.minilm import MiniLM

    model = MiniLM.load()
    ids, mask, types = model.tokenize(["tensor parallel rlx", "a second, longer sentence here"])
    fn = model.encode_fn()
    # the single-process embeddings, computed once (rank 0) and broadcast
    want = (rlx.compile(fn, ids, mask, types, target="numpy")(ids, mask, types) if r == 0
            else np.zeros((len(ids), model.config.hidden_size), np.float32))
    want = D.broadcast(np.ascontiguousarray(want, np.float32), root=0)
    g = rlx.trace(fn, ids, mask, types)
    prog = partition(g, bert_plan(), r, n)
    ops = [nd.op for nd in prog.graph.nodes]
    layers = model.config.num_hidden_layers
    # one all-reduce per attention block and per FFN block, in the forward pass
    assert ops.count("all_reduce") == 2 * layers and ops.count("replicate") == 2 * layers, ops
    got = rlx.compile(prog.graph, ids, mask, types, target="numpy")(ids, mask, types)
    worst = float(np.max(np.abs(got - want)))
    assert worst <= 1e-5, worst
    heads = model.config.num_attention_heads // n
    print(f"rank {r}/{n}: MiniLM TP={n} ({heads} heads per rank) vs 1 process: max |diff| = "
          f"{worst:.3g}, {ops.count('all_reduce')} all-reduces", flush=True)
