"""Random well-typed programs (hypothesis) give the same answer on every target as on numpy."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

import rlx_core as rlx
from tests.conformance.harness import TARGETS, executable_target
from tests.test_random_graphs import programs, run


@pytest.mark.parametrize("target", [t for t in TARGETS if t != "numpy"] or ["numpy"])
def test_random_programs_match_numpy_target(target: str) -> None:
    executable_target(target)

    # each example compiles C, so the budget is small but the programs are derandomised
    @settings(max_examples=20, deadline=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(programs())
    def check(prog) -> None:
        arrays, steps, outputs = prog

        def fn(*xs):
            return run(steps, outputs, xs, 1)

        got = rlx.compile(fn, *arrays, target=target, record=False)(*arrays)
        want = rlx.compile(fn, *arrays, target="numpy", record=False)(*arrays)
        got = got if isinstance(got, tuple) else (got,)
        want = want if isinstance(want, tuple) else (want,)
        for g, w in zip(got, want, strict=True):
            w = np.asarray(w)
            np.testing.assert_allclose(np.asarray(g), w, rtol=2e-5,
                                       atol=2e-5 * max(1.0, float(np.abs(w).max(initial=0))))

    check()
