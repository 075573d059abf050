"""Worker (2+ ranks): every collective checked against numpy, a rank mismatch detected, and
data-parallel MLP training compared with single-process training on the global batch."""

import numpy as np

import rlx_core as rlx
from rlx_core.distributed import RankMismatchError, data_parallel_step, init, shard_batch
from rlx_core.models.mlp import init_mlp, mlp_loss

comm = init(timeout=30)
r, n = comm.rank, comm.size
everyone = [np.arange(6, dtype=np.float32).reshape(2, 3) * (k + 1) - k for k in range(n)]
mine = everyone[r].copy()
np.testing.assert_array_equal(comm.all_reduce(mine, "sum"), np.sum(everyone, axis=0))
np.testing.assert_allclose(comm.all_reduce(mine, "mean"), np.mean(everyone, axis=0))
np.testing.assert_array_equal(comm.all_reduce(mine, "max"), np.max(everyone, axis=0))
np.testing.assert_array_equal(comm.all_reduce(mine, "min"), np.min(everyone, axis=0))
np.testing.assert_array_equal(mine, everyone[r])  # the input is untouched
inplace = mine.copy()
assert comm.all_reduce(inplace, "sum", out=inplace) is inplace
np.testing.assert_array_equal(inplace, np.sum(everyone, axis=0))
ints = np.array([r, 10 * r], dtype=np.int64)
np.testing.assert_array_equal(comm.all_reduce(ints), [sum(range(n)), 10 * sum(range(n))])
np.testing.assert_array_equal(comm.all_gather(mine), np.stack(everyone))
b = mine.copy()
assert comm.broadcast(b, root=n - 1) is b
np.testing.assert_array_equal(b, everyone[n - 1])
comm.barrier()

# deterministic reduction order: the sum is rank 0 + rank 1 + ... added left to right, so
# its bits are those of that sequential sum on every rank (whatever MPI's algorithm)
import functools  # noqa: E402

rng = np.random.default_rng(5)
terms = [(rng.standard_normal(1000) * 10.0 ** rng.integers(-8, 8, 1000)).astype(np.float32)
         for _ in range(n)]
in_order = functools.reduce(np.add, terms)
comm.deterministic = True
ordered = comm.all_reduce(terms[r], "sum")
assert ordered.tobytes() == in_order.tobytes()
rs = comm.reduce_scatter(terms[r][: 4 * n].copy(), "sum")
assert rs.tobytes() == in_order[4 * r: 4 * r + 4].tobytes()
again = comm.all_reduce(terms[r], "sum")
assert again.tobytes() == ordered.tobytes()
every_rank = comm.all_gather(ordered)
assert all(row.tobytes() == ordered.tobytes() for row in every_rank)
comm.deterministic = False
print(f"rank {r}: deterministic sums equal the sequential sum's bits", flush=True)

comm.check_same("a signature", "same everywhere")
try:
    comm.check_same("parameter shapes", f"fc1.weight f32[{5 if r == 1 else 4}, 8]")
except RankMismatchError as err:
    assert err.code == "RLX-N004" and "f32[4, 8]" in err.message and "f32[5, 8]" in err.message
    print(f"rank {r}: mismatch detected: {err.message}", flush=True)
else:
    raise AssertionError("check_same let different signatures pass")

# data parallel: DP=n on shards == one process on the global batch, after 10 steps
sizes, global_batch, steps = (12, 16, 5), 8 * n, 10
params = init_mlp(sizes, seed=1)
rng = np.random.default_rng(7)
xs = rng.standard_normal((steps, global_batch, sizes[0])).astype(np.float32)
ys = rng.integers(0, sizes[-1], (steps, global_batch)).astype(np.int32)
opt = rlx.optim.SGD(lr=0.1, momentum=0.9)
# buckets of 256 bytes: the MLP's gradients (and the loss) make several all-reduces
dp = data_parallel_step(mlp_loss, opt, params, shard_batch(xs[0], r, n),
                        shard_batch(ys[0], r, n), bucket_bytes=256)
ref = rlx.optim.compile_step(mlp_loss, opt, params, xs[0], ys[0])
for s in range(steps):
    dp_loss = dp(shard_batch(xs[s], r, n), shard_batch(ys[s], r, n))
    ref_loss = ref(xs[s], ys[s])
    assert abs(dp_loss - ref_loss) < 1e-5, (s, dp_loss, ref_loss)
worst = 0.0
for layer in params:
    for name in ("weight", "bias"):
        got, want = dp.params[layer][name], ref.params[layer][name]
        worst = max(worst, float(np.max(np.abs(got - want))))
moved = float(np.max(np.abs(dp.params["fc1"]["weight"] - params["fc1"]["weight"])))
assert moved > 1e-3, "training did not change the parameters"
assert worst <= 1e-6, worst
# the ranks hold the same parameters
same = comm.all_reduce(dp.params["fc2"]["weight"], "max") - comm.all_reduce(
    dp.params["fc2"]["weight"], "min")
assert float(np.max(np.abs(same))) == 0.0
# the all-reduces are inside the compiled step: one all_reduce(mean) node per bucket, in the
# order the buckets are issued, and the runner starts each before the rest of the backward
# pass (a matmul kernel between a bucket's start and the kernel it is waited for)
reduces = [node for node in dp.graph.nodes if node.op == "all_reduce"]
assert len(dp.buckets) >= 2 and [node.name for node in reduces] == [b.value for b in dp.buckets]
assert all(node.a["op"] == "mean" and node.loc.scope == f"dp_bucket{k}"
           for k, node in enumerate(reduces))
kernels = dp.executable.lir.kernels
overlap = dp.executable.program.info["deferred_collectives"]
assert len(overlap) == len(dp.buckets), overlap
start, wait = overlap[0]
assert any(k.kind == "matmul" for k in kernels[start + 1:wait]), (start, wait)
print(f"rank {r}: {len(dp.buckets)} bucketed all_reduce(mean) in the step; the first runs "
      f"across {wait - start - 1} kernels of the backward pass", flush=True)
print(f"rank {r}/{n}: collectives ok; DP={n} vs 1 process after {steps} steps: "
      f"max |dparam| = {worst:.3g} (moved {moved:.3g}), loss {dp.losses[0]:.4f} -> "
      f"{dp.losses[-1]:.4f}", flush=True)
