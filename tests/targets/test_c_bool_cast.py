"""A bool cast to f32 / f64 renders as a select (c_common/expr._cast), which GCC vectorises; a
float conversion of a compare's uint8_t stayed scalar. Same values: 0 and 1 exactly."""

from __future__ import annotations

import numpy as np
import pytest

import rlx_core as rlx
from rlx_core.ir import dtypes as dt
from rlx_core.models.mlp import one_hot
from rlx_core.targets.c_common import expr
from rlx_core.targets.cpu.target import CpuTarget

cpu_ok, cpu_why = CpuTarget().available()
needs_cpu = pytest.mark.skipif(not cpu_ok, reason=f"cpu target unavailable: {cpu_why}")


def test_bool_to_float_is_a_select_and_other_casts_keep_their_form() -> None:
    assert expr.render("cast", {}, ["t1"], [dt.bool_], dt.f32) == "(t1 ? 1.0f : 0.0f)"
    assert expr.render("cast", {}, ["t1"], [dt.bool_], dt.f64) == "(t1 ? 1.0 : 0.0)"
    assert expr.render("cast", {}, ["t1"], [dt.i32], dt.f32) == "((float)t1)"
    assert expr.render("cast", {}, ["t1"], [dt.bool_], dt.i32) == "((int32_t)t1)"


@needs_cpu
@pytest.mark.parametrize("rows,classes,dtype", [(128, 10, np.float32), (37, 3, np.float32),
                                                 (16, 40, np.float64)])
def test_one_hot_times_values_matches_numpy(rows: int, classes: int, dtype) -> None:
    rng = np.random.default_rng(3)
    labels = rng.integers(0, classes, rows).astype(np.int32)
    v = rng.standard_normal((rows, classes)).astype(dtype)

    def f(lab, x):  # the MLP loss's one-hot, times values and a constant (two outputs)
        t = one_hot(lab, classes, x.dtype)
        return x * t, t * -0.25

    exe = rlx.compile(f, labels, v, target="cpu", record=False)
    assert "? 1.0" in exe.program.info["source"]
    got_a, got_b = exe(labels, v)
    want = np.eye(classes, dtype=dtype)[labels]
    assert np.array_equal(got_a, v * want)
    assert np.array_equal(got_b, want * dtype(-0.25))
