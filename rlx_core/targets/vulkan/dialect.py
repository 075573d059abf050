"""GLSL 4.50 for Vulkan: the OpenGL target's GLSL dialect with descriptor sets; glslang
compiles it to SPIR-V, which is what runs (toolchain.py)."""

from __future__ import annotations

from rlx_core.targets.opengl.dialect import Glsl


class Glsl450(Glsl):
    name = "glsl450"
    version = "450"
    set_layout = "set = 0, "


GLSL450 = Glsl450()
