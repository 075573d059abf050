"""Collectives as IR ops: shape/dtype rules, text form, dispatch, the passes that must not
merge or drop them (one process), and every op run on 2 ranks under mpiexec."""

from __future__ import annotations

import numpy as np
import pytest

import rlx_core as rlx
import rlx_core.distributed as D
from rlx_core.errors import DTypeError, ShapeError
from rlx_core.ir.parser import parse
from rlx_core.ir.printer import print_graph
from tests.distributed.launch import run_ranks

X = np.ones((4, 6), np.float32)


def test_shape_rules_and_the_text_form() -> None:
    def f(x):
        g = D.all_gather(x, axis=1, ranks=2)          # f32[4, 12]
        s = D.reduce_scatter(g, axis=0, ranks=4)      # f32[1, 12]
        return D.broadcast(D.all_reduce(s, "max", ranks=2), root=1, ranks=2)

    g = rlx.trace(f, X)
    assert [n.type.shape for n in g.nodes] == [(4, 12), (1, 12), (1, 12), (1, 12)]
    text = print_graph(g)
    assert 'all_reduce(%1) {op="max", ranks=2}' in text
    assert print_graph(parse(text)) == text


@pytest.mark.parametrize("fn, err, words", [
    (lambda x: D.reduce_scatter(x, axis=1, ranks=4), ShapeError, "does not split into 4"),
    (lambda x: D.all_reduce(x, "prod", ranks=2), ShapeError, "is not one of"),
    (lambda x: D.broadcast(x, root=2, ranks=2), ShapeError, "root=2 is not a rank of 0..1"),
    (lambda x: D.send(x, peer=-1, ranks=2), ShapeError, "peer=-1 is not a rank"),
    (lambda x: D.all_reduce(x > 0, ranks=2), DTypeError, "reduces int or float values"),
    (lambda x: D.all_reduce(x.astype("i32"), "mean", ranks=2), DTypeError, "needs a float"),
    (lambda x: D.all_gather(x, ranks=0), ShapeError, "ranks=0 must be a positive integer"),
])
def test_bad_collectives_are_refused_at_trace_time(fn, err, words) -> None:
    with pytest.raises(err, match=words):
        rlx.trace(fn, X)


def test_dispatch_runs_them_on_numpy_and_names_them_elsewhere() -> None:
    from rlx_core.dispatch.errors import LegalizationError
    from rlx_core.dispatch.legalize import legalize_graph

    g = rlx.trace(lambda x: D.all_reduce(D.replicate(x, ranks=2) * 2.0, ranks=2), X)
    done = legalize_graph(g, "numpy")
    routes = {d.op: d.route for d in done.decisions}
    assert routes["all_reduce"] == routes["replicate"] == "native"
    with pytest.raises(LegalizationError, match="cpu does not claim all_reduce"):
        legalize_graph(g, "cpu")


def test_sends_and_recvs_are_neither_merged_nor_dropped() -> None:
    from rlx_core.passes.base import PassContext
    from rlx_core.passes.cse import CSE
    from rlx_core.passes.dce import DCE

    def f(x):
        D.send(x, peer=1, ranks=2)  # result unused: still sent
        a = D.recv((4, 6), "f32", peer=1, ranks=2)
        b = D.recv((4, 6), "f32", peer=1, ranks=2)  # a second message, not a duplicate
        return a + b

    g = rlx.trace(f, X)
    ctx = PassContext()
    out = DCE().run(CSE().run(g.with_nodes(g.nodes), ctx), ctx)
    assert [n.op for n in out.nodes].count("recv") == 2
    assert [n.op for n in out.nodes].count("send") == 1


def test_gradient_rules_follow_megatron() -> None:
    from rlx_core.autodiff.api import grad_graph

    def f(x):
        return (D.all_reduce(D.replicate(x, ranks=2), ranks=2) ** 2).sum()

    ops = [n.op for n in grad_graph(f, X).nodes]
    # f's backward is an all-reduce, g's backward is the identity: two all_reduces in all
    assert ops.count("all_reduce") == 2 and ops.count("replicate") == 1


def test_every_op_and_its_gradient_on_two_ranks() -> None:
    done = run_ranks(2, "ir_collectives.py")
    assert done.returncode == 0, done.stdout + done.stderr
    for rank in (0, 1):
        assert f"rank {rank}/2: collective IR ops ok" in done.stdout
        assert f"rank {rank}: all_reduce was built for 3 rank(s) but runs on 2" in done.stdout
