"""Subgroup reductions executed: the vulkan target on a device with compute-stage subgroup
shuffles (lavapipe: 8 lanes) reduces with ``subgroupShuffleXor`` first, the same structure the
CUDA/HIP warp and MSL simdgroup dialects use (those are only compile-/syntax-checked here).
The whole vulkan conformance suite runs this path; these cases add a NaN, i32 sums that wrap,
at widths that leave subgroups with fewer elements than lanes."""

from __future__ import annotations

import numpy as np
import pytest

import rlx_core as rlx
from rlx_core.targets.registry import get_target


def _vulkan_with_subgroups():
    from rlx_core.targets.vulkan.runtime import SUBGROUP_SHUFFLE

    tgt = get_target("vulkan")
    ok, why = tgt.available()
    if not ok:
        pytest.skip(f"vulkan unavailable: {why}")
    if SUBGROUP_SHUFFLE not in tgt.device().info.features:
        pytest.skip(f"{tgt.device().info.name} has no compute-stage subgroup shuffles")
    return tgt


@pytest.mark.parametrize("n", [7, 1000])
def test_subgroup_reductions_match_numpy(n: int) -> None:
    _vulkan_with_subgroups()
    rng = np.random.default_rng(n)
    x = rng.standard_normal((3, n)).astype(np.float32)
    x[1, n // 2] = np.nan
    i = rng.integers(-2**31, 2**31 - 1, (3, n), dtype=np.int64).astype(np.int32)
    f = lambda a, b: (a.sum(axis=1), a.max(axis=1), a.min(axis=1), b.sum(axis=1),
                      b.max(axis=1), b.min(axis=1))
    exe = rlx.compile(f, x, i, target="vulkan")
    assert "subgroupShuffleXor" in "\n".join(exe.sources.values())
    got = exe(x, i)
    want = rlx.compile(f, x, i, target="numpy")(x, i)
    for g, w in zip(got, want, strict=True):
        if np.asarray(w).dtype.kind == "f":
            np.testing.assert_allclose(g, w, rtol=2e-5, atol=1e-5, equal_nan=True)
        else:
            np.testing.assert_array_equal(g, w)
