"""WebGPU's CSR kernels (WGSL): spmv, spmm and sddmm in f32, one invocation per row.

    spmv / spmm   y[r, j] = sum over the row's entries e of values[e] * x[indices[e], j]
    sddmm         out[e]  = sum_j x[r, j] * y[indices[e], j]    for each entry e of row r

Sums are in f32 (WGSL has no f64), in the row's stored order. The transposed products
(A^T x, which the VJPs use) scatter into shared entries, and WGSL has no float atomics, so
they are not claimed: on webgpu they fail with RLX-L006 (a constraint of the claim). CG is
webgpu/krylov.py and cholesky webgpu/linalg.py; the other solvers and dense ops have no WGSL
kernels. An index
outside its buffer reads 0 (WGSL's robust buffer access), it does not crash; rlx.sparse.csr
checks the structure before it gets here (RLX-S001).
"""

from __future__ import annotations

from rlx_core.ir.graph import Kernel, TensorType
from rlx_core.targets.gpu_common.kernels import WG, GpuKernel, _grid
from rlx_core.targets.webgpu.wgsl import storage_bindings

OPS: tuple[str, ...] = ("spmv", "spmm", "sddmm")
DTYPES: tuple[str, ...] = ("f32", "i32")


def _head(grid: tuple[int, int, int], rows: int) -> str:
    return (f"@compute @workgroup_size({WG}, 1, 1)\n"
            "fn main(@builtin(global_invocation_id) gid: vec3<u32>) {\n"
            f"  let r = gid.x + gid.y * {grid[0] * WG}u;\n"
            f"  if (r >= {rows}u) {{ return; }}\n"
            "  let e0 = u32(ip[r]);\n  let e1 = u32(ip[r + 1u]);\n")


def spmm_source(rows: int, k: int, grid: tuple[int, int, int]) -> str:
    """WGSL of y (rows x k) = A x for CSR A (k = 1: spmv)."""
    b = storage_bindings([("ip", "array<i32>"), ("ix", "array<i32>"), ("v", "array<f32>"),
                ("x", "array<f32>"), ("y", "array<f32>")])
    return (b + _head(grid, rows)
            + f"  for (var j = 0u; j < {k}u; j++) {{\n"
            "    var acc = 0.0f;\n"
            f"    for (var e = e0; e < e1; e++) {{ acc += v[e] * x[u32(ix[e]) * {k}u + j]; }}\n"
            f"    y[r * {k}u + j] = acc;\n  }}\n}}\n")


def sddmm_source(rows: int, k: int, grid: tuple[int, int, int]) -> str:
    """WGSL of out[e] = x[row(e)] . y[col(e)] over A's pattern."""
    b = storage_bindings([("ip", "array<i32>"), ("ix", "array<i32>"), ("x", "array<f32>"),
                ("y", "array<f32>"), ("out", "array<f32>")])
    return (b + _head(grid, rows)
            + "  for (var e = e0; e < e1; e++) {\n"
            "    let c = u32(ix[e]);\n    var acc = 0.0f;\n"
            f"    for (var j = 0u; j < {k}u; j++) {{ acc += x[r * {k}u + j] * y[c * {k}u + j]; }}\n"
            "    out[e] = acc;\n  }\n}\n")


def render_sparse(k: Kernel, types: dict[str, TensorType]) -> tuple[GpuKernel, ...]:
    """The dispatch of one kernel holding a (non-transposed) CSR op."""
    node = k.nodes[0]
    rows = int(node.attr("shape")[0])
    grid = _grid(-(-max(rows, 1) // WG))
    if node.op == "sddmm":
        src = sddmm_source(rows, types[node.inputs[2]].shape[1], grid)
    else:
        x = types[node.inputs[3]]
        src = spmm_source(rows, x.shape[1] if x.rank == 2 else 1, grid)
    return (GpuKernel(k.name, "csr", src, tuple(node.inputs), (node.name,), grid),)
