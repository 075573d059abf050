"""Small row-wise kernels shared out over the cpu team by blocks of rows, one phase per run
(cpu/row_split.py): which kernels qualify, the arena kept apart inside a run
(plan_arena.hold_through), and the same bits as one thread at any thread count."""

from __future__ import annotations

import numpy as np
import pytest

import rlx_core as rlx
from rlx_core.ir import dtypes as dt
from rlx_core.ir.graph import TensorType
from rlx_core.passes.plan_arena import hold_through
from rlx_core.targets.cpu import row_split
from rlx_core.targets.cpu.target import CpuTarget
from tests.targets.late_thread import team_delay

cpu_ok, cpu_why = CpuTarget().available()
needs_cpu = pytest.mark.skipif(not cpu_ok, reason=f"cpu target unavailable: {cpu_why}")


def test_accesses_of_a_run_are_apart_only_on_the_same_rows() -> None:
    types = {"a": TensorType(dt.f32, (128, 10)), "b": TensorType(dt.i32, (128, 10)),
             "c": TensorType(dt.f32, (128,))}
    region = {"a": ("arena", 0, 0, 5120), "b": ("arena", 0, 0, 5120), "c": ("arena", 0, 0, 512)}

    def acc(v, write, by_row=True):
        return (0, v, region[v], write, by_row)
    # the same bytes, the same bytes per row, both by row: one block's bytes, one thread
    assert row_split._apart(acc("a", False), acc("b", True), 128, types)
    # 4 bytes a row over 40: row 20's sum lands on row 2 of the other value
    assert not row_split._apart(acc("a", False), acc("c", True), 128, types)
    # a value read at any row (a broadcast) under another's write
    assert not row_split._apart(acc("a", False, by_row=False), acc("b", True), 128, types)
    assert row_split._apart(acc("a", False), acc("c", False), 128, types)  # two reads


def test_hold_through_keeps_a_phase_s_values_alive_to_its_end() -> None:
    class K:
        def __init__(self, ins, outs):
            self.inputs, self.outputs = ins, outs

    class G:
        kernels = [K(["x"], ["a"]), K(["a"], ["b"]), K(["b"], ["c"]), K(["c"], ["d"])]
    spans = {"a": (0, 1), "b": (1, 2), "c": (2, 3), "d": (3, 3)}
    hold_through(G(), spans, [(1, 2)])
    assert spans == {"a": (0, 2), "b": (1, 2), "c": (2, 3), "d": (3, 3)}


def _head(x, w1, w2):
    """A layer split over the team, then a 10-class head of small row-wise kernels."""
    h = rlx.nn.relu(x @ w1)
    z = h @ w2
    p = rlx.nn.log_softmax(z)
    q = (p * 2.0 + 1.0).exp()
    return p, q.sum(axis=1), q.sum(axis=0)


def _inputs(rows: int = 256):
    rng = np.random.default_rng(7)
    return (rng.standard_normal((rows, 256), np.float32),
            (rng.standard_normal((256, 128)) * 0.1).astype(np.float32),
            (rng.standard_normal((128, 10)) * 0.3).astype(np.float32))


def _reference(x, w1, w2):
    h = np.maximum(x.astype(np.float64) @ w1, 0)
    z = h @ w2
    p = z - z.max(1, keepdims=True)
    p = p - np.log(np.exp(p).sum(1, keepdims=True))
    q = np.exp(p * 2 + 1)
    return p, q.sum(1), q.sum(0)


@needs_cpu
def test_a_head_of_row_kernels_runs_by_rows_with_the_bits_of_one_thread(threads, monkeypatch
                                                                         ) -> None:
    """The log_softmax and the elementwise and row sum after it are one run claimed by
    blocks of 64 rows; the column sum (over rows) stays serial. 1, 2 and 3 threads, a late
    worker or a late thread 0, and the build without row splitting give the same bits."""
    args = _inputs()
    threads(2)
    exe = rlx.compile(_head, *args, target="cpu", record=False)
    src = exe.program.info["source"]
    assert "rlx_r0 = (int64_t)rlx_c * 64" in src  # a run of blocks of 64 rows
    for got, want in zip(exe(*args), _reference(*args), strict=True):
        np.testing.assert_allclose(got, want, rtol=2e-4, atol=2e-4)
    outs = {}
    for n in (1, 2, 3):
        threads(n)
        outs[n] = exe(*args)
    delay = team_delay(exe, threads)
    for tid in (0, 1):
        delay(tid, 20_000)
        outs[f"late{tid}"] = exe(*args)
    monkeypatch.setenv("RLX_ROW_SPLIT", "0")
    threads(2)
    plain = rlx.compile(_head, *args, target="cpu", record=False)
    assert "rlx_r0" not in plain.program.info["source"]
    want = plain(*args)
    for n, got in outs.items():
        assert all(np.array_equal(a, b) for a, b in zip(got, want, strict=True)), n


@needs_cpu
def test_small_runs_odd_rows_and_single_threads_stay_serial(threads, monkeypatch) -> None:
    """Under MIN_WORK written elements a run is not shared out; a run of rows that do not
    fill two blocks neither; a program that splits nothing else has no team at all."""
    threads(2)
    x, w1, w2 = _inputs(rows=160)  # 160 rows: blocks of 64, 64 and 32
    exe = rlx.compile(_head, x, w1, w2, target="cpu", record=False)
    assert "rlx_r1 = rlx_r0 + 64 < 160" in exe.program.info["source"]
    for got, want in zip(exe(x, w1, w2), _reference(x, w1, w2), strict=True):
        np.testing.assert_allclose(got, want, rtol=2e-4, atol=2e-4)
    # 96 rows: the run (h @ w2's GEMM and the head) writes 96 x 10 x 3 + 96 elements, under
    # a MIN_WORK of 4096; 64 rows: one block
    for rows, least in ((96, 4096), (64, row_split.MIN_WORK)):
        monkeypatch.setattr(row_split, "MIN_WORK", least)
        exe = rlx.compile(_head, *_inputs(rows=rows), target="cpu", record=False)
        src = exe.program.info["source"]
        assert "rlx_team_take" in src and "rlx_r0" not in src, rows

    def tiny(z):  # nothing to split: no region, no row blocks
        return rlx.nn.log_softmax(z)
    z = np.ones((128, 10), np.float32)
    exe = rlx.compile(tiny, z, target="cpu", record=False)
    assert "rlx_r0" not in exe.program.info["source"]


def test_row_inputs_refuse_what_is_not_row_wise() -> None:
    """A reduction over the leading axis, a softmax over it and a transpose read other rows;
    a column-order reduction has no row bounds."""
    from rlx_core.ir.graph import Kernel, Node, Value

    f32 = dt.f32

    def t(*shape):
        return TensorType(f32, shape)

    def kern(kind, node, ins):
        return Kernel("k", kind, (node,), tuple(ins), (node.name,))
    types = {"x": t(128, 10), "y": t(10), "z": t(128), "w": t(128, 10), "u": t(10, 128),
             "big": t(128, 64)}
    col = Node(Value("y", types["y"]), "reduce_sum", ("x",), (("axes", (0,)),))
    assert row_split.row_inputs(kern("reduce", col, ["x"]), types) is None
    row = Node(Value("z", types["z"]), "reduce_sum", ("x",), (("axes", (1,)),))
    assert row_split.row_inputs(kern("reduce", row, ["x"]), types) == (128, frozenset({"x"}))
    sm0 = Node(Value("w", types["w"]), "log_softmax", ("x",), (("axis", 0),))
    assert row_split.row_inputs(kern("opaque", sm0, ["x"]), types) is None
    sm1 = Node(Value("w", types["w"]), "log_softmax", ("x",), (("axis", -1),))
    assert row_split.row_inputs(kern("opaque", sm1, ["x"]), types) == (128, frozenset({"x"}))
    tr = Node(Value("w", types["w"]), "transpose", ("u",), (("perm", (1, 0)),))
    assert row_split.row_inputs(kern("elementwise", tr, ["u"]), types) == (128, frozenset())


def _loss_between(x, w1, w2):
    """A loss summed over every row (not row-wise) between the head's row kernels."""
    h = rlx.nn.relu(x @ w1)
    p = rlx.nn.log_softmax(h @ w2)
    loss = p.sum()
    q = (p * 2.0 + 1.0).exp()  # fused into its row sum's kernel (a reduce with producers)
    return loss, q.sum(axis=1).sum()


@needs_cpu
def test_a_sum_over_rows_moves_after_the_row_kernels_it_does_not_feed(threads, monkeypatch
                                                                       ) -> None:
    """The loss's full sum sat between log_softmax and the row sum of exp(2p + 1) (which
    does not read it): the kernel order moves it after, so the two row-wise kernels are one
    run, and the results keep their bits."""
    args = _inputs()
    threads(2)
    exe = rlx.compile(_loss_between, *args, target="cpu", record=False)
    kinds = [(k.kind, k.nodes[-1].op) for k in exe.lir.kernels]
    assert kinds[2:] == [("opaque", "log_softmax"), ("reduce", "reduce_sum"),
                         ("reduce", "reduce_sum"), ("reduce", "reduce_sum")]
    assert len(exe.lir.kernels[4].nodes) == 1  # the loss's sum over all rows, moved
    src = exe.program.info["source"]
    at = src.index("rlx_r0 = (int64_t)rlx_c * 64")
    run = src[at:src.index("rlx_team_done_last(", at)]
    assert run.count("rlx_r0, rlx_r1, arena)") == 2
    p, _, _ = _reference(*args)
    got = exe(*args)
    np.testing.assert_allclose(got[0], p.sum(), rtol=1e-4)
    np.testing.assert_allclose(got[1], np.exp(2 * p + 1).sum(), rtol=1e-4)
    monkeypatch.setenv("RLX_ROW_SPLIT", "0")
    plain = rlx.compile(_loss_between, *args, target="cpu", record=False)
    assert [k.name for k in plain.lir.kernels] == sorted(
        (k.name for k in plain.lir.kernels), key=lambda n: int(n[1:]))  # not reordered
    for n in (1, 2):
        threads(n)
        assert all(np.array_equal(a, b) for a, b in zip(exe(*args), plain(*args),
                                                          strict=True)), n


def test_reordered_refuses_an_order_that_breaks_a_dependence() -> None:
    from rlx_core.errors import VerifyError
    from rlx_core.passes.plan_arena import reordered

    args = _inputs()
    exe = rlx.compile(_loss_between, *args, target="numpy", record=False)
    g = exe.lir
    n = len(g.kernels)
    assert reordered(g, list(range(n))) is g
    with pytest.raises(VerifyError, match="before a kernel writing its input"):
        reordered(g, [1, 0, *range(2, n)])


@needs_cpu
def test_the_mlp_step_s_head_is_one_run_and_its_sums_over_rows_a_deferred_chunk(
        threads, monkeypatch) -> None:
    """784-128-10 at batch 128: the output layer's GEMM, the head's row kernels and the
    input gradient's GEMM masked by the relu are one run; the loss and the bias
    gradient (sums over rows) run after it as one serial chunk that ends without a wait
    (the arena keeps the loss's row sums apart from the input gradient the other thread
    writes meanwhile). Parameters after 5 steps have the bits of the build without row
    splitting, on 1 and 2 threads. (The output weight's gradient summed by blocks in the run
    adds float partials: row_sums.py, off here and tested in test_cpu_row_sums.py.)"""
    from rlx_core.models.mlp import init_mlp, mlp_loss
    from rlx_core.optim import SGD, compile_step

    monkeypatch.setenv("RLX_ROW_SUMS", "0")

    rng = np.random.default_rng(3)
    xs = rng.random((5, 128, 784), np.float32)
    ys = rng.integers(0, 10, (5, 128)).astype(np.int32)

    def train(n: int, split: str):
        monkeypatch.setenv("RLX_ROW_SPLIT", split)
        threads(n)
        step = compile_step(mlp_loss, SGD(0.01), init_mlp((784, 128, 10), seed=0), xs[0], ys[0],
                            target="cpu")
        losses = [np.asarray(step(x, y)) for x, y in zip(xs, ys, strict=True)]
        return step, losses, [np.asarray(p) for p in step._p_leaves]

    from rlx_core.targets.cpu.renderer import render_program

    step, losses, params = train(2, "1")
    src = render_program(step.executable.lir).source  # as the step's build rendered it
    at = src.index("rlx_r0 = (int64_t)rlx_c * 64")
    run = src[at:src.index("rlx_team_done_last(", at)]
    # the output layer, the head's 7 kernels and the input gradient: one run
    assert run.count("rlx_r0, rlx_r1, arena)") == 9
    first, last = (k.name for k in step.executable.lir.kernels[1:10:8])
    calls = [line for line in run.split("\n") if "rlx_r0, rlx_r1, arena)" in line]
    assert f"_{first}(" in calls[0] and f"_{last}(" in calls[-1]
    assert "rlx_team_defer = 1; rlx_team_done_last(" in src  # the serial chunk after the run
    for n in (1, 2):
        _, want_losses, want = train(n, "0")
        assert all(np.array_equal(a, b) for a, b in zip(losses, want_losses, strict=True)), n
        assert all(np.array_equal(a, b) for a, b in zip(params, want, strict=True)), n


@needs_cpu
def test_small_gemms_join_a_run_by_rows_with_or_without_blas(threads) -> None:
    """At 160 rows h @ w2 is small: its GEMM (OpenBLAS or the generated loop nest without a
    BLAS) computes the block's rows of C in the run, before the head's kernels. Results as
    the reference, the same bits at 1, 2 and 3 threads."""
    import types

    x, w1, w2 = _inputs(rows=160)
    threads(2)
    exe = rlx.compile(_head, x, w1, w2, target="cpu", record=False)
    for flags in ({}, {"no_blas": True}):
        prog = CpuTarget().build(exe.lir, types.SimpleNamespace(flags=flags))
        src = prog.info["source"]
        at = src.index("rlx_r0 = (int64_t)rlx_c * 64")
        run = src[at:src.index("rlx_team_done_last(", at)].split("\n")[1:-1]
        gemm = next(k.name for k in exe.lir.kernels if k.kind == "matmul" and
                    exe.lir.values()[k.outputs[0]].type.shape == (160, 10))
        assert f"_{gemm}(" in run[0], flags
        body = src[src.index(f"_{gemm}(const"):]
        body = body[:body.index("\n}\n")]
        assert ("for (int64_t m = rlx_r0; m < rlx_r1; ++m)" in body if flags
                else "(int)(rlx_r1 - rlx_r0)" in body), flags
        outs = {}
        for n in (1, 2, 3):
            threads(n)
            outs[n] = prog.run((x, w1, w2), exe.params)
        for got, want in zip(outs[2], _reference(x, w1, w2), strict=True):
            np.testing.assert_allclose(got, want, rtol=2e-4, atol=2e-4)
        assert all(np.array_equal(a, b) for n in (1, 3)
                   for a, b in zip(outs[n], outs[2], strict=True)), flags


def test_row_inputs_of_a_matmul_read_the_weight_at_any_row() -> None:
    """A GEMM A [rows, K] @ B: A is read at the output row, B anywhere; a GEMM contracting
    A's rows (a weight gradient) is not row-wise."""
    from rlx_core.ir.graph import Kernel, Node, Value

    f32 = dt.f32
    types = {"a": TensorType(f32, (128, 10)), "b": TensorType(f32, (10, 64)),
             "c": TensorType(f32, (128, 64)), "g": TensorType(f32, (10, 10))}
    dot = Node(Value("c", types["c"]), "dot_general", ("a", "b"),
               (("contract", ((1,), (0,))), ("batch", ((), ()))))
    k = Kernel("k", "matmul", (dot,), ("a", "b"), ("c",))
    assert row_split.row_inputs(k, types) == (128, frozenset({"a"}))
    grad = Node(Value("g", types["g"]), "dot_general", ("a", "a"),
                (("contract", ((0,), (0,))), ("batch", ((), ()))))
    assert row_split.row_inputs(Kernel("k", "matmul", (grad,), ("a",), ("g",)), types) is None
