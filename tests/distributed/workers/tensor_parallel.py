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

if "gpt" in what:
    # a GPT-style block (causal attention + GELU MLP): forward and the gradients of a loss
    from rlx_core.distributed import auto_plan
    from tests.distributed.gpt_block import NAMES, gpt_block, init_block

    heads, width, hidden = 4, 16, 32
    ws = init_block(width, hidden, seed=2)
    x = np.random.default_rng(3).standard_normal((2, 6, width)).astype(np.float32)
    block = gpt_block(heads)
    g = rlx.trace(block, x, *ws)
    plan = auto_plan(g)
    assert plan == TensorParallelPlan(column=("wq", "wk", "wv", "w1"), row=("wo", "w2")), plan
    prog = partition(g, plan, r, n)
    prog.check_ranks(comm)
    ops = [nd.op for nd in prog.graph.nodes]
    assert ops.count("all_reduce") == 2 and ops.count("replicate") == 2, ops  # one per block
    want = rlx.compile(block, x, *ws, target="numpy")(x, *ws)
    got = rlx.compile(prog.graph, *prog.local_inputs(x, *ws), target="numpy")(
        *prog.local_inputs(x, *ws))
    worst = float(np.max(np.abs(got - want)))
    assert worst <= 1e-5, worst

    def loss(x, *w):
        return (block(x, *w) ** 2).mean()

    lg = rlx.trace(loss, x, *ws)
    lprog = partition(lg, auto_plan(lg), r, n)
    names = [v.name for v in lprog.graph.inputs]
    local = lprog.local_inputs(x, *ws)
    out = rlx.compile(with_gradients(lprog.graph, names), *local, target="numpy")(*local)
    def loss_and_grads(*a):
        value, grads = rlx.value_and_grad(loss, argnums=tuple(range(len(a))))(*a)
        return (value, *grads)

    ref = rlx.compile(loss_and_grads, x, *ws, target="numpy")(x, *ws)
    ref_loss, ref_grads = ref[0], ref[1:]
    assert abs(float(out[0]) - float(ref_loss)) <= 1e-5, (out[0], ref_loss)
    gworst = 0.0
    for name, grad, want_g in zip(["x", *NAMES], out[1:], ref_grads, strict=True):
        axis = lprog.input_axes[lprog.graph.inputs[["x", *NAMES].index(name)].name]
        full = grad if axis is None else gather(grad, axis)
        gworst = max(gworst, float(np.max(np.abs(full - want_g))))
    assert gworst <= 1e-5, gworst
    print(f"rank {r}/{n}: GPT block TP={n} ({heads // n} heads per rank, causal) vs 1 process: "
          f"max |diff| = {worst:.3g}, gradients {gworst:.3g}", flush=True)
