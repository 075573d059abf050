"""A donated weight written by its SGD update's GEMM (runtime/donation.py, cpu/update_store.py):
``compile_step(..., in_place=True)`` gives the out-of-place step's parameters bit for bit, and a
GEMM that cannot store over W (K over one KC slice, W read after the update, no update store)
gets a fresh output."""

from __future__ import annotations

import numpy as np
import pytest

import rlx_core as rlx
from rlx_core.runtime.donation import inplace_outputs
from tests.targets.own_sgemm import skip_unless_own_sgemm


def _batches(n: int):
    rng = np.random.default_rng(7)
    return [(rng.random((128, 784), np.float32), rng.integers(0, 10, 128).astype(np.int32))
            for _ in range(n)]


@pytest.mark.parametrize("isa", ["native", "avx2"])
@pytest.mark.parametrize("n", [1, 2, 3])
def test_in_place_step_gives_the_out_of_place_parameters(
        n: int, isa: str, threads, monkeypatch: pytest.MonkeyPatch) -> None:
    """MNIST's 784-128-10 at batch 128, four SGD steps: W1 and W2 are written over the arrays
    the step holds (the same objects after each step), every leaf equals the out-of-place
    step's bit for bit, and the arrays handed to compile_step are left as they were. The
    step's own copies start on a 64-byte line (train_step._line_aligned_copy)."""
    skip_unless_own_sgemm()
    if isa != "native":
        from rlx_core.targets.cpu import isa as cpu_isa

        if "avx2" not in cpu_isa.forced_paths():
            pytest.skip("this CPU cannot run the avx2 path")
        monkeypatch.setenv("RLX_CPU_ISA", isa)
    threads(n)
    from rlx_core.models.mlp import init_mlp, mlp_loss
    from rlx_core.optim import SGD, compile_step

    data = _batches(4)
    given = init_mlp((784, 128, 10), seed=3)
    kept = {layer: {k: v.copy() for k, v in leaves.items()} for layer, leaves in given.items()}
    fresh = compile_step(mlp_loss, SGD(0.05), given, *data[0], target="cpu")
    owned = compile_step(mlp_loss, SGD(0.05), given, *data[0], target="cpu", in_place=True)
    (spec,) = owned.jitted.cache.specializations
    # outputs: loss, then the new leaves in the graph's input order: W1 and W2 in place
    lir = owned.executable.lir
    offered = inplace_outputs(lir, range(4))
    assert all(a in (-1, o) for a, o in zip(spec.program.aliases, offered, strict=True))
    shapes = {tuple(lir.inputs[i].type.shape) for i in spec.program.aliases if i >= 0}
    # W1 and W2; the biases too, their updates being row sums' combines (row_sums.py)
    assert {(128, 784), (10, 128), (128,), (10,)} == shapes
    for xb, yb in data:
        before = owned.params["fc1"]["weight"]
        assert fresh(xb, yb) == owned(xb, yb)
        assert owned.params["fc1"]["weight"] is before  # written in place
        assert before.ctypes.data % 64 == 0 and owned.params["fc2"]["weight"].ctypes.data % 64 == 0
    for layer in ("fc1", "fc2"):
        for leaf in ("weight", "bias"):
            np.testing.assert_array_equal(owned.params[layer][leaf], fresh.params[layer][leaf])
            np.testing.assert_array_equal(given[layer][leaf], kept[layer][leaf])


def _update(g, x, w):
    return w - 0.01 * (g.T @ x)


def _update_then_read(g, x, w):
    new = w - 0.01 * (g.T @ x)
    return new, new @ w.T  # a kernel reading W after the update


def _call(f, donate, *args):
    """f jitted with ``donate``: (its outputs, W as passed, W's aliases) on fresh copies."""
    args = [a.copy() for a in args]
    jf = rlx.jit(f, target="cpu", donate=donate)
    out = jf(*args)
    return out, args[-1], jf.cache.specializations[0].program.aliases


@pytest.mark.parametrize("n", [1, 2])
def test_only_a_one_slice_last_reader_update_is_written_over_w(
        n: int, threads, monkeypatch: pytest.MonkeyPatch) -> None:
    """K = 128 (one KC slice): W's array is returned with the update; K = 1024 (partial sums
    in C before the last slice), W read by a later kernel, or the update store off
    (RLX_NO_UPDATE_STORE=1): a fresh output, W untouched. The values are the same."""
    skip_unless_own_sgemm()
    threads(n)
    rng = np.random.default_rng(n)
    w = rng.standard_normal((96, 200), np.float32)

    def args(batch):
        return (rng.standard_normal((batch, 96), np.float32),
                rng.standard_normal((batch, 200), np.float32), w)

    a = args(128)
    want = np.asarray(rlx.jit(_update, target="cpu")(*a))
    got, w_in, aliases = _call(_update, (2,), *a)
    assert aliases == (2,) and got is w_in
    np.testing.assert_array_equal(got, want)

    a = args(1024)  # three KC slices
    want = np.asarray(rlx.jit(_update, target="cpu")(*a))
    got, w_in, aliases = _call(_update, (2,), *a)
    assert aliases == (-1,) and got is not w_in
    np.testing.assert_array_equal(w_in, w)
    np.testing.assert_array_equal(got, want)

    a = args(128)
    jf = rlx.jit(_update_then_read, target="cpu")
    want = [np.asarray(v) for v in jf(*a)]
    got, w_in, aliases = _call(_update_then_read, (2,), *a)
    assert aliases == (-1, -1)
    np.testing.assert_array_equal(w_in, w)
    for u, v in zip(got, want, strict=True):
        np.testing.assert_array_equal(u, v)

    monkeypatch.setenv("RLX_NO_UPDATE_STORE", "1")  # the block epilogue would read W after C
    got, w_in, aliases = _call(_update, (2,), *a)
    assert aliases == (-1,) and got is not w_in
    np.testing.assert_array_equal(w_in, w)
    np.testing.assert_allclose(got, _update(*(v.astype(np.float64) for v in a)),
                               rtol=1e-4, atol=1e-3)


def _bias_update(g, b):
    return b - 0.01 * g.sum(axis=0)


def _bias_read_by_sum(g, b):
    return b - 0.01 * (g * b).sum(axis=0)  # b read by the sum: not the form


def test_a_bias_update_is_offered_only_where_the_sum_does_not_read_it() -> None:
    """The cpu's reduce_in_place (row_sums.updated_input) offers the input read only after
    the sum, at the output's own index; not one the sum reads."""
    from rlx_core.api import lower
    from rlx_core.targets.registry import get_target

    rng = np.random.default_rng(1)
    g, b = rng.standard_normal((64, 32), np.float32), rng.standard_normal(32).astype(np.float32)
    cpu = get_target("cpu")
    lir = lower(_bias_update, g, b, target="cpu")[2]
    (k,) = [k for k in lir.kernels if k.kind == "reduce"]
    assert cpu.reduce_in_place(k) == lir.inputs[1].name
    assert inplace_outputs(lir, (1,), "cpu") == (1,)
    assert inplace_outputs(lir, (0,), "cpu") == (-1,)  # g: summed, and not the output's type
    assert inplace_outputs(lir, (1,), "numpy") == (-1,)  # numpy offers nothing
    lir = lower(_bias_read_by_sum, g, b, target="cpu")[2]
    assert all(cpu.reduce_in_place(k) is None for k in lir.kernels if k.kind == "reduce")
    assert inplace_outputs(lir, (1,), "cpu") == (-1,)


def test_a_bias_update_not_rendered_as_a_combine_gets_a_fresh_output() -> None:
    """A lone column sum is no row run's combine (cpu/row_sums.py): the renderer refuses the
    donation the rule offered (InPlaceRefused), b is left as it was, the values are equal."""
    rng = np.random.default_rng(2)
    g, b = rng.standard_normal((64, 32), np.float32), rng.standard_normal(32).astype(np.float32)
    want = np.asarray(rlx.jit(_bias_update, target="cpu")(g, b))
    got, b_in, aliases = _call(_bias_update, (1,), g, b)
    assert aliases == (-1,) and got is not b_in
    np.testing.assert_array_equal(b_in, b)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("row_sums", ["1", "0"])
def test_the_step_writes_its_biases_in_place_as_row_sum_combines(
        row_sums: str, threads, monkeypatch: pytest.MonkeyPatch) -> None:
    """The MNIST step's bias updates (k10, k13) are row sums' combines: b1 and b2 are written
    over the arrays the step holds too, bit for bit the out-of-place step's. With
    RLX_ROW_SUMS=0 they are plain reduces: refused, fresh outputs, the same bits."""
    skip_unless_own_sgemm()
    threads(2)
    monkeypatch.setenv("RLX_ROW_SUMS", row_sums)
    from rlx_core.models.mlp import init_mlp, mlp_loss
    from rlx_core.optim import SGD, compile_step

    data = _batches(3)
    given = init_mlp((784, 128, 10), seed=4)
    fresh = compile_step(mlp_loss, SGD(0.05), given, *data[0], target="cpu")
    owned = compile_step(mlp_loss, SGD(0.05), given, *data[0], target="cpu", in_place=True)
    (spec,) = owned.jitted.cache.specializations
    lir = owned.executable.lir
    shapes = {tuple(lir.inputs[i].type.shape) for i in spec.program.aliases if i >= 0}
    biases = {(128,), (10,)}
    assert (biases <= shapes) == (row_sums == "1"), shapes
    for xb, yb in data:
        before = owned.params["fc1"]["bias"]
        assert fresh(xb, yb) == owned(xb, yb)
        assert (owned.params["fc1"]["bias"] is before) == (row_sums == "1")
    for layer in ("fc1", "fc2"):
        for leaf in ("weight", "bias"):
            np.testing.assert_array_equal(owned.params[layer][leaf], fresh.params[layer][leaf])
