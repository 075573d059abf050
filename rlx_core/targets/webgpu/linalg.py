"""WebGPU's dense linear algebra (WGSL): cholesky in f32, one workgroup per matrix.

Right-looking Cholesky on the lower triangle, in place in the output: for each column k the
pivot's square root, the column below it divided by it, then the trailing lower triangle
updated (one workgroup shares each step's entries, separated by barriers). The semantics are
the reference's (numpy_ref/linalg_semantics.py): only A's lower triangle is read, the upper
triangle of L is zero, and a matrix that is not numerically positive definite (a pivot <= 0
or NaN) gives NaN for that whole batch entry, never an error. f32 throughout (WGSL has no
f64), so L agrees with the f64 reference to f32 rounding times the matrix's conditioning.

The other dense ops (solve, qr, eigh, svd, ...) have no WGSL kernel: they fail legalization
with RLX-S002 and the fix to run them on cpu (docs/science-legalization.md).
"""

from __future__ import annotations

from rlx_core.ir.graph import Kernel, TensorType
from rlx_core.targets.gpu_common.kernels import GpuKernel, _grid

OPS: tuple[str, ...] = ("cholesky",)
DTYPES: tuple[str, ...] = ("f32",)
WG = 64  # invocations per matrix: a column of a 64-row matrix per step, no idle majority


def cholesky_source(n: int, batch: int, grid: tuple[int, int, int]) -> str:
    """WGSL of l = cholesky(a) for ``batch`` row-major n x n matrices."""
    nn = n * n
    return f"""@group(0) @binding(0) var<storage, read_write> a: array<f32>;
@group(0) @binding(1) var<storage, read_write> l: array<f32>;
var<workgroup> bad: u32;
@compute @workgroup_size({WG}, 1, 1)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {{
  let m = wid.x + wid.y * {grid[0]}u;
  if (m >= {batch}u) {{ return; }}
  let o = m * {nn}u;
  for (var e = lid; e < {nn}u; e += {WG}u) {{
    l[o + e] = select(0.0, a[o + e], e % {n}u <= e / {n}u);
  }}
  if (lid == 0u) {{ bad = 0u; }}
  storageBarrier();
  workgroupBarrier();
  for (var k = 0u; k < {n}u; k++) {{
    let d = l[o + k * {n}u + k];
    let ok = d > 0.0;  // false for NaN too
    let s = sqrt(select(1.0, d, ok));
    workgroupBarrier();  // every invocation has read the pivot before it is replaced
    if (lid == 0u) {{
      l[o + k * {n}u + k] = s;
      if (!ok) {{ bad = 1u; }}
    }}
    for (var i = k + 1u + lid; i < {n}u; i += {WG}u) {{
      l[o + i * {n}u + k] = l[o + i * {n}u + k] / s;
    }}
    storageBarrier();
    workgroupBarrier();
    let rest = {n}u - k - 1u;
    for (var e = lid; e < rest * rest; e += {WG}u) {{
      let i = k + 1u + e / rest;
      let j = k + 1u + e % rest;
      if (j <= i) {{ l[o + i * {n}u + j] -= l[o + i * {n}u + k] * l[o + j * {n}u + k]; }}
    }}
    storageBarrier();
    workgroupBarrier();
  }}
  let failed = workgroupUniformLoad(&bad);
  if (failed != 0u) {{
    // NaN from a runtime value: Tint rejects a constant NaN (see splat_raster.py)
    let nan = bitcast<f32>(0x7fc00000u + failed - 1u);
    for (var e = lid; e < {nn}u; e += {WG}u) {{ l[o + e] = nan; }}
  }}
}}
"""


def render_linalg(k: Kernel, types: dict[str, TensorType]) -> tuple[GpuKernel, ...]:
    """The dispatch of one kernel holding a cholesky node: a workgroup per matrix."""
    node = k.nodes[0]
    x = types[node.inputs[0]]
    n = int(x.shape[-1])
    batch = 1
    for d in x.shape[:-2]:
        batch *= int(d)
    grid = _grid(max(batch, 1))
    return (GpuKernel(k.name, "cholesky", cholesky_source(n, batch, grid), (node.inputs[0],),
                      (node.name,), grid),)
