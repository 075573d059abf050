"""Sums over a row run's rows taken block by block inside the run (cpu/row_sums.py): which
kernels qualify, the combine's results against the kernels they replace, and the same bits
at any thread count or with a thread late."""

from __future__ import annotations

import types

import numpy as np
import pytest

from rlx_core.ir import dtypes as dt
from rlx_core.ir.graph import Kernel, Node, TensorType, Value
from rlx_core.targets.cpu import row_sums
from rlx_core.targets.cpu.target import CpuTarget
from tests.targets.late_thread import team_delay

cpu_ok, cpu_why = CpuTarget().available()
needs_cpu = pytest.mark.skipif(not cpu_ok, reason=f"cpu target unavailable: {cpu_why}")


def _step(monkeypatch, sums: str, in_place: bool = False):
    from rlx_core.models.mlp import init_mlp, mlp_loss
    from rlx_core.optim import SGD, compile_step

    monkeypatch.setenv("RLX_ROW_SUMS", sums)
    rng = np.random.default_rng(5)
    xs = rng.random((4, 128, 784), np.float32)
    ys = rng.integers(0, 10, (4, 128)).astype(np.int32)
    step = compile_step(mlp_loss, SGD(0.01), init_mlp((784, 128, 10), seed=0), xs[0], ys[0],
                        target="cpu", in_place=in_place)
    return step, xs, ys


def _impls(step) -> list[str]:
    prog = CpuTarget().build(step.executable.lir, types.SimpleNamespace(flags={}))
    return [prog.info["kernels"][k.name]["impl"] for k in step.executable.lir.kernels]


@needs_cpu
def test_the_mlp_step_sums_its_head_s_rows_in_the_run(threads, monkeypatch) -> None:
    """784-128-10/128 on two threads: the loss, both bias gradients and the output layer's
    weight gradient become combines of the run's block partials. One step's loss, biases and
    first-layer weight have the bits of the build without (double partials of float sums);
    the output weight's GEMM adds two float partials: within a few ulp. 1, 2 and 3 threads
    and a late thread give the same bits."""
    threads(2)
    step, xs, ys = _step(monkeypatch, "1", in_place=True)
    impls = _impls(step)
    assert impls.count(row_sums.IMPL) == 4, impls  # the 10 x 128 GEMM's blocks: tile loops
    plain, _, _ = _step(monkeypatch, "0", in_place=True)
    assert row_sums.IMPL not in _impls(plain)
    loss, want = step(xs[0], ys[0]), plain(xs[0], ys[0])
    assert loss == want
    got, ref = step.params, plain.params
    for name, leaf in (("fc1", "bias"), ("fc1", "weight"), ("fc2", "bias")):
        assert np.array_equal(got[name][leaf], ref[name][leaf]), (name, leaf)
    np.testing.assert_allclose(got["fc2"]["weight"], ref["fc2"]["weight"], rtol=1e-6,
                               atol=1e-8)
    # the same bits whoever runs which block
    outs = {}
    for n in (1, 2, 3):
        threads(n)
        s, _, _ = _step(monkeypatch, "1")
        outs[n] = [s(x, y) for x, y in zip(xs, ys, strict=True)] + \
            [np.asarray(p) for p in s._p_leaves]
    s, _, _ = _step(monkeypatch, "1")
    prog = CpuTarget().build(s.executable.lir, types.SimpleNamespace(flags={}))
    delay = team_delay(types.SimpleNamespace(program=prog), threads)
    leaves, late = list(s._p_leaves), []
    for i, (x, y) in enumerate(zip(xs, ys, strict=True)):
        delay(i % 2, 5_000)
        loss, *leaves = prog.run((*leaves, x, y), s.executable.params)
        late.append(float(loss))
    outs["late"] = late + [np.asarray(p) for p in leaves]
    for n, o in outs.items():
        assert all(np.array_equal(a, b) for a, b in zip(o, outs[2], strict=True)), n


@needs_cpu
def test_without_the_own_sgemm_the_blocks_call_the_blas(threads) -> None:
    """A layer split over the team, a row run (the head's GEMM h @ w2 and log_softmax, 4
    blocks of 64 rows), then p^T h and the column sum of p over the rows. The block GEMMs go through
    cblas when the own sgemm is off; a build without BLAS keeps the GEMM kernel (nothing to
    run the blocks on) and still combines the column sum; results agree with numpy."""
    import rlx_core as rlx

    rng = np.random.default_rng(2)
    x = rng.standard_normal((256, 256), np.float32)
    # 48 columns: not whole 32-column panels of the tile loop (row_sums.TILE_N)
    w1 = (rng.standard_normal((256, 48)) * 0.1).astype(np.float32)
    w2 = (rng.standard_normal((48, 10)) * 0.3).astype(np.float32)

    def head(x, w1, w2):
        h = rlx.nn.relu(x @ w1)
        p = rlx.nn.log_softmax(h @ w2)
        return p, p.T @ h, p.sum(axis=0)

    threads(2)
    exe = rlx.compile(head, x, w1, w2, target="cpu", record=False)
    h = np.maximum(x.astype(np.float64) @ w1, 0)
    p = h @ w2
    p = p - p.max(1, keepdims=True)
    p = p - np.log(np.exp(p).sum(1, keepdims=True))
    for flags in ({}, {"no_own_sgemm": True}, {"no_blas": True, "no_own_sgemm": True}):
        prog = CpuTarget().build(exe.lir, types.SimpleNamespace(flags=flags))
        impls = [prog.info["kernels"][k.name]["impl"] for k in exe.lir.kernels]
        src = prog.info["source"]
        blocks = "cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans"
        if "no_blas" in flags:
            assert row_sums.IMPL_SGEMM not in impls and blocks not in src, flags
        elif "no_own_sgemm" in flags:
            assert row_sums.IMPL_SGEMM not in impls and blocks in src, flags
        else:
            assert row_sums.IMPL_SGEMM in impls, impls
        # the column sum, and the GEMM's combine when its blocks call cblas
        cblas = "no_own_sgemm" in flags and "no_blas" not in flags
        assert impls.count(row_sums.IMPL) == 1 + cblas, (flags, impls)
        outs = {n: (threads(n), prog.run((x, w1, w2), exe.params))[1] for n in (1, 2, 3)}
        np.testing.assert_allclose(outs[2][0], p, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(outs[2][1], p.T @ h, rtol=1e-4, atol=1e-3)
        np.testing.assert_allclose(outs[2][2], p.sum(0), rtol=1e-5, atol=1e-3)
        assert all(np.array_equal(a, b) for n in (1, 3)
                   for a, b in zip(outs[n], outs[2], strict=True)), flags


def _types(**shapes):
    return {k: TensorType(dt.f32, v) for k, v in shapes.items()}


def test_forms_refuse_what_does_not_sum_over_the_rows() -> None:
    """A sum over axis 1, a GEMM contracting columns, an operand read again after the sum
    and an f16 input are refused; a sum over rows and g^T h are taken."""
    t = _types(x=(128, 16), s=(16,), r=(128,), h=(128, 32), g=(16, 32), o=(16, 32))

    def red(axes, out="s"):
        n = Node(Value(out, t[out]), "reduce_sum", ("x",), (("axes", axes),))
        return Kernel("k", "reduce", (n,), ("x",), (out,))
    assert row_sums._form(red((0,)), t, 128) == (("x",), (16,), dt.f64)
    assert row_sums._form(red((1,), "r"), t, 128) is None
    assert row_sums._form(red((0,)), t, 64) is None  # not the run's rows
    dot = Node(Value("g", t["g"]), "dot_general", ("x", "h"),
               (("contract", ((0,), (0,))), ("batch", ((), ()))))
    assert row_sums._form(Kernel("k", "matmul", (dot,), ("x", "h"), ("g",)), t, 128) == (
        ("x", "h"), (16, 32), dt.f32)
    again = Node(Value("o", t["o"]), "add", ("g", "h"), ())  # h read at the output's index
    assert row_sums._form(Kernel("k", "matmul", (dot, again), ("x", "h"), ("o",)), t,
                          128) is None
    cols = Node(Value("g", t["g"]), "dot_general", ("x", "h"),
                (("contract", ((1,), (1,))), ("batch", ((), ()))))
    assert row_sums._form(Kernel("k", "matmul", (cols,), ("x", "h"), ("g",)), t, 128) is None
    t16 = {**t, "x": TensorType(dt.f16, (128, 16))}
    assert row_sums._form(red((0,)), t16, 128) is None


@needs_cpu
def test_large_partials_and_the_switch_keep_the_kernel(threads, monkeypatch) -> None:
    """Partials over MAX_BYTES in all, or RLX_ROW_SUMS=0: the kernel is rendered as before."""
    threads(2)
    step, _, _ = _step(monkeypatch, "1")
    gemms = _impls(step).count("rlx-sgemm")
    monkeypatch.setattr(row_sums, "MAX_BYTES", 4096)  # the 10 x 128 gradient's 10 KB is over
    impls = _impls(step)
    assert impls.count("rlx-sgemm") == gemms + 1 and impls.count(row_sums.IMPL) == 3, impls
    monkeypatch.setenv("RLX_ROW_SUMS", "0")
    assert row_sums.IMPL not in _impls(step)
