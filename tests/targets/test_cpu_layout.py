"""The CPU's NCHW8c layout plan (rlx_core/targets/cpu/layout.py): activations stay blocked
between blocked convolutions (1x1 read in place, padded 3x3, stride 2), depthwise convs,
poolings and channel concats, with every epilogue (bias, residual, ReLU, clip), against the
numpy reference; what pins a value to NCHW (graph outputs, channels not whole blocks, a kernel
without a blocked form); the switch that turns the plan off."""

from __future__ import annotations

import numpy as np
import pytest

import rlx_core as rlx
from rlx_core import nn
from rlx_core.targets.cpu.target import CpuTarget
from tests.targets.checks import rel_error
from tests.targets.simd import skip_unless_simd

cpu_ok, cpu_why = CpuTarget().available()
# slow: each test compiles programs with the blocked conv kernels (tens of seconds of C
# compile apiece on a cold cache); tests/conftest.py runs slow tests first
pytestmark = [pytest.mark.skipif(not cpu_ok, reason=f"cpu target unavailable: {cpu_why}"),
              pytest.mark.slow]



def _net(rng: np.random.Generator):
    """A short CNN touching every blocked kernel; returns (f, names of interior values)."""
    arrays: dict[str, np.ndarray] = {}  # drawn once: f is traced once per target

    def p(shape, name, scale=0.25):
        if name not in arrays:
            arrays[name] = (rng.standard_normal(shape) * scale).astype(np.float32)
        return rlx.param(arrays[name], name)

    def relu6(y):
        return rlx.minimum(rlx.maximum(y, 0.0), 6.0)

    def f(a):  # a: 2 x 16 x 13 x 11
        y = nn.relu(nn.conv2d(a, p((32, 16, 3, 3), "stem"), p((32,), "b0"), padding=1))
        y = nn.max_pool2d(y, (3, 3), (2, 2), (1, 1))  # 7 x 6
        z = relu6(nn.conv2d(y, p((48, 32, 1, 1), "e1"), p((48,), "b1")))  # 1x1 in place
        z = relu6(nn.conv2d(z, p((48, 1, 3, 3), "d1"), p((48,), "b2"), padding=1, groups=48))
        z = nn.conv2d(z, p((32, 48, 1, 1), "s1"), p((32,), "b3")) + y  # residual
        d = nn.conv2d(z, p((32, 1, 5, 5), "d2"), None, stride=2, padding=2, groups=32)
        u = nn.relu(nn.conv2d(z, p((24, 32, 3, 3), "c2"), None, stride=2, padding=1))
        v = nn.avg_pool2d(z, (3, 3), (2, 2), (1, 1))
        cat = rlx.concat([d, u, v], axis=1)  # 88 channels at 4 x 3
        return nn.conv2d(cat, p((20, 88, 1, 1), "head"), p((20,), "b4"))

    return f


def test_a_chain_of_blocked_kernels_matches_the_reference() -> None:
    skip_unless_simd()
    rng = np.random.default_rng(0)
    f = _net(rng)
    x = rng.standard_normal((2, 16, 13, 11)).astype(np.float32)
    exe = rlx.compile(f, x, target="cpu", record=False)
    info = exe.program.info
    impls = {k["impl"] for k in info["kernels"].values()}
    assert {"rlx-conv-blocked", "rlx-conv-blocked-dw", "rlx-pool", "concat"} <= impls
    blocked = set(info["nchw8c"])
    kinds = {n.name: n.op for n in exe.lir.nodes}
    # every pooling, concat and interior conv output is blocked; the head writes NCHW
    assert {v for v, op in kinds.items()
            if op in ("max_pool2d", "avg_pool2d", "concat")} <= blocked
    assert exe.lir.outputs[0] not in blocked
    assert sum(kinds[v].startswith("conv2d") for v in blocked) == 6  # all but the head
    want = rlx.compile(f, x, target="numpy", record=False)(x)
    assert rel_error(exe(x), want) < 1e-5


def test_what_pins_a_value_to_nchw() -> None:
    """A graph output, a value read by a kernel with no blocked form (an elementwise op
    after a reshape-free use: the sum of two convs left unfused), channels that are not whole
    blocks: all NCHW; the conv between blocked neighbours stays blocked."""
    skip_unless_simd()
    rng = np.random.default_rng(1)
    w1 = (rng.standard_normal((24, 16, 3, 3)) * 0.2).astype(np.float32)
    w2 = (rng.standard_normal((20, 24, 1, 1)) * 0.2).astype(np.float32)
    w3 = (rng.standard_normal((16, 20, 1, 1)) * 0.2).astype(np.float32)
    w4 = (rng.standard_normal((16, 24, 3, 3)) * 0.2).astype(np.float32)

    def f(a):
        y = nn.conv2d(a, rlx.param(w1, "w1"), None, padding=1)  # read by two convs: blocked
        z = nn.conv2d(y, rlx.param(w2, "w2"))  # 20 channels: NCHW
        t = nn.conv2d(z, rlx.param(w3, "w3"))
        s = nn.conv2d(y, rlx.param(w4, "w4"), None, padding=1)
        return t * s, s  # s: a graph output; t: read by a multiply

    x = rng.standard_normal((1, 16, 9, 9)).astype(np.float32)
    exe = rlx.compile(f, x, target="cpu", record=False)
    convs = [n.name for n in exe.lir.nodes if n.op.startswith("conv2d")]
    assert set(exe.program.info["nchw8c"]) == {convs[0]}
    want = rlx.compile(f, x, target="numpy", record=False)(x)
    for g_, w_ in zip(exe(x), want, strict=True):
        assert rel_error(g_, w_) < 1e-5


def test_the_switch_turns_the_plan_off(monkeypatch: pytest.MonkeyPatch) -> None:
    skip_unless_simd()
    monkeypatch.setenv("RLX_CPU_LAYOUT", "0")
    rng = np.random.default_rng(2)
    f = _net(rng)
    x = rng.standard_normal((1, 16, 13, 11)).astype(np.float32)
    exe = rlx.compile(f, x, target="cpu", record=False)
    assert exe.program.info["nchw8c"] == []
    assert "rlx-conv-blocked-dw" not in {k["impl"] for k in exe.program.info["kernels"].values()}
    want = rlx.compile(f, x, target="numpy", record=False)(x)
    assert rel_error(exe(x), want) < 1e-5


def test_a_residual_in_the_other_layout() -> None:
    """The blocked conv's residual has its own layout: an NCHW graph input added to a
    blocked output, a blocked value added to the NCHW graph output (ResNet's last block)."""
    skip_unless_simd()
    rng = np.random.default_rng(3)
    w1 = (rng.standard_normal((16, 16, 3, 3)) * 0.2).astype(np.float32)
    w2 = (rng.standard_normal((16, 16, 1, 1)) * 0.2).astype(np.float32)
    w3 = (rng.standard_normal((16, 16, 3, 3)) * 0.2).astype(np.float32)
    b3 = rng.standard_normal(16).astype(np.float32)

    def f(a):
        y = nn.conv2d(a, rlx.param(w1, "w1"), None, padding=1)
        z = nn.relu(nn.conv2d(y, rlx.param(w2, "w2")) + a)
        return nn.relu(nn.conv2d(z, rlx.param(w3, "w3"), rlx.param(b3, "b3"), padding=1) + y)

    x = rng.standard_normal((2, 16, 7, 7)).astype(np.float32)
    exe = rlx.compile(f, x, target="cpu", record=False)
    fused = [n for n in exe.lir.nodes if n.op == "conv2d_fused"]
    assert len(fused) == 2 and all(n.attr("residual") for n in fused)
    convs = [n.name for n in exe.lir.nodes if n.op.startswith("conv2d")]
    assert set(exe.program.info["nchw8c"]) == set(convs[:2])
    want = rlx.compile(f, x, target="numpy", record=False)(x)
    assert rel_error(exe(x), want) < 1e-5
