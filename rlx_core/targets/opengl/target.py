"""OpenGlTarget: LIR -> GLSL 4.30 compute shaders (the shared GPU renderer) -> moderngl/EGL."""

from __future__ import annotations

from typing import Any

from rlx_core.targets.gpu_common.runtime import Device
from rlx_core.targets.gpu_common.target import GpuTarget
from rlx_core.targets.opengl.dialect import GLSL430


class OpenGlTarget(GpuTarget):
    """GLSL compute shaders on an OpenGL 4.3 context; headless through EGL (Mesa llvmpipe)."""

    name = "opengl"
    description = ("GLSL 4.30 compute shaders through moderngl on a headless EGL context "
                   "(a GPU's GL driver, or Mesa llvmpipe on the CPU)")
    dialect = GLSL430
    install_hint = ("pip install moderngl and an EGL + GL 4.3 driver (Debian: libegl-mesa0 "
                    "libgl1-mesa-dri)")

    def open_device(self) -> Device:
        from rlx_core.targets.opengl.runtime import OpenGlDevice

        return OpenGlDevice()

    def table(self) -> Any:
        from rlx_core.targets.opengl.caps import CAPS

        return CAPS
