"""The CPU target's host-overhead floor: a jitted function too small to split runs on the
calling thread, with no parallel region (renderer.CpuRenderer.render_program)."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

import rlx_core as rlx
from rlx_core.targets.cpu.renderer import PARALLEL_MIN_WORK
from rlx_core.targets.cpu.runtime import load_library
from rlx_core.targets.cpu.target import CpuTarget

cpu_ok, cpu_why = CpuTarget().available()
pytestmark = pytest.mark.skipif(not cpu_ok, reason=f"cpu target unavailable: {cpu_why}")


def _regions(fn) -> int:
    """Team regions the jitted function's (only) program has opened, read from its module."""
    (spec,) = fn.cache.specializations
    lib = load_library(fn.cache.module_path)
    counter = getattr(lib, f"{spec.program.prefix}_regions")
    counter.restype = ctypes.c_longlong
    return int(counter())


def _add(x, y):
    return x + y


def test_a_tiny_jitted_function_runs_without_entering_a_team_region(two_threads) -> None:
    add = rlx.jit(_add, target="cpu")
    x, y = np.arange(16, dtype=np.float32), np.full(16, 0.5, np.float32)
    for _ in range(5):
        np.testing.assert_array_equal(add(x, y), x + y)
    assert add.hits == 4 and add.misses == 1
    assert _regions(add) == 0
    src = add.cache.specializations[0].program.source
    assert "#pragma omp" not in src  # not even an orphaned single: plain C on the caller


def test_work_above_the_threshold_opens_one_region_per_call(two_threads) -> None:
    add = rlx.jit(_add, target="cpu")
    n = 4 * PARALLEL_MIN_WORK
    x = np.arange(n, dtype=np.float32)
    y = np.full(n, 0.5, np.float32)
    for i in range(3):
        np.testing.assert_array_equal(add(x, y), x + y)
        if i == 0:  # compiled: from now on each call is a team call, however loaded the machine
            (spec,) = add.cache.specializations
            reset = getattr(load_library(add.cache.module_path), f"{spec.program.prefix}_team_reset")
        reset()
    assert _regions(add) == 3  # the counter does count: the tiny case's 0 is not vacuous


def test_a_small_gemm_runs_on_the_caller_and_matches_numpy(two_threads) -> None:
    rng = np.random.default_rng(3)
    a = rng.standard_normal((4, 8), np.float32)
    b = rng.standard_normal((8, 6), np.float32)
    mm = rlx.jit(lambda p, q: rlx.nn.relu(p @ q) + 1.0, target="cpu")
    got = mm(a, b)
    got = mm(a, b)
    np.testing.assert_allclose(got, np.maximum(a @ b, 0) + 1.0, rtol=1e-5, atol=1e-6)
    assert _regions(mm) == 0
