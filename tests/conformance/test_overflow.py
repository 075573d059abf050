"""Sizes and values at the edge of the types: a tensor with more elements than the target's
index type counts is rejected at compile time (it used to run as an empty loop and return 0),
and f32 rows whose partial sums or squares overflow give the same answer on every executing
target (docs/reliability.md, "Overflow")."""

from __future__ import annotations

import numpy as np
import pytest

import rlx_core as rlx
from rlx_core.dispatch.errors import LegalizationError
from rlx_core.dispatch.legalize import legalize_graph
from rlx_core.passes.base import CompileOptions
from tests.conformance.harness import TARGETS, executable_target
from tests.dispatch.graphs import GraphMaker

F32_MAX = float(np.finfo(np.float32).max)
# row 0 overflows f32 in a partial sum (1e38 + 3e38) and in its squares; row 1 is ordinary
ROWS = np.array([[1e38, 3e38, -3e38, 0.0], [1.0, 2.0, 3.0, 4.0]], np.float32)


def _failure_codes(shape: tuple[int, ...], target: str) -> list[str]:
    m = GraphMaker()
    g = m.graph(m.op("neg", [m.input("a", "f32", shape)]))
    res = legalize_graph(g, target, CompileOptions(), raise_errors=False)
    return [f.decision.code for f in res.failures]


@pytest.mark.parametrize("target, limit", [("numpy", 2**63 - 1), ("cpu", 2**63 - 1),
                                           ("webgpu", 2**32 - 1)])
def test_the_index_type_bounds_a_tensor(target: str, limit: int) -> None:
    """The limit is the index type's: one element more is RLX-L005, the limit itself is not."""
    assert "RLX-L005" in _failure_codes((limit + 1,), target)
    if target != "webgpu":  # (webgpu's buffer-size limit is far lower than its index limit)
        assert _failure_codes((limit,), target) == []


@pytest.mark.parametrize("target", TARGETS)
def test_two_to_the_64_elements_is_a_compile_error(target: str) -> None:
    """``broadcast_to(a, (2**32, 2**32)).sum()`` returned 0.0 on cpu: the loop bound
    18446744073709551616 wrapped in int64_t and the loop ran zero times."""
    executable_target(target)
    a = np.ones((1, 1), np.float32)
    with pytest.raises(LegalizationError) as info:
        rlx.compile(lambda x: rlx.broadcast_to(x, (2**32, 2**32)).sum(), a, target=target,
                    record=False)
    assert "RLX-L005" in str(info.value) and "elements" in str(info.value)


def _np_norm(x: np.ndarray, centre: bool, eps: float) -> np.ndarray:
    c = x.astype(np.float64)
    if centre:
        c = c - c.mean(-1, keepdims=True)
    return (c / np.sqrt((c * c).mean(-1, keepdims=True) + eps)).astype(np.float32)


# what every target must give for ROWS: sums exact then rounded once (1e38, not inf), row
# statistics that overflow make the row NaN (not a row of zeros)
CASES = {
    "sum": (lambda x: x.sum(axis=-1), np.array([1e38, 10.0], np.float32)),
    "mean": (lambda x: x.mean(axis=-1), np.array([2.5e37, 2.5], np.float32)),
    "layer_norm": (lambda x: rlx.nn.layer_norm(x),
                   np.stack([np.full(4, np.nan, np.float32), _np_norm(ROWS[1], True, 1e-5)])),
    "rms_norm": (lambda x: rlx.nn.rms_norm(x),
                 np.stack([np.full(4, np.nan, np.float32), _np_norm(ROWS[1], False, 1e-6)])),
    "softmax": (lambda x: rlx.nn.softmax(x, axis=-1),
                np.array([[0, 1, 0, 0], np.exp(ROWS[1] - 4) / np.exp(ROWS[1] - 4).sum()],
                         np.float32)),
}
# Mesa's software drivers (lavapipe, llvmpipe) fold var - var to 0, which made the overflowed
# rows of layer_norm/rms_norm zeros on webgpu, opengl, vulkan and directx: the GPU renderer
# decides a float sub of the same inf/NaN on the bits (gpu_common/expr.py, _guarded_sub).

# a target without f64 accumulates sums in f32: a partial sum past f32 max may be inf there
WIDE_SUMS = ("sum", "mean")


def _has_f64(tgt: object) -> bool:
    rule = tgt.caps.dtype_rule("f64")  # type: ignore[attr-defined]
    return rule is not None and rule.status == "native"


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("target", TARGETS)
def test_f32_overflow_rows_agree(target: str, case: str, request) -> None:
    tgt = executable_target(target)
    if case in WIDE_SUMS and not _has_f64(tgt):
        request.applymarker(pytest.mark.xfail(reason=f"{target} has no f64: its sums "
                                                     "accumulate in f32 (docs/reliability.md)"))
    fn, want = CASES[case]
    try:
        exe = rlx.compile(fn, ROWS, target=target, record=False)
    except LegalizationError as err:  # no legal route (an int8-only target): not a result
        pytest.skip(f"{target} has no legal route for f32 {case}: {err.message[:120]}")
    got = np.asarray(exe(ROWS))
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-6, equal_nan=True)


def test_a_sum_past_the_dtype_max_is_inf() -> None:
    """Rounded once: only a result beyond f32 max overflows (the same on numpy and cpu)."""
    x = np.array([F32_MAX, F32_MAX, -F32_MAX * 0.5], np.float32)
    for target in ("numpy", "cpu"):
        executable_target(target)
        got = rlx.compile(lambda a: a.sum(), x, target=target, record=False)(x)
        assert np.isinf(got) and got > 0, (target, got)
