"""Matmul operands read in place through strides (c_common/matmul.Strides) on the CPU.

A dot_general whose operand is a transposed view (attention's head split) reads it with a
row stride instead of a copy: the transpose folds into the dot's dimension numbers
(algebraic_simplify.dot_of_transpose) and the GEMM walks the source. Every GEMM path takes
strides: rlx's own sgemm any, OpenBLAS a unit stride per operand, the generated loop any; an
operand whose free or contract dims interleave with others is still copied first.
"""

from __future__ import annotations

import numpy as np
import pytest

import rlx_core as rlx
from rlx_core.ir import dtypes as dt
from rlx_core.ir.builder import Builder
from rlx_core.ir.graph import Graph, Level, TensorType, Value, ValueKind
from rlx_core.targets.c_common.matmul import Strides, operand_strides

# (lhs shape, rhs shape, contract, batch): each read through strides unless noted
LAYOUTS = {
    # q @ k^T and p @ v on (b, s, h, d) sources: the head split without copies
    "heads_qk": ((2, 24, 3, 40), (2, 24, 3, 40), ((3,), (3,)), ((0, 2), (0, 2))),
    "heads_pv": ((2, 3, 24, 24), (2, 24, 3, 40), ((3,), (1,)), ((0, 1), (0, 2))),
    # batch dim last on both sides
    "batch_last": ((33, 20, 4), (20, 48, 4), ((1,), (0,)), ((2,), (2,))),
    # contract dims interleaved with a free dim: lhs is copied first
    "copy_lhs": ((6, 36, 5), (6, 5, 40), ((0, 2), (0, 1)), ((), ())),
}


def _graph(lhs: tuple, rhs: tuple, contract: tuple, batch: tuple, dtype: dt.DType) -> Graph:
    a = Value("a", TensorType(dtype, lhs), ValueKind.INPUT)
    b = Value("b", TensorType(dtype, rhs), ValueKind.INPUT)
    bld = Builder()
    y = bld.emit("dot_general", [a, b], {"contract": contract, "batch": batch})
    return Graph("dot", Level.MIR, (a, b), (), tuple(bld.nodes), (y.name,))


def _reference(a: np.ndarray, b: np.ndarray, contract: tuple, batch: tuple) -> np.ndarray:
    """dot_general by einsum: result axes are batch, lhs free, rhs free."""
    letters = iter("abcdefghijklmnop")
    la, lb = [""] * a.ndim, [""] * b.ndim
    for i, j in zip(*batch, strict=True):
        la[i] = lb[j] = next(letters)
    for i, j in zip(*contract, strict=True):
        la[i] = lb[j] = next(letters)
    for arr in (la, lb):
        for i, x in enumerate(arr):
            arr[i] = x or next(letters)
    out = [la[i] for i in batch[0]]
    out += [x for i, x in enumerate(la) if i not in contract[0] and i not in batch[0]]
    out += [x for i, x in enumerate(lb) if i not in contract[1] and i not in batch[1]]
    wide = np.float64 if a.dtype.kind == "f" else np.int64
    return np.einsum(f"{''.join(la)},{''.join(lb)}->{''.join(out)}", a.astype(wide), b.astype(wide))


@pytest.mark.parametrize("dtype", ["f32", "f64", "i32"])
@pytest.mark.parametrize("case", sorted(LAYOUTS))
def test_strided_operands_match_einsum(case: str, dtype: str, two_threads: None) -> None:  # noqa: F811
    lhs, rhs, contract, batch = LAYOUTS[case]
    d = dt.get(dtype)
    rng = np.random.default_rng(7)
    if d.is_float:
        a = rng.standard_normal(lhs).astype(np.float32 if dtype == "f32" else np.float64)
        b = rng.standard_normal(rhs).astype(a.dtype)
    else:
        a = rng.integers(-8, 8, lhs).astype(np.int32)
        b = rng.integers(-8, 8, rhs).astype(np.int32)
    exe = rlx.compile(_graph(lhs, rhs, contract, batch, d), target="cpu", record=False)
    got = exe(a, b)
    want = _reference(a, b, contract, batch)
    if d.is_float:
        np.testing.assert_allclose(got, want, rtol=2e-5 if dtype == "f32" else 1e-12, atol=1e-4)
    else:
        np.testing.assert_array_equal(got, want.astype(np.int32))
    src = "".join(exe.sources.values())
    assert ("lhs_c" in src) == (case == "copy_lhs")  # only the interleaved layout copies
    assert "rhs_c" not in src


def test_head_split_runs_on_the_own_kernel_without_a_transpose_kernel(two_threads: None) -> None:  # noqa: F811
    rng = np.random.default_rng(1)
    xq = rng.standard_normal((2, 32, 4, 48)).astype(np.float32)
    xk = rng.standard_normal((2, 32, 4, 48)).astype(np.float32)

    def scores(q, k):
        return q.transpose(0, 2, 1, 3) @ k.transpose(0, 2, 3, 1)

    exe = rlx.compile(scores, xq, xk, target="cpu", record=False)
    assert [k.kind for k in exe.lir.kernels] == ["matmul"]
    want = np.einsum("bshd,bthd->bhst", xq.astype(np.float64), xk.astype(np.float64))
    np.testing.assert_allclose(exe(xq, xk), want, rtol=2e-5, atol=1e-4)


def test_operand_strides_of_views_and_dense_layouts() -> None:
    # (b, s, h, d) read as (b, h) batches of s x d: rows 384 apart, heads 32 apart
    s = operand_strides((2, 128, 12, 32), (0, 2), (3,), True)
    assert s == Strides(((2, 128 * 384), (12, 32)), 384, 1)
    assert s.offset("bb") == "((bb) / 12) * 49152 + ((bb) % 12) * 32"
    # dense [B, M, K]: batches merge into one stride; as rhs [B, K, N]
    assert operand_strides((3, 4, 5, 6), (0, 1), (3,), True) == Strides(((12, 30),), 6, 1)
    assert operand_strides((5, 6), (), (0,), False) == Strides((), 6, 1)
    assert operand_strides((6, 5), (), (1,), False) == Strides((), 1, 5)  # B = W^T
    # interleaved contract dims do not flatten
    assert operand_strides((6, 36, 5), (), (0, 2), True) is None
    # a one-row operand gets the stride of the dense layout its other index matches
    assert operand_strides((1, 8), (), (1,), True) == Strides((), 8, 1)
    assert operand_strides((8, 1), (), (0,), True) == Strides((), 8, 1)  # 1 x 8: plain, lda 8
    assert operand_strides((8, 3), (), (0,), True) == Strides((), 1, 3)  # 3 x 8 read as A^T
    assert Strides.dense(4, 3, 5) == Strides(((4, 15),), 5, 1)
    assert Strides.dense(4, 3, 5, transposed=True) == Strides(((4, 15),), 1, 3)
