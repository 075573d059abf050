"""The OpenCL device: pyopencl on the first GPU (else the first device) of any platform.

Kernels are built once per source (comments stripped from the key, so the same kernel in
another layer shares one build), all new kernels of a graph in one program, without fast-math
flags: the reference's NaN and inf
semantics depend on it. A build failure is a ShaderCompileError naming the line and node.
"""

from __future__ import annotations

import os
import threading
from typing import Any

from rlx_core.errors import TargetUnavailableError
from rlx_core.targets.gpu_common.compile_error import compile_error
from rlx_core.targets.gpu_common.kernels import GpuKernel
from rlx_core.targets.gpu_common.plan import AdapterInfo
from rlx_core.targets.gpu_common.runtime import source_key
from rlx_core.targets.opencl.dialect import OPENCL


def _pick(cl: Any) -> Any:
    try:
        platforms = cl.get_platforms()
    except Exception as err:  # no ICD loader / no platform: pyopencl raises its LogicError
        raise TargetUnavailableError(f"no OpenCL platform ({err})") from None
    devices = [d for p in platforms for d in p.get_devices()]
    if not devices:
        raise TargetUnavailableError("no OpenCL device on any platform")
    want = os.environ.get("RLX_OPENCL_DEVICE", "")
    if want:
        named = [d for d in devices if want.lower() in d.name.lower()]
        if not named:
            raise TargetUnavailableError(f"no OpenCL device matches RLX_OPENCL_DEVICE={want!r}")
        return named[0]
    gpus = [d for d in devices if d.type & cl.device_type.GPU]
    return (gpus or devices)[0]


class OpenClDevice:
    """One OpenCL context and in-order queue (gpu_common.runtime.Device)."""

    def __init__(self) -> None:
        import pyopencl as cl

        self.cl = cl
        dev = _pick(cl)
        self.ctx = cl.Context([dev])
        self.queue = cl.CommandQueue(self.ctx)
        self.lock = threading.Lock()
        self.kernels: dict[str, Any] = {}
        self.info = AdapterInfo(
            name=dev.name.strip(), features=tuple(dev.extensions.split()),
            max_storage_buffers=1 << 16, max_buffer_bytes=int(dev.max_mem_alloc_size),
            max_workgroup_size=int(dev.max_work_group_size),
            backend=f"{dev.platform.name.strip()} ({dev.version.strip()})")

    def alloc(self, nbytes: int) -> Any:
        return self.cl.Buffer(self.ctx, self.cl.mem_flags.READ_WRITE, nbytes)

    def upload(self, buf: Any, data: bytes) -> None:
        self.cl.enqueue_copy(self.queue, buf, data, is_blocking=True)

    def download(self, buf: Any, nbytes: int) -> bytes:
        out = bytearray(nbytes)
        self.cl.enqueue_copy(self.queue, out, buf, is_blocking=True)
        return bytes(out)

    def compile(self, kernels: list[GpuKernel]) -> list[Any]:
        """One OpenCL program for every kernel not built yet (PoCL's build costs about a
        second however small the source: one per graph, not one per kernel)."""
        keys = [source_key(k.source) for k in kernels]
        todo = {key: k for key, k in zip(keys, kernels, strict=True) if key not in self.kernels}
        if todo:
            names = {key: f"rlx_k{len(self.kernels) + i}" for i, key in enumerate(todo)}
            source = "\n".join(k.source.replace(f"void {OPENCL.entry}(", f"void {names[key]}(")
                               for key, k in todo.items())
            try:
                prog = self._build(source)
            except self.cl.Error:
                for k in todo.values():  # find the kernel, and the line, that failed
                    try:
                        self._build(k.source)
                    except self.cl.Error as err:
                        raise compile_error("OpenCL", k.name, k.source, str(err)) from None
                raise
            for key, name in names.items():
                self.kernels[key] = self.cl.Kernel(prog, name)
        return [self.kernels[key] for key in keys]

    def _build(self, source: str) -> Any:
        return self.cl.Program(self.ctx, source).build(options=["-cl-std=CL1.2"])

    def launch(self, handle: Any, kernel: GpuKernel, buffers: list[Any]) -> None:
        handle.set_args(*buffers)
        glob = tuple(g * n for g, n in zip(kernel.workgroups, kernel.local, strict=True))
        self.cl.enqueue_nd_range_kernel(self.queue, handle, glob, kernel.local)
