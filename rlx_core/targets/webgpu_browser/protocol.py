"""The rlx.webgpu comm protocol, as pure functions (no kernel needed, so tests run anywhere).

Kernel -> browser, one JSON ``data`` dict per comm message plus binary buffers:

    {"rlx": 1, "id": "r1", "op": "hello"}
    {"rlx": 1, "id": "r2", "op": "load", "program": "p1", "plan": PLAN, "uploads": [NAME, ...]}
    {"rlx": 1, "id": "r3", "op": "run",  "program": "p1", "uploads": [NAME, ...]}
    {"rlx": 1, "op": "free", "program": "p1"}                    (no reply)

``uploads`` names the buffers whose bytes ride along, in order (tuple constants and parameters
at load; inputs, and parameters that changed, at run). PLAN is a ``GpuPlan`` without the
constant kernels: buffers (name, bytes), kernels (WGSL source, bindings reads then writes,
workgroups) and the output names. The browser answers every message that has an ``id``:

    {"rlx": 1, "id": "r1", "ok": true, "adapter": {"name", "features", "limits"}}
    {"rlx": 1, "id": "r3", "ok": true, "outputs": [NAME, ...]}     + one buffer per output
    {"rlx": 1, "id": "rN", "ok": false, "kind": "no-gpu|shader|run|protocol|unknown-program",
     "error": "the browser's message"}
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rlx_core.errors import RlxError
from rlx_core.targets.webgpu.target import AdapterInfo, GpuPlan
from rlx_core.targets.webgpu_browser.errors import BrowserNoGpuError, BrowserRunError

VERSION = 1
COMM_TARGET = "rlx.webgpu"


class ProtocolError(RlxError):
    """A reply that does not follow the protocol (an extension of another version)."""

    code = "RLX-B005"


class ProgramLostError(BrowserRunError):
    """The tab no longer holds the program (its GPU device was lost): load it again."""


def request(op: str, rid: str | None, **fields: Any) -> dict[str, Any]:
    msg: dict[str, Any] = {"rlx": VERSION, "op": op, **fields}
    if rid is not None:
        msg["id"] = rid
    return msg


def plan_json(plan: GpuPlan) -> dict[str, Any]:
    """What the browser needs to run ``plan``: no dtypes (it moves bytes), no constant kernels."""
    return {
        "graph": plan.graph,
        "buffers": [{"name": b.name, "nbytes": b.nbytes, "role": b.role}
                    for b in plan.device_buffers],
        "kernels": [{"name": k.name, "source": k.source, "bindings": [*k.reads, *k.writes],
                     "workgroups": list(k.workgroups)}
                    for k in plan.kernels if k.constant is None],
        "outputs": list(plan.readback),  # the guards' buffers come back too
    }


def check_reply(reply: dict[str, Any], what: str) -> dict[str, Any]:
    """Return ``reply`` when it says ok; else raise the typed error its ``kind`` stands for."""
    if not isinstance(reply, dict) or reply.get("rlx") != VERSION:
        raise ProtocolError(f"{what}: the browser answered in an unknown protocol ({reply!r:.200})",
                            hint="reinstall rlx-explorer so the kernel package and the "
                                 "JupyterLab extension have the same version, then reload the "
                                 "page")
    if reply.get("ok"):
        return reply
    kind, text = str(reply.get("kind", "run")), str(reply.get("error", "no message"))
    if kind == "no-gpu":
        raise BrowserNoGpuError(f"the attached browser has no usable WebGPU: {text}")
    if kind == "unknown-program":
        raise ProgramLostError(f"{what}: {text}")
    if kind == "shader":
        raise BrowserRunError(f"{what}: the browser rejected a generated shader: {text}",
                              hint="a renderer bug: report it with `rlx compile FILE --target "
                                   "webgpu --emit source`")
    raise BrowserRunError(f"{what}: the browser failed ({kind}): {text}",
                          hint="reload the page if the GPU device was lost, then run again")


def adapter_info(reply: dict[str, Any]) -> AdapterInfo:
    """The adapter the browser opened, in the same form as the native runtime's."""
    a = reply.get("adapter") or {}
    lim = a.get("limits") or {}
    try:
        return AdapterInfo(
            name=str(a.get("name") or "browser adapter"),
            features=tuple(sorted(str(f) for f in a.get("features", ()))),
            max_storage_buffers=int(lim["maxStorageBuffersPerShaderStage"]),
            max_buffer_bytes=int(min(lim["maxBufferSize"], lim["maxStorageBufferBindingSize"])),
            max_workgroup_size=int(lim["maxComputeInvocationsPerWorkgroup"]),
            backend="browser " + str(a.get("backend") or "webgpu"))
    except (KeyError, TypeError, ValueError) as err:
        raise ProtocolError(f"hello: the browser's adapter limits are incomplete ({err})") from None


def output_bytes(plan: GpuPlan, reply: dict[str, Any],
                 buffers: Sequence[bytes | memoryview]) -> dict[str, bytes]:
    """Pair the reply's output names with its buffers; check every output came back whole."""
    names = list(reply.get("outputs") or ())
    if len(names) != len(buffers):
        raise ProtocolError(f"run @{plan.graph}: {len(names)} output names but "
                            f"{len(buffers)} buffers")
    got = {n: bytes(b) for n, b in zip(names, buffers, strict=False)}
    for o in dict.fromkeys(plan.outputs):
        if o not in got:
            raise ProtocolError(f"run @{plan.graph}: the browser sent no data for %{o}")
        if len(got[o]) < plan.buffer(o).nbytes:
            raise ProtocolError(f"run @{plan.graph}: %{o} came back with {len(got[o])} bytes, "
                                f"expected {plan.buffer(o).nbytes}")
    return got
