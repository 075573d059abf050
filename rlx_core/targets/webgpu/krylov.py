"""WebGPU's conjugate gradients (WGSL, f32): ``krylov_solve`` with method cg, preconditioner
none or jacobi, as one chain of dispatches the runtime submits at once: no iteration returns
to Python, or even to the host.

WGSL has no loop across dispatches, so the loop is unrolled: ``maxiter`` iterations of five
dispatches each are recorded into the one compute pass (pipelines and bind groups are shared,
so an iteration costs five dispatch records). Convergence is a flag in a state buffer: once
it is set, every later dispatch returns at once. Per iteration (cpu/sparse.py's recurrence)::

    spmv     one invocation per row: q = A p
    dot      one workgroup: p . q (lanes stride the rows, then a tree in a fixed order);
             iterations += 1; alpha = rz / pq (pq == 0: stop)
    update   per row: x += alpha p, r -= alpha q
    dot      one workgroup: r . r and r . D^-1 r; stop when ||r|| <= tol ||b||, else
             beta = rz_new / rz
    direct   per row: p = D^-1 r + beta p

Sums are f32 in a fixed order (deterministic, but not the cpu kernel's double: iteration
counts may differ by one near the tolerance). ``maxiter`` above MAX_UNROLL is not claimed
(a legalization failure saying to lower it or to use target cpu); BiCGSTAB, GMRES and IC(0)
have no WGSL kernel.
"""

from __future__ import annotations

from rlx_core.ir import dtypes as dt
from rlx_core.ir.graph import Kernel, TensorType
from rlx_core.targets.gpu_common.kernels import WG, GpuKernel, _grid
from rlx_core.targets.webgpu.wgsl import storage_bindings

MAX_UNROLL = 4096  # iterations recorded per call (five dispatches each)
_F, _I = "array<f32>", "array<i32>"
# the state buffer's slots
RZ, BB, PQ, RR, DONE, ITERS, BETA, ALPHA = range(8)


def _rows(grid: tuple[int, int, int], n: int, skip_done: bool = True) -> str:
    done = f" || st[{DONE}] != 0.0" if skip_done else ""
    return (f"@compute @workgroup_size({WG}, 1, 1)\n"
            "fn main(@builtin(global_invocation_id) gid: vec3<u32>) {\n"
            f"  let i = gid.x + gid.y * {grid[0] * WG}u;\n"
            f"  if (i >= {n}u{done}) {{ return; }}\n")


def _dot(n: int, terms: list[str], tail: str) -> str:
    """One workgroup: sums of ``terms`` (WGSL expressions in row i) over the rows, lanes
    striding, then a tree; lane 0 runs ``tail`` with the sums in s0, s1, ..."""
    k = len(terms)
    acc = "\n".join(f"    a[{j}] += {t};" for j, t in enumerate(terms))
    sums = " ".join(f"let s{j} = red[0][{j}];" for j in range(k))
    return (f"var<workgroup> red: array<array<f32, {k}>, {WG}>;\n"
            f"@compute @workgroup_size({WG}, 1, 1)\n"
            "fn main(@builtin(local_invocation_index) lid: u32) {\n"
            f"  if (st[{DONE}] != 0.0) {{ return; }}\n"
            f"  var a: array<f32, {k}>;\n"
            f"  for (var i = lid; i < {n}u; i += {WG}u) {{\n{acc}\n  }}\n"
            "  red[lid] = a;\n  workgroupBarrier();\n"
            f"  for (var s = {WG // 2}u; s > 0u; s = s / 2u) {{\n"
            "    if (lid < s) {\n"
            f"      for (var j = 0u; j < {k}u; j++) {{ red[lid][j] += red[lid + s][j]; }}\n"
            "    }\n    workgroupBarrier();\n  }\n"
            f"  if (lid == 0u) {{\n    {sums}\n{tail}  }}\n}}\n")


def render_cg(k: Kernel, types: dict[str, TensorType]) -> tuple[GpuKernel, ...]:
    node = k.nodes[0]
    n = int(node.attr("shape")[0])
    jacobi = node.attr("precond") == "jacobi"
    tol, iters = float(node.attr("tol")), int(node.attr("maxiter"))
    ip, ix, v, b = node.inputs
    out = node.name
    r, p, q, dinv, st = (f"{k.name}.{s}" for s in ("r", "p", "q", "dinv", "state"))
    scratch = tuple((name, TensorType(dt.f32, (max(n, 1),))) for name in (r, p, q, dinv)) + \
        ((st, TensorType(dt.f32, (8,))),)
    grid = _grid(-(-max(n, 1) // WG))
    diag = ("  var d = 0.0f;\n  for (var e = u32(ip[i]); e < u32(ip[i + 1u]); e++) {\n"
            "    if (u32(ix[e]) == i) { d += v[e]; }\n  }\n") if jacobi else "  let d = 1.0f;\n"
    # layout "auto" drops unused bindings: the matrix is bound only where the diagonal is read
    mat = [("ip", _I), ("ix", _I), ("v", _F)] if jacobi else []
    init = (storage_bindings([*mat, ("b", _F), ("x", _F), ("r", _F), ("p", _F), ("dinv", _F)])
            + _rows(grid, n, skip_done=False) + diag
            + "  let di = select(1.0f, 1.0f / d, d != 0.0f);\n"
            "  dinv[i] = di;\n  x[i] = 0.0f;\n  r[i] = b[i];\n  p[i] = di * b[i];\n}\n")
    start = (storage_bindings([("b", _F), ("r", _F), ("dinv", _F), ("st", _F)])
             + _dot(n, ["r[i] * dinv[i] * r[i]", "b[i] * b[i]"],
                    f"    st[{RZ}] = s0; st[{BB}] = s1; st[{RR}] = s1; st[{ITERS}] = 0.0;\n"
                    f"    st[{DONE}] = select(0.0, 1.0, s1 == 0.0);\n")
             .replace(f"  if (st[{DONE}] != 0.0) {{ return; }}\n", "", 1))
    spmv = (storage_bindings([("ip", _I), ("ix", _I), ("v", _F), ("p", _F), ("q", _F),
                              ("st", _F)])
            + _rows(grid, n) + "  var acc = 0.0f;\n"
            "  for (var e = u32(ip[i]); e < u32(ip[i + 1u]); e++) { acc += v[e] * p[u32(ix[e])]; }\n"
            "  q[i] = acc;\n}\n")
    pq = (storage_bindings([("p", _F), ("q", _F), ("st", _F)])
          + _dot(n, ["p[i] * q[i]"],
                 f"    st[{ITERS}] += 1.0;\n    st[{PQ}] = s0;\n"
                 f"    if (s0 == 0.0) {{ st[{DONE}] = 1.0; }} else {{ st[{ALPHA}] = st[{RZ}] / s0; }}\n"))
    update = (storage_bindings([("p", _F), ("q", _F), ("x", _F), ("r", _F), ("st", _F)])
              + _rows(grid, n)
              + f"  let al = st[{ALPHA}];\n  x[i] += al * p[i];\n  r[i] -= al * q[i];\n}}\n")
    rr = (storage_bindings([("r", _F), ("dinv", _F), ("st", _F)])
          + _dot(n, ["r[i] * r[i]", "r[i] * dinv[i] * r[i]"],
                 f"    st[{RR}] = s0;\n"
                 f"    if (sqrt(s0) <= {tol!r} * sqrt(st[{BB}])) {{ st[{DONE}] = 1.0; }} else {{\n"
                 f"      st[{BETA}] = s1 / st[{RZ}];\n      st[{RZ}] = s1;\n    }}\n"))
    direct = (storage_bindings([("r", _F), ("dinv", _F), ("p", _F), ("st", _F)])
              + _rows(grid, n)
              + f"  p[i] = dinv[i] * r[i] + st[{BETA}] * p[i];\n}}\n")
    finish = (storage_bindings([("x", _F), ("st", _F)])
              + "@compute @workgroup_size(1, 1, 1)\nfn main() {\n"
              f"  x[{n}u] = st[{ITERS}];\n"
              f"  x[{n + 1}u] = select(sqrt(st[{RR}]) / sqrt(st[{BB}]), 0.0, st[{BB}] == 0.0);\n}}\n")
    one = (1, 1, 1)
    ks = [GpuKernel(f"{k.name}.init", "krylov", init, (*((ip, ix, v) if jacobi else ()), b),
                    (out, r, p, dinv), grid, scratch=scratch),
          GpuKernel(f"{k.name}.start", "krylov", start, (b, r, dinv), (st,), one)]
    for _ in range(iters):
        ks += [GpuKernel(f"{k.name}.spmv", "krylov", spmv, (ip, ix, v, p), (q, st), grid),
               GpuKernel(f"{k.name}.pq", "krylov", pq, (p, q), (st,), one),
               GpuKernel(f"{k.name}.update", "krylov", update, (p, q), (out, r, st), grid),
               GpuKernel(f"{k.name}.rr", "krylov", rr, (r, dinv), (st,), one),
               GpuKernel(f"{k.name}.direct", "krylov", direct, (r, dinv), (p, st), grid)]
    ks.append(GpuKernel(f"{k.name}.finish", "krylov", finish, (), (out, st), one,
                        local=(1, 1, 1)))
    return tuple(ks)
