"""The OpenGL device: moderngl on a headless EGL context (Mesa llvmpipe without a GPU).

A GL context is current on one thread only, so the device owns one worker thread that creates
the context and makes every GL call; callers on any thread hand it work and wait. Dependent
dispatches are separated by ``glMemoryBarrier`` (a compute write is not visible to the next
dispatch or to a buffer read without it).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from rlx_core.errors import TargetUnavailableError
from rlx_core.targets.gpu_common.compile_error import compile_error
from rlx_core.targets.gpu_common.kernels import GpuKernel
from rlx_core.targets.gpu_common.plan import AdapterInfo
from rlx_core.targets.gpu_common.runtime import source_key

T = TypeVar("T")
# Mesa's GLSL compiler: "0:12(5): error: ..."
GLSL_LINE = r"\d+:(\d+)\(\d+\): error"


class OpenGlDevice:
    """One EGL context, used from its own thread (gpu_common.runtime.Device)."""

    def __init__(self) -> None:
        import moderngl

        self.mgl = moderngl
        self.lock = threading.Lock()
        self.shaders: dict[str, Any] = {}
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="rlx-opengl")
        self.ctx = self._call(self._open)
        info = self._call(lambda: dict(self.ctx.info))  # GL queries only on the GL thread
        extensions = self._call(lambda: tuple(sorted(self.ctx.extensions)))
        self.info = AdapterInfo(
            name=str(info["GL_RENDERER"]),
            features=extensions,
            max_storage_buffers=int(info["GL_MAX_COMPUTE_SHADER_STORAGE_BLOCKS"]),
            max_buffer_bytes=int(info["GL_MAX_SHADER_STORAGE_BLOCK_SIZE"]),
            max_workgroup_size=int(info["GL_MAX_COMPUTE_WORK_GROUP_INVOCATIONS"]),
            backend=f"OpenGL {info['GL_VERSION']}")

    def _open(self) -> Any:
        try:
            return self.mgl.create_standalone_context(backend="egl", require=430)
        except Exception as err:  # no libEGL, no driver, or no GL 4.3: moderngl's Error
            raise TargetUnavailableError(f"no OpenGL 4.3 context on EGL ({err})") from None

    def _call(self, fn: Callable[..., T], *args: Any) -> T:
        return self.pool.submit(fn, *args).result()

    def alloc(self, nbytes: int) -> Any:
        return self._call(lambda: self.ctx.buffer(reserve=nbytes))

    def upload(self, buf: Any, data: bytes) -> None:
        self._call(buf.write, data)

    def download(self, buf: Any, nbytes: int) -> bytes:
        def read() -> bytes:
            self.ctx.memory_barrier()
            return bytes(buf.read(size=nbytes))

        return self._call(read)

    def compile(self, kernels: list[GpuKernel]) -> list[Any]:
        def build(k: GpuKernel) -> Any:
            key = source_key(k.source)
            if key not in self.shaders:
                try:
                    self.shaders[key] = self.ctx.compute_shader(k.source)
                except self.mgl.Error as err:
                    raise compile_error("OpenGL", k.name, k.source, str(err),
                                        GLSL_LINE) from None
            return self.shaders[key]

        return self._call(lambda: [build(k) for k in kernels])

    def launch(self, handle: Any, kernel: GpuKernel, buffers: list[Any]) -> None:
        def run() -> None:
            for i, b in enumerate(buffers):
                b.bind_to_storage_buffer(i)
            handle.run(*kernel.workgroups)
            self.ctx.memory_barrier()

        self._call(run)
