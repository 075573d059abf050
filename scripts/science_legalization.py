"""The legalization of every linear algebra, sparse and splatting op on every target, as the
table in docs/science-legalization.md (tests/linalg/test_legalization_table.py checks the doc
is what this prints).

Each op is traced from its public function (``rlx.linalg``, ``rlx.sparse``, ``rlx.splat``) on
small f32 operands and probed with ``rlx.explain`` on all targets: no kernel is compiled, the
capability tables decide. A cell is ``kernel`` (the target has a kernel of its own for the op)
or the failure's code; which of the kernels run where is said under the table.

    python scripts/science_legalization.py > docs/science-legalization.md
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402

import rlx_core as rlx  # noqa: E402
from rlx_core.dispatch.explain import _as_graph  # noqa: E402
from rlx_core.dispatch.legalize import legalize_graph  # noqa: E402
from rlx_core.dispatch.policy import UNSUPPORTED  # noqa: E402
from rlx_core.errors import RlxError  # noqa: E402
from rlx_core.targets.registry import TARGETS, get_target  # noqa: E402

CLAIMED_BUT_LIMITED = "*"


def _csr() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    ip = np.array([0, 2, 3, 5, 6], np.int32)
    ix = np.array([0, 1, 1, 0, 2, 3], np.int32)
    return ip, ix, np.array([4, 1, 3, 1, 5, 2], np.float32)


def probes() -> list[tuple[str, str, Callable[..., Any], tuple[Any, ...]]]:
    """(op, how it is called, function, f32 example operands) per IR op and solver."""
    from rlx_core.splat import scene

    a = (np.eye(4) * 4 + 1).astype(np.float32)
    b = np.ones((4, 1), np.float32)
    v = np.ones(4, np.float32)
    ip, ix, vals = _csr()
    sh = (4, 4)

    def csr(d):
        return rlx.sparse.csr(ip, ix, d, sh)

    g = scene.random_gaussians(4, 1, seed=0)
    cam = (scene.orbit(0.0, 0.0, 3.0).astype(np.float32),
           scene.intrinsics(32, 32).astype(np.float32))
    gs = tuple(x.astype(np.float32) for x in g.arrays())
    rec = np.zeros((4, 11), np.float32)
    img = np.zeros((32, 32, 3), np.float32)
    kw = {"width": 32, "height": 32}
    out: list[tuple[str, str, Callable[..., Any], tuple[Any, ...]]] = [
        ("cholesky", "linalg.cholesky", rlx.linalg.cholesky, (a,)),
        ("triangular_solve", "linalg.triangular_solve", rlx.linalg.triangular_solve, (a, b)),
        ("solve", "linalg.solve", rlx.linalg.solve, (a, b)),
        ("inv", "linalg.inv", rlx.linalg.inv, (a,)),
        ("det", "linalg.det", rlx.linalg.det, (a,)),
        ("slogdet", "linalg.slogdet", rlx.linalg.slogdet, (a,)),
        ("lu", "linalg.lu", rlx.linalg.lu, (a,)),
        ("qr", "linalg.qr", rlx.linalg.qr, (a,)),
        ("eigh", "linalg.eigh", rlx.linalg.eigh, (a,)),
        ("svd", "linalg.svd", rlx.linalg.svd, (a,)),
        ("spmv", "sparse.spmv", lambda d, x: rlx.sparse.spmv(csr(d), x), (vals, v)),
        ("spmv (transpose)", "sparse.spmv(A.T, x)", lambda d, x: rlx.sparse.spmv(csr(d).T, x),
         (vals, v)),
        ("spmm", "sparse.spmm", lambda d, x: rlx.sparse.spmm(csr(d), x), (vals, a)),
        ("sddmm", "sparse.sddmm", lambda x, y: rlx.sparse.sddmm(csr(vals), x, y).data, (a, a)),
        ("krylov_solve cg", "sparse.cg", lambda d, y: rlx.sparse.cg(csr(d), y), (vals, v)),
        ("krylov_solve cg jacobi", "sparse.cg(M='jacobi')",
         lambda d, y: rlx.sparse.cg(csr(d), y, M="jacobi"), (vals, v)),
        ("krylov_solve cg ic0", "sparse.cg(M='ic0')",
         lambda d, y: rlx.sparse.cg(csr(d), y, M="ic0"), (vals, v)),
        ("krylov_solve bicgstab", "sparse.bicgstab",
         lambda d, y: rlx.sparse.bicgstab(csr(d), y), (vals, v)),
        ("krylov_solve gmres", "sparse.gmres", lambda d, y: rlx.sparse.gmres(csr(d), y),
         (vals, v)),
        ("splat_project", "splat.project", lambda *x: rlx.splat.project(*x, **kw), (*gs, *cam)),
        ("splat_project_vjp", "splat.project_vjp",
         lambda *x: rlx.splat.project_vjp(*x, **kw), (*gs, *cam, rec)),
        ("splat_rasterize", "splat.rasterize", lambda r: rlx.splat.rasterize(r, **kw), (rec,)),
        ("splat_rasterize_vjp", "splat.rasterize_vjp",
         lambda r, i: rlx.splat.rasterize_vjp(r, i, **kw), (rec, img)),
    ]
    return out


def caps_of(target: str) -> Any:
    """The capability table legalization uses for ``target``, without opening a device: the
    browser target's claims are the webgpu table's (its adapter may only raise the limits)."""
    from dataclasses import replace

    from rlx_core.dispatch.registry import caps_for, caps_names

    if target in caps_names():
        return caps_for(target)
    if target == "webgpu-browser":
        return replace(caps_for("webgpu"), target=target)
    return get_target(target).caps


def cell(g: Any, target: str, op: str) -> str:
    """``kernel`` when the op's node is routed to a kernel of the target, else the code of the
    failure a compile raises (the embedded targets' strict pre-dispatch check first)."""
    family = op.split()[0]
    obj = None if target in ("numpy", "cpu", "webgpu", "webgpu-browser") else get_target(target)
    if obj is not None and hasattr(obj, "check_hir"):
        try:
            obj.check_hir(g)
        except RlxError as err:
            return err.code
    caps = caps_of(target)
    result = legalize_graph(g, caps, raise_errors=False)
    fails = [f.decision for f in result.failures if f.decision.op == family]
    if fails:  # "no kernel" for an op the table claims: its static limits refused the call
        code = fails[0].code
        limited = code in ("RLX-S002", "RLX-S020") and caps.claim_for(family) is not None
        return code + (CLAIMED_BUT_LIMITED if limited else "")
    if not result.ok:  # a helper node (slice, ...) failed, not the op
        return result.failures[0].decision.code
    routes = [d.route for d in result.top_level() if d.op == family]
    return "kernel" if routes and UNSUPPORTED not in routes else "?"


def table() -> str:
    targets = list(TARGETS)
    rows = []
    for op, call, fn, args in probes():
        g = _as_graph(fn, args)
        rows.append([f"`{op}`", f"`{call}`", *(cell(g, t, op) for t in targets)])
    head = ["op", "called as", *targets]
    out = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out) + "\n"


HEAD = """# Linear algebra, sparse and splatting ops on every target

Generated by `python scripts/science_legalization.py > docs/science-legalization.md` (and
checked against it by tests/linalg/test_legalization_table.py). Each op is traced from its
public function on small f32 operands and legalized for every target of
rlx_core/targets/registry.py against its capability table (nothing is compiled; cortex-m and
fpga run their strict pre-dispatch check first, as a compile does).

`kernel`: the target claims a kernel of its own for the op. Any other cell is the code of the
legalization failure the compile raises (docs/errors.md), with a fix that names the targets
that do run it; none of these ops is ever copied to the host behind the caller's back.

"""

TAIL = """
`*`: the target claims the op, but the table's static limits refuse this call: the WebGPU
spec's default of 8 storage buffers per stage, counted one per operand plus the result (9 for
`splat_project_vjp`; its kernel binds 8, leaving the opacities out), and the splatting
rewrite then reports `RLX-S020`. A compile for a live adapter legalizes against that adapter's
limits (Mesa lavapipe and most browsers' adapters offer 10 or more), where it runs: tested on
lavapipe in tests/splat.

What `kernel` means, per target, and what is tested:

- **numpy**: the reference (LAPACK through numpy, the splatting oracle written from the paper's
  equations); every op, tested against scipy and by finite differences.
- **cpu**: generated C calling LAPACK (dense), CSR loops and the four Krylov solvers in one team
  kernel each (sparse), the splatting kernels in C; every op runs against the numpy reference
  (tests/linalg, tests/splat).
- **webgpu**: WGSL of its own for `spmv`, `spmm` and `sddmm` (f32, one invocation per row),
  CG with no or Jacobi preconditioning (webgpu/krylov.py: the iterations unrolled into one
  submission, a convergence flag on the device, up to 4096 iterations) and the four splatting
  ops; run on Mesa lavapipe in the tests. Transposed products (a scatter: no float atomics in
  WGSL), BiCGSTAB, GMRES and IC(0) fail with `RLX-L006` (a constraint of the claim, with its
  reason); of the dense ops `cholesky` runs in f32 (webgpu/linalg.py, one workgroup per
  matrix), the others have no WGSL kernel (`RLX-S002`: what to do is in docs/linalg.md).
- **webgpu-browser**: the webgpu target's kernels, the same claims; run in Chromium by the
  browser tests.
- **cortex-m**, **fpga**: int8 inference only; their strict check before dispatch refuses
  every float op with `RLX-U001` (quantize the model, or run these ops elsewhere).
- every other target: no kernel (`RLX-S002` for dense and sparse ops, `RLX-S020` for
  splatting), by design for now: per-tile sorting, data-dependent stops and LAPACK calls are
  no common-IR form.
"""


def main() -> None:
    sys.stdout.write(HEAD + table() + TAIL)


if __name__ == "__main__":
    main()
