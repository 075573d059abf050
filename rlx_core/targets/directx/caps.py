"""Capability table of the DirectX target (HLSL Shader Model 6 compute shaders).

Labelled "executes (via SPIR-V)": no Direct3D device exists here, and DXIL is not produced.
The HLSL the renderer writes is compiled by glslang's HLSL front end to SPIR-V, validated by
spirv-val, and run through the Vulkan API (Mesa lavapipe), so the conformance suite runs the
HLSL's semantics, not a re-translation of our own. Dtypes and limits as the Vulkan target's
(the device they run on); f16 (``half`` with -enable-16bit-types) and f64 are refused: the
dialect computes in f32. int8: ``int_linear`` and ``requantize`` (gpu_common/int8.py) on the
i32 path: glslang's HLSL front end rejects SM 6.4's ``dot4add_i8packed``.
"""

from __future__ import annotations

from rlx_core.dispatch.capabilities import Capabilities, DTypeRule, Limits
from rlx_core.targets.gpu_common import caps as gpu

DTYPES = tuple(d for d in gpu.DTYPES if d != "f16")

CAPS = Capabilities(
    target="directx",
    verification="executes (via SPIR-V)",
    claims=(*gpu.claims(DTYPES),
            *gpu.int8_claims("unpacked by shifts (glslang's HLSL front end has no SM 6.4 "
                             "dot4add_i8packed)")),
    dtype_rules=(*gpu.dtype_rules("directx"),
                 DTypeRule("f16", "unsupported", code="RLX-L003",
                           hint="cast to f32 (the HLSL dialect computes in f32)")),
    limits=Limits(max_workgroup_size=1024, max_storage_buffers=64,
                  max_buffer_bytes=128 * 1024 * 1024, source="D3D12 minimums"),
    note="HLSL SM6 compute shaders (gpu_common renderer, directx/dialect.py) compiled to "
         "SPIR-V by glslang's HLSL front end and run through Vulkan; no DXIL",
)
