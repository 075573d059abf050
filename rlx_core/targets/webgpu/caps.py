"""Capability table of the WebGPU (WGSL) target.

Labelled "executes": every claim below is rendered by the shared GPU renderer (gpu_common)
and runs on wgpu (lavapipe in CI) and in headless Chromium; the claims are exactly what the renderer implements. Facts:

- no f64 in WGSL: f64 is emulated (webgpu/df64.py): buffers hold the f64 bits, kernels
  compute in double-float (a pair of f32: a 48-bit significand, about 2^-47 relative per op,
  and f32's exponent range: |x| > 3.4e38 becomes an infinity, |x| < 2^-126 loses digits and
  underflows to 0); the ops ``df64.OPS`` / ``df64.OTHER_OPS`` only, others RLX-L002;
- no i64 in shaders: i64 values are narrowed to i32 where provably in range, else RLX-L004;
- f16 only with the optional ``shader-f16`` device feature (RLX-L003 otherwise);
- bool is not host-shareable: it is stored as u32 in buffers; WGSL has no arithmetic or ordering
  compares on bool, so the renderer writes every claimed bool op as the logic the numpy
  reference computes (``gpu_common.expr._BOOL``: ``lt`` is ``!a && b``, ``pow`` is ``a || !b``,
  scatter_add accumulates with ``||``); tests/targets/test_gpu_claims.py renders every claim
  of every GPU table and runs the bool ones against numpy;
- i8/i16 are stored as i32 and u8 as u32 (no 8/16-bit integer types), computed in 32 bits and
  wrapped to their width after every op;
- int8: ``int_linear`` and ``requantize`` run as kernels of their own (gpu_common/int8.py):
  packed int8 words meet in ``dot4I8Packed`` where the WGSL compiler has the
  packed_4x8_integer_dot_product extension (the native runtime probes it), else in an i32
  loop over unpacked bytes; requantize's 64-bit products are formed from 32-bit limbs;
- erf has no WGSL builtin: the renderer emits a Taylor series below 0.25 and Abramowitz-Stegun 7.1.26 above (|error| < 1.5e-7);
- no float atomics: scatter_add runs one invocation per output element that sums its updates
  in index order (deterministic, O(output x indices));
- the splatting ops and their VJPs run as WGSL of their own (webgpu/splat.py: atomics bin
  Gaussians into tiles, a bitonic sort per tile, compositing per pixel, gradients reduced per
  tile without float atomics);
- spmv, spmm (not transposed) and sddmm in f32 run as WGSL of their own (webgpu/sparse.py,
  one invocation per CSR row); CG (none / Jacobi, at most 4096 iterations) as one unrolled
  chain of dispatches (webgpu/krylov.py); the transposed products, BiCGSTAB, GMRES and IC(0)
  are refused by the claims' constraints (RLX-L006); of the dense linear algebra ops cholesky
  runs in f32 (webgpu/linalg.py, one workgroup per matrix), the others have no kernels
  (RLX-S002);
- limits: the WebGPU spec's guaranteed minimums as defaults (max workgroup size 256, 8 storage
  buffers per shader stage, 128 MiB per storage buffer binding); ``WebGpuTarget.caps`` replaces
  them with what the live adapter reports (``CAPS.with_limits(...)``); kernels index with u32,
  so a tensor has at most 2^32 - 1 elements.
"""

from __future__ import annotations

from rlx_core.dispatch.capabilities import Capabilities, Constraint, DTypeRule, Limits, OpClaim
from rlx_core.targets.gpu_common import caps as gpu
from rlx_core.targets.webgpu import df64
from rlx_core.targets.webgpu.krylov import MAX_UNROLL as KRYLOV_UNROLL
from rlx_core.targets.webgpu.linalg import DTYPES as LINALG_DTYPES
from rlx_core.targets.webgpu.linalg import OPS as LINALG_OPS
from rlx_core.targets.webgpu.sparse import DTYPES as CSR_DTYPES
from rlx_core.targets.webgpu.splat import DTYPES as SPLAT_DTYPES
from rlx_core.targets.webgpu.splat import OPS as SPLAT_OPS

# WGSL has f32/i32/u32 (and f16 with the feature); bool in buffers travels as u32.
DTYPES: tuple[str, ...] = gpu.DTYPES

CAPS = Capabilities(
    target="webgpu",
    verification="executes",
    claims=(*gpu.claims(DTYPES, (*df64.OPS, *df64.OTHER_OPS),
                        "f64 emulated as double-float (webgpu/df64.py)"),
            OpClaim(SPLAT_OPS, SPLAT_DTYPES, note="the splatting ops and their VJPs: WGSL of "
                    "their own (webgpu/splat.py: per-tile bitonic sort)"),
            OpClaim(("spmv", "spmm"), CSR_DTYPES, constraints=(Constraint(
                "attr_in", "transpose", (False,),
                why="A^T x scatters into shared entries and WGSL has no float atomics"),),
                note="CSR, one invocation per row (webgpu/sparse.py)"),
            OpClaim(("sddmm",), CSR_DTYPES, note="CSR, one invocation per row"),
            OpClaim(("krylov_solve",), CSR_DTYPES, constraints=(
                Constraint("attr_in", "method", ("cg",),
                           why="BiCGSTAB and GMRES have no WGSL kernel (run them on cpu)"),
                Constraint("attr_in", "precond", ("none", "jacobi"),
                           why="IC(0)'s triangular solves have no WGSL kernel (cpu has them)"),
                Constraint("attr_max", "maxiter", limit=KRYLOV_UNROLL,
                           why="the iterations are unrolled into one submission")),
                note="CG, unrolled into one chain of dispatches (webgpu/krylov.py)"),
            OpClaim(LINALG_OPS, LINALG_DTYPES,
                    note="cholesky, one workgroup per matrix (webgpu/linalg.py)"),
            *gpu.int8_claims("dot4I8Packed where the WGSL compiler has "
                             "packed_4x8_integer_dot_product, else unpacked by shifts")),
    dtype_rules=(
        *(DTypeRule("f64", "emulated", stored_as="f32 pair (double-float: 48-bit significand, "
                    "f32 exponent range)") if r.dtype == "f64" else r
          for r in gpu.dtype_rules("webgpu")),
        DTypeRule("f16", "feature", feature="shader-f16", code="RLX-L003",
                  hint="enable the shader-f16 feature (request it on the adapter), or cast to "
                       "f32"),
    ),
    limits=Limits(max_workgroup_size=256, max_storage_buffers=8,
                  max_buffer_bytes=128 * 1024 * 1024, max_elements=2**32 - 1,
                  index_type="u32", source="WebGPU spec defaults"),
    features=("shader-f16",),
    note="WGSL kernels (gpu_common renderer, WGSL dialect) run through wgpu natively and "
         "navigator.gpu in browsers",
)
