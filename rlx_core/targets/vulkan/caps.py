"""Capability table of the Vulkan target (GLSL 4.50 -> SPIR-V, run on any Vulkan 1.0 device;
Mesa lavapipe here).

Labelled "executes": the shared GPU renderer's claims (gpu_common/caps.py) in the GLSL 4.50
dialect, compiled to SPIR-V by glslang, validated by spirv-val, and that SPIR-V runs through
the Vulkan API (the ``vulkan`` binding). f64 (shaderFloat64) and f16 exist as device features
but the dialect computes in f32: RLX-L002 / RLX-L003 with a cast hint; i64 is narrowed like
WebGPU. int_linear and requantize are kernels of their own (gpu_common/int8.py; SPIR-V
OpSDot on packed int8 words where the device has VK_KHR_shader_integer_dot_product). Limits (storage buffers per stage, storage buffer range, invocations per workgroup)
are read from the live device (``VulkanTarget.caps``).
"""

from __future__ import annotations

from rlx_core.dispatch.capabilities import Capabilities, DTypeRule, Limits
from rlx_core.targets.gpu_common import caps as gpu

DTYPES = tuple(d for d in gpu.DTYPES if d != "f16")

CAPS = Capabilities(
    target="vulkan",
    verification="executes",
    claims=(*gpu.claims(DTYPES),
            *gpu.int8_claims("SPIR-V OpSDot where the device has "
                             "VK_KHR_shader_integer_dot_product, else unpacked by shifts")),
    dtype_rules=(*gpu.dtype_rules("vulkan"),
                 DTypeRule("f16", "unsupported", code="RLX-L003",
                           hint="cast to f32 (the GLSL dialect computes in f32)")),
    limits=Limits(max_workgroup_size=128, max_storage_buffers=4,
                  max_buffer_bytes=128 * 1024 * 1024, source="Vulkan 1.0 minimums"),
    note="GLSL 4.50 compute shaders -> SPIR-V (glslang, spirv-val) run through the Vulkan API",
)
