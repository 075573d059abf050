"""Capability table of the OpenGL target (GLSL 4.30 compute shaders; Mesa llvmpipe here).

Labelled "executes": the shared GPU renderer's claims (gpu_common/caps.py) in the GLSL
dialect, run through moderngl on a headless EGL context. f64 (GL_ARB_gpu_shader_fp64) and f16
exist as extensions but the dialect computes in f32: RLX-L002 / RLX-L003 with a cast hint;
i64 is narrowed like WebGPU. Limits (invocations per workgroup, storage blocks per compute
shader, block size) are read from the live context (``OpenGlTarget.caps``).
"""

from __future__ import annotations

from rlx_core.dispatch.capabilities import Capabilities, DTypeRule, Limits
from rlx_core.targets.gpu_common import caps as gpu

DTYPES = tuple(d for d in gpu.DTYPES if d != "f16")

CAPS = Capabilities(
    target="opengl",
    verification="executes",
    claims=(*gpu.claims(DTYPES),
            *gpu.int8_claims("unpacked by shifts (GLSL 4.30 has no integer dot product)")),
    dtype_rules=(*gpu.dtype_rules("opengl"),
                 DTypeRule("f16", "unsupported", code="RLX-L003",
                           hint="cast to f32 (the GLSL dialect computes in f32)")),
    limits=Limits(max_workgroup_size=1024, max_storage_buffers=8,
                  max_buffer_bytes=128 * 1024 * 1024, source="OpenGL 4.3 minimums"),
    note="GLSL 4.30 compute shaders (gpu_common renderer, opengl/dialect.py) run through "
         "moderngl on EGL",
)
