"""The webgpu-browser target, kernel side: typed errors without a browser, the protocol's
replies, and a round trip of real compiled models through the wire format, executed on native
wgpu by a stand-in browser, against the numpy reference.

The real round trip (a Python kernel -> JupyterLab in Chromium -> navigator.gpu -> back) is
tests/lite/test_jupyterlab_browser.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import rlx_core as rlx
from rlx_core.errors import TargetUnavailableError
from rlx_core.targets.registry import get_target
from rlx_core.targets.webgpu_browser import protocol
from rlx_core.targets.webgpu_browser.bridge import BrowserBridge
from rlx_core.targets.webgpu_browser.errors import (
    BrowserNoGpuError,
    BrowserRunError,
    NoBrowserError,
)
from tests.webgpu_browser.wire_browser import FakeComm, WireBrowser


@pytest.fixture(autouse=True)
def fresh_bridge() -> Iterator[None]:
    BrowserBridge._shared, BrowserBridge._failure = None, None
    yield
    BrowserBridge._shared, BrowserBridge._failure = None, None


def test_outside_a_kernel_the_target_is_unavailable_with_the_reason() -> None:
    tgt = get_target("webgpu-browser")
    ok, why = tgt.available()
    assert not ok and "no Jupyter kernel" in why
    with pytest.raises(NoBrowserError) as err:
        tgt.adapter()
    assert err.value.code == "RLX-B001" and "labextension" in (err.value.hint or "")
    with pytest.raises(TargetUnavailableError, match="webgpu-browser"):
        rlx.compile(lambda x: x + 1, np.ones(3, np.float32), target="webgpu-browser")
    assert any(t.name == "webgpu-browser" and not t.available for t in rlx.targets())


def test_replies_map_to_typed_errors() -> None:
    base = {"rlx": 1, "id": "r1", "ok": False}
    with pytest.raises(BrowserNoGpuError) as e1:
        protocol.check_reply({**base, "kind": "no-gpu", "error": "no navigator.gpu"}, "hello")
    assert e1.value.code == "RLX-B002"
    with pytest.raises(BrowserRunError, match="rejected a generated shader: bad token"):
        protocol.check_reply({**base, "kind": "shader", "error": "bad token"}, "load")
    with pytest.raises(protocol.ProtocolError, match="unknown protocol"):
        protocol.check_reply({"rlx": 7, "ok": True}, "run")
    with pytest.raises(protocol.ProtocolError, match="incomplete"):
        protocol.adapter_info({"adapter": {"limits": {}}})


def test_a_reply_that_never_comes_is_no_browser() -> None:
    comm = FakeComm()  # nobody on the other end
    bridge = BrowserBridge(comm)
    with pytest.raises(NoBrowserError, match="did not answer 'hello' within 0.2 s"):
        bridge.call("hello", timeout=0.2)


@pytest.fixture
def wired() -> Iterator[WireBrowser]:
    """A connected bridge whose browser runs on native wgpu (skips without an adapter)."""
    try:
        from rlx_core.targets.webgpu.runtime_native import NativeRuntime

        device = NativeRuntime.open().device
    except (ImportError, TargetUnavailableError) as err:
        pytest.skip(f"no native WebGPU adapter for the stand-in browser: {err}")
    comm = FakeComm()
    bridge = BrowserBridge(comm)
    comm.browser = WireBrowser(device, comm.reply)
    reply, _ = bridge.call("hello", timeout=30)
    bridge.info = protocol.adapter_info(reply)
    BrowserBridge._shared = bridge
    BrowserBridge.generation += 1
    yield comm.browser


def test_mlp_round_trips_through_the_wire_format(wired: WireBrowser) -> None:
    rng = np.random.default_rng(0)
    w1 = rng.standard_normal((8, 16)).astype(np.float32)
    w2 = rng.standard_normal((16, 4)).astype(np.float32)

    def mlp(x: Any) -> Any:
        return rlx.nn.softmax(rlx.nn.gelu(x @ w1) @ w2, axis=-1)

    x = rng.standard_normal((3, 8)).astype(np.float32)
    exe = rlx.compile(mlp, x, target="webgpu-browser")
    assert exe.program.info["route"] == "comm"
    want = rlx.compile(mlp, x, target="numpy")(x)
    for scale in (1.0, -2.0):  # the second call reuses the loaded program
        np.testing.assert_allclose(exe(x * scale), rlx.compile(mlp, x, target="numpy")(x * scale),
                                   rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(exe(x), want, rtol=1e-5, atol=1e-6)
    ops = [r["op"] for r in wired.requests]
    assert ops.count("load") == 1 and ops.count("run") == 3
    load = next(r for r in wired.requests if r["op"] == "load")
    assert set(load["uploads"]) >= set(exe.program.info["plan"].params)


def test_int_outputs_and_multiple_results(wired: WireBrowser) -> None:
    def f(a: Any, b: Any) -> Any:
        return a * b + 3, (a > b)

    a = np.arange(6, dtype=np.int32).reshape(2, 3)
    b = np.full((2, 3), 2, np.int32)
    got = rlx.compile(f, a, b, target="webgpu-browser")(a, b)
    want = rlx.compile(f, a, b, target="numpy")(a, b)
    for g, w in zip(got, want, strict=False):
        np.testing.assert_array_equal(np.asarray(g), w)


def test_a_reloaded_tab_loads_the_program_again(wired: WireBrowser) -> None:
    x = np.linspace(-1, 1, 5, dtype=np.float32)
    exe = rlx.compile(lambda v: rlx.nn.relu(v) * 2, x, target="webgpu-browser")
    exe(x)
    wired.programs.clear()  # what a reload does: the tab forgets its programs
    BrowserBridge.generation += 1  # ... and the kernel reconnects
    np.testing.assert_allclose(exe(x), np.maximum(x, 0) * 2)
    assert [r["op"] for r in wired.requests].count("load") == 2


def test_a_lost_device_is_reloaded_without_a_new_connection(wired: WireBrowser) -> None:
    x = np.linspace(-1, 1, 5, dtype=np.float32)
    exe = rlx.compile(lambda v: v * v, x, target="webgpu-browser")
    exe(x)
    wired.programs.clear()  # the tab answers unknown-program on the next run
    np.testing.assert_allclose(exe(x), x * x)
    assert [r["op"] for r in wired.requests][-3:] == ["run", "load", "run"]
