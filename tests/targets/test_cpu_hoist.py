"""A serial elementwise kernel with a short last axis computes its inline transcendentals of a
same-shaped input in one flat pass first (c_common/kernels._hoisted): same bits as the nest."""

from __future__ import annotations

import numpy as np
import pytest

import rlx_core as rlx
from rlx_core.targets.c_common import kernels
from rlx_core.targets.cpu.renderer import CpuRenderer
from rlx_core.targets.cpu.target import CpuTarget

cpu_ok, cpu_why = CpuTarget().available()
needs_cpu = pytest.mark.skipif(not cpu_ok, reason=f"cpu target unavailable: {cpu_why}")


def _head_grad(ls, s, g):
    """A log-softmax gradient's last step: g - exp(log p) * s, s one value per row."""
    return g - rlx.exp(ls) * s[:, None]


@needs_cpu
@pytest.mark.parametrize("rows,cols", [(128, 10), (37, 3), (8, 16)])
def test_flat_transcendental_pass_gives_the_same_bits(rows: int, cols: int,
                                                      monkeypatch) -> None:
    rng = np.random.default_rng(7)
    ls = -rng.random((rows, cols), np.float32) * 8
    s = rng.standard_normal(rows).astype(np.float32)
    g = rng.standard_normal((rows, cols)).astype(np.float32)
    exe = rlx.compile(_head_grad, ls, s, g, target="cpu", record=False)
    src = exe.program.info["source"]
    hoisted = cols < kernels.HOIST_INNER
    assert ("rlx_pre0[" in src) == hoisted, src[-1500:]
    monkeypatch.setattr(CpuRenderer, "hoist_bytes", 0)
    plain = rlx.compile(_head_grad, ls, s, g, target="cpu", record=False)
    assert "rlx_pre0[" not in plain.program.info["source"]
    got, want = exe(ls, s, g), plain(ls, s, g)
    assert np.array_equal(got, want)
    np.testing.assert_allclose(got, g - np.exp(ls.astype(np.float64)) * s[:, None],
                               rtol=1e-5, atol=1e-6)


@needs_cpu
def test_no_hoist_past_the_stack_budget_or_for_a_team_kernel() -> None:
    rng = np.random.default_rng(8)
    rows = 4096  # 4096 x 10 floats: 160 KB, over the budget (and split over the team)
    ls = -rng.random((rows, 10), np.float32)
    s = rng.standard_normal(rows).astype(np.float32)
    g = rng.standard_normal((rows, 10)).astype(np.float32)
    exe = rlx.compile(_head_grad, ls, s, g, target="cpu", record=False)
    assert "rlx_pre0[" not in exe.program.info["source"]
    np.testing.assert_allclose(exe(ls, s, g), g - np.exp(ls.astype(np.float64)) * s[:, None],
                               rtol=1e-5, atol=1e-6)
