"""A stand-in browser for the kernel-side tests: it receives exactly what crosses the comm (the
JSON plan and raw bytes) and runs it on native wgpu the way extension/src/executor.ts does."""

from __future__ import annotations

import threading
from typing import Any

from rlx_core.targets.webgpu_browser import protocol


class WireBrowser:
    """Answers requests like the extension's executor; ``deliver`` is called from its own
    thread, as JupyterLab's subshell does."""

    def __init__(self, device: Any, on_reply: Any):
        self.device, self.on_reply = device, on_reply
        self.programs: dict[str, dict[str, Any]] = {}
        self.requests: list[dict[str, Any]] = []

    def receive(self, data: dict[str, Any], buffers: list[bytes]) -> None:
        self.requests.append(data)
        if "id" not in data:
            self.programs.pop(data.get("program", ""), None)
            return
        threading.Thread(target=self._answer, args=(data, buffers)).start()

    def _answer(self, data: dict[str, Any], buffers: list[bytes]) -> None:
        import wgpu

        reply: dict[str, Any] = {"rlx": protocol.VERSION, "id": data["id"], "ok": True}
        out: list[bytes] = []
        dev = self.device
        if data["op"] == "hello":
            reply["adapter"] = {"name": "wire test adapter", "features": [], "limits": {
                "maxStorageBuffersPerShaderStage": 8, "maxBufferSize": 1 << 28,
                "maxStorageBufferBindingSize": 1 << 27, "maxComputeWorkgroupStorageSize": 16384,
                "maxComputeInvocationsPerWorkgroup": 256}}
        elif data["op"] == "load":
            plan = data["plan"]
            usage = wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_DST | \
                wgpu.BufferUsage.COPY_SRC
            bufs = {b["name"]: dev.create_buffer(size=b["nbytes"], usage=usage)
                    for b in plan["buffers"]}
            sizes = {b["name"]: b["nbytes"] for b in plan["buffers"]}
            steps = []
            for k in plan["kernels"]:
                mod = dev.create_shader_module(code=k["source"])
                pipe = dev.create_compute_pipeline(layout="auto",
                                                   compute={"module": mod, "entry_point": "main"})
                entries = [{"binding": i, "resource": {"buffer": bufs[v], "offset": 0,
                                                       "size": sizes[v]}}
                           for i, v in enumerate(k["bindings"])]
                steps.append((pipe, dev.create_bind_group(layout=pipe.get_bind_group_layout(0),
                                                          entries=entries), k["workgroups"]))
            self.programs[data["program"]] = {"plan": plan, "bufs": bufs, "sizes": sizes,
                                              "steps": steps}
            self._write(data["program"], data["uploads"], buffers)
        elif data["op"] == "run":
            p = self.programs.get(data["program"])
            if p is None:
                reply = {"rlx": 1, "id": data["id"], "ok": False, "kind": "unknown-program",
                         "error": "not loaded"}
            else:
                self._write(data["program"], data["uploads"], buffers)
                enc = dev.create_command_encoder()
                cpass = enc.begin_compute_pass()
                for pipe, group, (x, y, z) in p["steps"]:
                    cpass.set_pipeline(pipe)
                    cpass.set_bind_group(0, group)
                    cpass.dispatch_workgroups(x, y, z)
                cpass.end()
                dev.queue.submit([enc.finish()])
                reply["outputs"] = p["plan"]["outputs"]
                out = [bytes(dev.queue.read_buffer(p["bufs"][o])) for o in reply["outputs"]]
        self.on_reply(reply, out)

    def _write(self, program: str, names: list[str], buffers: list[bytes]) -> None:
        p = self.programs[program]
        for n, b in zip(names, buffers, strict=False):
            self.device.queue.write_buffer(p["bufs"][n], 0, b)


class FakeComm:
    """The kernel's comm, wired to a WireBrowser instead of a frontend."""

    def __init__(self) -> None:
        self.browser: WireBrowser | None = None
        self.handler: Any = None
        self.closed = False

    def on_msg(self, handler: Any) -> None:
        self.handler = handler

    def send(self, data: dict[str, Any], buffers: list[bytes] | None = None) -> None:
        if self.browser is not None:
            self.browser.receive(data, list(buffers or ()))

    def close(self) -> None:
        self.closed = True

    def reply(self, data: dict[str, Any], buffers: list[bytes]) -> None:
        self.handler({"content": {"data": data}, "buffers": [memoryview(b) for b in buffers]})
