"""Column-order reductions (kernels._emit_column_reduce): a reduction that keeps the input's
last axis accumulates a chunk of that axis at a time, the reduced axes outside, so its loads
are contiguous. Checked against numpy for every reduce op, several dtypes, reduced axes
before and between kept ones, several chunks (a last axis wider than COLUMN_ACC, not a
multiple of it), fused producers and consumers, and a team big enough to share the chunks."""

from __future__ import annotations

import re

import numpy as np
import pytest

import rlx_core as rlx
from rlx_core.targets.c_common import kernels
from rlx_core.targets.cpu.target import CpuTarget

cpu_ok, cpu_why = CpuTarget().available()
pytestmark = pytest.mark.skipif(not cpu_ok, reason=f"cpu target unavailable: {cpu_why}")

OPS = ("sum", "max", "min", "prod")


def _compile(fn, *args):
    return rlx.compile(fn, *args, target="cpu", record=False)


def _column_kernels(exe) -> int:
    """How many kernels were written in column order (their accumulator is an array)."""
    return sum(re.search(r"\bacc\d+\[", src) is not None
               for src in exe.sources.values() if "generated-reduce" in src)


def _data(shape, dtype, rng, op):
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    if np.issubdtype(dtype, np.integer):
        lo, hi = (-2, 3) if op != "prod" else (1, 2)
        return rng.integers(lo, hi, shape).astype(dtype)
    if op == "prod":  # products of values near 1 stay finite over many terms
        return rng.uniform(0.9, 1.1, shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("shape,axes", [((128, 128), (0,)), ((7, 300), (0,)),
                                        ((3, 5, 40), (0, 1)), ((4, 6, 33), (1,)),
                                        ((2, 9, 3, 520), (0, 2))])
def test_f32_column_reduce_matches_numpy(op: str, shape, axes) -> None:
    rng = np.random.default_rng(len(shape) * 10 + len(axes))
    x = _data(shape, np.float32, rng, op)
    exe = _compile(lambda v: getattr(v, op)(axis=axes), x)
    assert _column_kernels(exe) >= 1
    want = getattr(x.astype(np.float64), op)(axis=axes)
    np.testing.assert_allclose(exe(x), want, rtol=2e-6, atol=1e-6)


@pytest.mark.parametrize("dtype,op", [(d, op) for d in (np.float64, np.float16, np.int32,
                                                          np.int64, np.uint8, np.bool_)
                                       for op in OPS if not (d == np.bool_ and op == "prod")])
def test_column_reduce_other_dtypes(dtype, op: str) -> None:
    rng = np.random.default_rng(3)
    x = _data((37, 270), dtype, rng, op)
    exe = _compile(lambda v: getattr(v, op)(axis=0), x)
    got = exe(x)
    if dtype == np.bool_:
        want = x.any(axis=0) if op in ("sum", "max") else x.all(axis=0)
        np.testing.assert_array_equal(got.astype(bool), want)
        return
    if dtype == np.float16:  # accumulated in double, rounded once to f16
        want = getattr(x.astype(np.float64), op)(axis=0)
        np.testing.assert_allclose(got.astype(np.float64), want, rtol=1e-3, atol=1e-2)
        return
    want = getattr(x, op)(axis=0)
    if np.issubdtype(dtype, np.integer):
        np.testing.assert_array_equal(got, want.astype(got.dtype))
    else:
        np.testing.assert_allclose(got, want, rtol=1e-12)


def test_fused_producers_and_consumers_in_column_order() -> None:
    """A bias gradient and its SGD update: (g * 2).sum(0) * lr subtracted from b, one kernel."""
    rng = np.random.default_rng(4)
    g = rng.standard_normal((64, 300)).astype(np.float32)
    b = rng.standard_normal(300).astype(np.float32)
    exe = _compile(lambda g, b: b - (g * 2.0).sum(axis=0) * 0.01, g, b)
    assert _column_kernels(exe) == 1
    want = b.astype(np.float64) - (g.astype(np.float64) * 2).sum(axis=0) * 0.01
    np.testing.assert_allclose(exe(g, b), want, rtol=1e-5, atol=1e-6)


def test_large_column_reduce_shares_chunks_and_keeps_nan() -> None:
    """Work big enough for a worksharing loop over the chunks; a NaN reaches its column only."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2048, 130)).astype(np.float32)
    x[100, 7] = np.nan
    for op in ("sum", "max"):
        exe = _compile(lambda v, op=op: getattr(v, op)(axis=0), x)
        src = "".join(exe.sources.values())
        # shared over the team: chunks claimed from the call's counter (cpu/team.py), or a
        # worksharing loop where a kernel has no claimed form
        assert "rlx_team_take(rlx_work, " in src or "#pragma omp for" in src
        got, want = exe(x), getattr(x.astype(np.float64), op)(axis=0)
        assert np.isnan(got[7]) and np.isnan(want[7])
        np.testing.assert_allclose(np.delete(got, 7), np.delete(want, 7), rtol=2e-6, atol=1e-5)


def test_narrow_last_axis_keeps_row_order() -> None:
    """Below COLUMN_MIN columns the reduction stays in row order (a scalar accumulator)."""
    x = np.arange(40 * (kernels.COLUMN_MIN - 1), dtype=np.float32).reshape(40, -1)
    exe = _compile(lambda v: v.sum(axis=0), x)
    assert _column_kernels(exe) == 0
    np.testing.assert_allclose(exe(x), x.astype(np.float64).sum(axis=0), rtol=1e-6)
