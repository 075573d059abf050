"""Every HIR op (through whatever route the target's dispatch picks) against the numpy target,
and the numpy target's own decompositions against the HIR oracle."""

from __future__ import annotations

import numpy as np
import pytest

from rlx_core import LegalizationError
from rlx_core.targets.numpy_ref.executor import interpret
from tests.conformance.harness import TARGETS, compare, executable_target, run_on
from tests.dispatch.graphs import random_inputs, single
from tests.dispatch.test_decompositions import CASES


@pytest.mark.parametrize("case", range(len(CASES)), ids=[f"{c[0]}-{i}" for i, c in
                                                         enumerate(CASES)])
@pytest.mark.parametrize("target", TARGETS)
def test_hir_op(target: str, case: int) -> None:
    executable_target(target)
    op, specs, attrs = CASES[case]
    g = single(op, specs, **attrs)
    inputs = random_inputs(g, np.random.default_rng(case))
    try:
        got = run_on(target, g, inputs)
    except LegalizationError as err:  # the target's table has no legal route: not a result
        pytest.skip(f"{target} has no legal route for this {op} case: {err.message[:200]}")
    if target == "numpy":
        want, scale = interpret(g, inputs), 5.0  # decomposition vs the f64 HIR oracle
    else:
        want, scale = run_on("numpy", g, inputs), 1.0
    for gv, wv, t in zip(got, want, g.output_types(), strict=True):
        compare(target, gv, wv, t.dtype.name, op, scale)
