"""WebGPU legalization: f64 ops outside the emulation library and unprovable i64 fail with
their documented codes, f16 follows the adapter's shader-f16 feature, and the table carries the
live adapter's limits."""

from __future__ import annotations

import numpy as np
import pytest

import rlx_core as rlx
from rlx_core.dispatch.errors import LegalizationError
from rlx_core.targets.registry import get_target
from rlx_core.targets.webgpu.caps import CAPS

TGT = get_target("webgpu")
OK, WHY = TGT.available()
needs_adapter = pytest.mark.skipif(not OK, reason=f"no WebGPU adapter here: {WHY}")


def test_f64_outside_the_emulated_ops_fails_with_rlx_l002_and_a_cast_hint() -> None:
    # f64 arithmetic is emulated (webgpu/df64.py, tests/targets/test_webgpu_f64.py); an op the
    # library lacks is refused, not demoted to f32
    x = np.ones((3,), np.float64)
    rlx.lower(lambda a: a * 2.0 + 1.0, x, target="webgpu")
    with pytest.raises(LegalizationError) as err:
        rlx.lower(lambda a: np.tanh(a * 2.0), x, target="webgpu")
    assert "RLX-L002" in err.value.codes
    assert "f32" in str(err.value)


def test_i64_input_arithmetic_fails_with_rlx_l004() -> None:
    ids = np.arange(4, dtype=np.int64)
    with pytest.raises(LegalizationError) as err:
        rlx.lower(lambda a: a * 3 + 1, ids, target="webgpu")
    assert "RLX-L004" in err.value.codes
    assert "i32" in str(err.value)


@needs_adapter
def test_i64_that_provably_fits_is_narrowed_and_runs() -> None:
    # iota is i64 in the graph but its values are 0..7: narrowed to i32, no i64 reaches WGSL
    def f(x):
        return x + rlx.arange(8).astype("f32")

    x = np.ones(8, np.float32)
    exe = rlx.compile(f, x, target="webgpu")
    np.testing.assert_array_equal(exe(x), x + np.arange(8, dtype=np.float32))
    assert all("i64" not in src for src in exe.sources.values())


@needs_adapter
def test_f16_follows_the_adapter_feature() -> None:
    x = np.linspace(-2, 2, 16).astype(np.float16)
    has = "shader-f16" in TGT.adapter().features
    assert ("shader-f16" in TGT.caps.enabled) == has
    if has:
        got = rlx.compile(lambda a: a * a, x, target="webgpu")(x)
        np.testing.assert_allclose(got, (x * x).astype(np.float16), rtol=1e-3)
    else:
        with pytest.raises(LegalizationError) as err:
            rlx.compile(lambda a: a * a, x, target="webgpu")
        assert "RLX-L003" in err.value.codes


def test_f16_is_rejected_without_the_feature() -> None:
    from rlx_core.dispatch.legalize import legalize_graph
    from rlx_core.passes.base import CompileOptions

    class NoF16:
        caps = CAPS  # the defaults: shader-f16 known but not enabled

    g = rlx.trace(lambda a: a * a, np.ones(4, np.float16))
    with pytest.raises(LegalizationError) as err:
        legalize_graph(g, NoF16(), CompileOptions(target="webgpu"))
    assert "RLX-L003" in err.value.codes


@needs_adapter
def test_limits_come_from_the_adapter() -> None:
    caps, info = TGT.caps, TGT.adapter()
    assert caps.limits.source == f"adapter {info.name}"
    assert caps.limits.max_storage_buffers == info.max_storage_buffers >= 8
    assert caps.verification == "executes"


def test_unavailable_target_reports_why(monkeypatch: pytest.MonkeyPatch) -> None:
    from rlx_core.errors import TargetUnavailableError
    from rlx_core.targets.webgpu import runtime_native
    from rlx_core.targets.webgpu.target import WebGpuTarget

    def no_adapter(cls):
        raise TargetUnavailableError("no WebGPU adapter found")

    monkeypatch.setattr(runtime_native.NativeRuntime, "open", classmethod(no_adapter))
    t = WebGpuTarget()
    assert t.available() == (False, "no WebGPU adapter found")
    with pytest.raises(TargetUnavailableError):
        t.build(None, None)  # type: ignore[arg-type]
