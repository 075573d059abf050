"""bf16 on every GPU dialect: 16 bits in a u32, computed in f32, rounded after every op.

The targets that execute here run it against the numpy reference (bit-exact: both compute in
f32 and round to nearest even); the host-array conversion is checked without a device.
"""

from __future__ import annotations

import struct

import numpy as np
import pytest

import rlx_core as rlx
from rlx_core.ir import dtypes as dt
from rlx_core.ir.graph import TensorType
from rlx_core.targets.gpu_common import host_arrays
from rlx_core.targets.gpu_common.checked_target import unit
from rlx_core.targets.gpu_common.kernels import render_graph
from rlx_core.targets.numpy_ref.semantics import round_bf16
from rlx_core.targets.registry import get_target
from tests.dispatch.graphs import GraphMaker

EXECUTING = ("webgpu", "vulkan", "opengl", "directx", "opencl")


def _graph():
    m = GraphMaker()
    a, b = m.input("a", "bf16", (5, 40)), m.input("b", "bf16", (40, 3))
    s = m.op("exp", [m.op("mul", [a, m.op("add", [a, a])])])
    mm = m.op("dot_general", [a, b], contract=((1,), (0,)))
    return m.graph(s, m.op("reduce_sum", [s], axes=(1,)), mm,
                   m.op("cast", [mm], dtype=dt.f32))


def _inputs() -> list[np.ndarray]:
    rng = np.random.default_rng(3)
    a = round_bf16(rng.standard_normal((5, 40)).astype(np.float32) * 0.7)
    b = round_bf16(rng.standard_normal((40, 3)).astype(np.float32))
    a[0, :4] = [np.nan, np.inf, -np.inf, 3.0e38]  # NaN stays NaN, 3e38 * 6 overflows to inf
    return [a, b]


@pytest.mark.parametrize("target", EXECUTING)
def test_bf16_kernels_match_the_reference(target: str) -> None:
    ok, why = get_target(target).available()
    if not ok:
        pytest.skip(f"{target} unavailable here: {why}")
    g, xs = _graph(), _inputs()
    got = rlx.compile(g, *xs, target=target)(*xs)
    want = rlx.compile(g, *xs, target="numpy")(*xs)
    ew, red, mm, mm32 = (np.asarray(v) for v in got)
    np.testing.assert_array_equal(ew, want[0])  # elementwise: the same roundings, bit for bit
    for a, b in ((red, want[1]), (mm, want[2]), (mm32, want[3])):
        np.testing.assert_allclose(a, b, rtol=2 ** -7, atol=1e-6)  # sums may associate apart
    assert np.isnan(ew[0, 0]) and np.isinf(ew[0, 3])


@pytest.mark.parametrize("target", ("cuda", "rocm", "metal"))
def test_bf16_kernels_pass_the_vendor_checker(target: str) -> None:
    tgt = get_target(target)
    ok, why = tgt.available()
    if not ok:
        pytest.skip(f"{target} checker unavailable: {why}")
    _, _, lir, _ = rlx.lower(_graph(), target=target, record=False)
    source = unit(tgt.dialect, render_graph(tgt.dialect, lir))
    assert "rlx_bf16_bits" in source and "<< 16u" in source
    assert tgt.check(source)


def test_host_arrays_hold_bf16_bits_with_and_without_numpy() -> None:
    t = TensorType(dt.bf16, (4,))
    vals = [1.0, 1.00390625, float("nan"), -3.4e38]  # 1 + 2^-8 is a tie: rounds to even (1.0)
    data = host_arrays.to_storage(np.array(vals, np.float32), t)
    bits = struct.unpack("<4I", data)
    assert bits == (0x3F80, 0x3F80, 0x7FC0, 0xFF80)  # -3.4e38 rounds past the range: -inf
    assert [host_arrays._convert(v, dt.bf16) for v in vals] == list(bits)
    back = host_arrays.from_storage(data, t)
    np.testing.assert_array_equal(back, round_bf16(np.array(vals, np.float32)))
