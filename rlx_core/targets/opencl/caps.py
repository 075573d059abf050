"""Capability table of the OpenCL target (OpenCL C kernels on PoCL or any OpenCL 1.2+ device).

Labelled "executes": the shared GPU renderer's claims (gpu_common/caps.py) in the OpenCL C
dialect, run through pyopencl. Facts: f64 runs as ``double`` where the live device reports
cl_khr_fp64 (PoCL does; ``with_fp64``, applied by ``OpenClTarget.caps``), else it is refused
(RLX-L002: the device has no cl_khr_fp64; cast to f32); i64 is narrowed like WebGPU; f16 is not
rendered for OpenCL (RLX-L003). No binding limit: the limits are the device's work-group size
and maximum allocation, read from the live device (``OpenClTarget.caps``).
"""

from __future__ import annotations

from dataclasses import replace

from rlx_core.dispatch.capabilities import Capabilities, DTypeRule, Limits
from rlx_core.targets.gpu_common import caps as gpu

DTYPES = tuple(d for d in gpu.DTYPES if d != "f16")

_INT8_PATH = "unpacked by shifts (no cl_khr_integer_dot_product on PoCL here)"

CAPS = Capabilities(
    target="opencl",
    verification="executes",
    claims=(*gpu.claims(DTYPES), *gpu.int8_claims(_INT8_PATH)),
    dtype_rules=(*(DTypeRule("f64", "unsupported", code="RLX-L002",
                             hint="this OpenCL device has no cl_khr_fp64: cast to f32")
                   if r.dtype == "f64" else r for r in gpu.dtype_rules("opencl")),
                 DTypeRule("f16", "unsupported", code="RLX-L003",
                           hint="cast to f32 (the OpenCL dialect computes in f32)")),
    limits=Limits(max_workgroup_size=256, max_storage_buffers=None,
                  max_buffer_bytes=128 * 1024 * 1024, source="OpenCL 1.2 minimums"),
    note="OpenCL C kernels (gpu_common renderer, opencl/dialect.py) run through pyopencl",
)


def with_fp64(caps: Capabilities) -> Capabilities:
    """The table of a device that reports cl_khr_fp64: every claim also in f64, f64 native."""
    return replace(caps, claims=(*gpu.claims((*DTYPES, "f64")), *gpu.int8_claims(_INT8_PATH)),
                   dtype_rules=tuple(DTypeRule("f64", "native") if r.dtype == "f64" else r
                                     for r in caps.dtype_rules),
                   note=caps.note + "; f64 as double (cl_khr_fp64)")
