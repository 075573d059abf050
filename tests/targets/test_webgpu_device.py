"""Both WebGPU runtimes are gpu_common's device interface under its program runner.

The shared encoder (webgpu/device.py) is checked on a recording binding (the order and count
of WebGPU calls), then for real: the native runtime's programs are ``GpuProgram``s, and the
browser's awaited program runs on the native wgpu device through the same device class.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import numpy as np
import pytest

import rlx_core as rlx
from rlx_core.targets.gpu_common.kernels import GpuKernel
from rlx_core.targets.gpu_common.runtime import Device, GpuProgram
from rlx_core.targets.webgpu.device import WebGpuDevice, WgpuError
from rlx_core.targets.webgpu.target import AdapterInfo

INFO = AdapterInfo("fake", (), 8, 1 << 20, 256)


class RecordingApi:
    """A WebGPU binding that records each call (buffers are bytearrays; nothing computes)."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def storage_buffer(self, nbytes: int) -> bytearray:
        self.calls.append("buffer")
        return bytearray(nbytes)

    def staging_buffer(self, nbytes: int) -> bytearray:
        self.calls.append("staging")
        return bytearray(nbytes)

    def write(self, buf: bytearray, data: bytes) -> None:
        self.calls.append("write")
        buf[:len(data)] = data

    def pipeline(self, source: str) -> str:
        self.calls.append("pipeline")
        if "bad" in source:
            raise ValueError("validation error")
        return source

    def bind_group(self, pipe: Any, entries: list[tuple[Any, int]]) -> tuple[int, ...]:
        self.calls.append("group")
        return tuple(n for _, n in entries)

    def encoder(self) -> list[str]:
        return []

    def begin_pass(self, enc: list[str]) -> list[str]:
        return enc

    def dispatch(self, cpass: list[str], pipe: Any, group: Any, wg: tuple[int, int, int]) -> None:
        cpass.append("dispatch")

    def end_pass(self, cpass: list[str]) -> None:
        pass

    def copy(self, enc: list[str], src: bytearray, dst: bytearray, nbytes: int) -> None:
        dst[:nbytes] = src[:nbytes]
        enc.append("copy")

    def submit(self, enc: list[str]) -> None:
        self.calls.append("submit:" + ",".join(enc))

    def read(self, stage: bytearray, nbytes: int) -> bytes:
        self.calls.append("read")
        return bytes(stage[:nbytes])

    async def read_async(self, stage: bytearray, nbytes: int) -> bytes:
        return self.read(stage, nbytes)


def _run_coroutine(coro: Any) -> Any:
    """``asyncio.run`` on a thread of its own: an earlier test in this worker (Playwright's
    sync API) may leave an event loop running on the main thread, where asyncio.run refuses."""
    box: dict[str, Any] = {}

    def main() -> None:
        try:
            box["value"] = asyncio.run(coro)
        except BaseException as exc:  # re-raised on the test's thread
            box["error"] = exc

    t = threading.Thread(target=main)
    t.start()
    t.join()
    if "error" in box:
        raise box["error"]
    return box["value"]


def _kernel(source: str = "fn main() {}  // %y = add") -> GpuKernel:
    return GpuKernel(name="k0", kind="elementwise", source=source, reads=("x",),
                     writes=("y",), workgroups=(1, 1, 1), local=(256, 1, 1))


def test_the_encoder_records_launches_and_submits_once_per_download() -> None:
    api = RecordingApi()
    dev = WebGpuDevice(api, INFO)
    assert isinstance(dev, Device)
    x, y = dev.alloc(16), dev.alloc(16)
    (pipe,) = dev.compile([_kernel()])
    assert dev.compile([_kernel("fn main() {}  // %z = add")]) == [pipe]  # comments: one key
    dev.upload(x, b"\x01" * 16)
    for _ in range(2):  # the second call reuses the bind groups and the staging buffer
        dev.launch(pipe, _kernel(), [x, y])
        dev.launch(pipe, _kernel(), [x, y])
        assert dev.download(y, 16) == bytes(16)
    assert api.calls == ["buffer", "buffer", "pipeline", "write", "group", "staging",
                         "submit:dispatch,dispatch,copy", "read",
                         "submit:dispatch,dispatch,copy", "read"]


def test_an_upload_submits_the_launches_recorded_before_it() -> None:
    api = RecordingApi()
    dev = WebGpuDevice(api, INFO)
    x, y = dev.alloc(4), dev.alloc(4)
    (pipe,) = dev.compile([_kernel()])
    dev.launch(pipe, _kernel(), [x, y])
    dev.upload(x, b"\x02" * 4)  # the launch must read the old contents: submitted first
    assert api.calls[-2:] == ["submit:dispatch", "write"]


def test_a_rejected_shader_is_a_typed_error() -> None:
    dev = WebGpuDevice(RecordingApi(), INFO)
    with pytest.raises(WgpuError, match="validation error"):
        dev.compile([_kernel("bad")])


def _native() -> Any:
    pytest.importorskip("wgpu")
    from rlx_core.errors import TargetUnavailableError
    from rlx_core.targets.webgpu.runtime_native import NativeRuntime

    try:
        return NativeRuntime.open()
    except TargetUnavailableError as err:
        pytest.skip(f"no native WebGPU adapter: {err}")


def _mlp(x: Any, w: Any) -> Any:
    return rlx.nn.softmax(rlx.nn.gelu(x @ w), axis=-1)


def test_native_and_browser_programs_share_the_runner_on_a_real_device() -> None:
    from rlx_core.targets.webgpu.runtime_browser import BrowserProgram

    rt = _native()
    assert isinstance(rt, WebGpuDevice)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 8)).astype(np.float32)
    w = rng.standard_normal((8, 16)).astype(np.float32)
    exe = rlx.compile(_mlp, x, w, target="webgpu")
    prog = exe.program.info["runtime"]
    assert type(prog) is GpuProgram and prog.dev is rt
    want = rlx.compile(_mlp, x, w, target="numpy")(x, w)
    np.testing.assert_allclose(exe(x, w), want, rtol=1e-5, atol=1e-6)
    # the browser's program (outputs awaited) on the same device: only the readback differs
    awaited = BrowserProgram(rt, exe.program.info["plan"], {})
    (got,) = _run_coroutine(awaited.run_async([x, w]))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
