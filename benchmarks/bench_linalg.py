"""Sparse and dense linear algebra: rlx (target cpu) against scipy, side by side, with residuals.

- SpMV (y = A x, f64 CSR), CG and Jacobi-PCG (to a relative residual of 1e-10 or 30
  iterations, whichever first; both peers run the same recurrences, iteration counts shown) on a 2-D Poisson matrix (5-point), a 3-D one
  (7-point) and a random sparse SPD matrix, each with 10^5-10^6 nonzeros, against
  ``scipy.sparse`` (``A @ x``; ``scipy.sparse.linalg.cg``, whose loop runs in Python around
  a C matvec), on 1 and 2 threads (scipy's SpMV is single-threaded either way).
- Dense Cholesky, solve and QR at n = 256..2048 against ``scipy.linalg`` (default arguments,
  its own OpenBLAS) on 1 thread; rlx calls LAPACK on one thread from the generated C.

rlx functions are ``rlx.jit(target="cpu")`` (the compiled fast call path). Every figure is a per-call median (benchmarks/common.interleaved); ratios > 1 mean rlx is
faster. On 1 thread the process CPU time is reported too: on a shared, oversubscribed
machine a long call's wall time is mostly the scheduler's share. Residuals: ||b - A x|| / ||b|| for the solvers and solve, ||L L^T - A|| / ||A|| and
||Q R - A|| / ||A|| for the factorizations.

    nice python benchmarks/bench_linalg.py          # results/linalg-<cpu>.json and .md
    nice python benchmarks/bench_linalg.py --sparse-only   # SpMV/CG only: linalg-sparse-<cpu>
    nice python benchmarks/bench_linalg.py --quick  # smaller sizes, for a smoke run
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import (  # noqa: E402
    SETTLE_S,
    finish_run,
    interleaved,
    limit_threads,
    markdown_table,
    save_run,
    say,
    stamp,
    start_run,
)

TOL = 1e-10  # CG stops here or at CG_MAXITER (Poisson: at the cap; random SPD: converged)
CG_MAXITER = 30
BUDGET_S = 420  # past this, the remaining measurements are skipped (and said to be)


def cpu_ms(fn: Any, runs: int) -> float:
    """Median process CPU time of ``fn`` in ms. On an oversubscribed machine a long call's
    wall time measures the scheduler's share more than the code; one thread's CPU time does
    not (meaningful for 1-thread runs only: waiting team threads spin)."""
    import statistics

    out = []
    for _ in range(runs):
        t0 = time.process_time()
        fn()
        out.append(time.process_time() - t0)
    return statistics.median(out) * 1e3


def poisson2d(m: int) -> Any:
    import scipy.sparse as sp

    t = sp.diags([-1.0, 2.0, -1.0], [-1, 0, 1], shape=(m, m))
    return (sp.kron(sp.eye(m), t) + sp.kron(t, sp.eye(m))).tocsr()


def poisson3d(m: int) -> Any:
    import scipy.sparse as sp

    t = sp.diags([-1.0, 2.0, -1.0], [-1, 0, 1], shape=(m, m))
    i = sp.eye(m)
    return (sp.kron(sp.kron(i, i), t) + sp.kron(sp.kron(i, t), i)
            + sp.kron(sp.kron(t, i), i)).tocsr()


def random_spd(n: int, per_row: int, seed: int = 0) -> Any:
    """R + R^T with ~per_row entries a row, plus a diagonal making it diagonally dominant."""
    import numpy as np
    import scipy.sparse as sp

    rng = np.random.default_rng(seed)
    k = n * per_row // 2
    r = sp.coo_matrix((rng.uniform(-1, 1, k), (rng.integers(0, n, k), rng.integers(0, n, k))),
                      shape=(n, n))
    a = (r + r.T).tocsr()
    dom = np.asarray(abs(a).sum(axis=1)).ravel() + 1.0
    return (a + sp.diags(dom)).tocsr()


def sparse_one(name: str, a: Any, threads: int, runs: int, cg_iters: int) -> dict:
    import numpy as np
    import scipy.sparse.linalg as spla

    import rlx_core as rlx

    n = a.shape[0]
    rng = np.random.default_rng(1)
    x = rng.standard_normal(n)
    b = a @ rng.standard_normal(n)
    ip, ix, v = a.indptr.astype(np.int32), a.indices.astype(np.int32), a.data

    def spmv(vals, x, ip=ip, ix=ix, shape=a.shape):
        return rlx.sparse.spmv(rlx.sparse.csr(ip, ix, vals, shape), x)

    def cg_fixed(vals, b, ip=ip, ix=ix, shape=a.shape):
        return rlx.sparse.cg(rlx.sparse.csr(ip, ix, vals, shape), b, tol=TOL,
                             maxiter=cg_iters, return_info=True)

    def pcg(vals, b, ip=ip, ix=ix, shape=a.shape):
        return rlx.sparse.cg(rlx.sparse.csr(ip, ix, vals, shape), b, tol=TOL,
                             maxiter=cg_iters, M="jacobi", return_info=True)

    # jitted: a call is the compiled extension's fast path (no Python per call)
    exe_mv = rlx.jit(spmv, target="cpu")
    exe_cg = rlx.jit(cg_fixed, target="cpu")
    exe_pcg = rlx.jit(pcg, target="cpu")
    err_mv = float(np.abs(exe_mv(v, x) - a @ x).max() / np.abs(a @ x).max())
    dinv = 1.0 / a.diagonal()
    jacobi = spla.LinearOperator(a.shape, matvec=lambda r: dinv * r, dtype=np.float64)

    count = [0]

    def tick(_xk: Any) -> None:
        count[0] += 1

    def sc_cg() -> Any:
        return spla.cg(a, b, rtol=TOL, atol=0.0, maxiter=cg_iters, callback=tick)

    def sc_pcg() -> Any:
        return spla.cg(a, b, rtol=TOL, atol=0.0, maxiter=cg_iters, M=jacobi, callback=tick)

    mv = interleaved({"rlx": lambda: exe_mv(v, x), "scipy": lambda: a @ x}, runs, 3,
                     budget_s=8, settle_s=SETTLE_S)
    cg = interleaved({"rlx": lambda: exe_cg(v, b), "scipy": sc_cg}, 3, 1, budget_s=15,
                     settle_s=SETTLE_S)
    pc = interleaved({"rlx": lambda: exe_pcg(v, b), "scipy": sc_pcg}, 3, 1, budget_s=15,
                     settle_s=SETTLE_S)
    cpu = {}
    if threads == 1:
        cpu = {"spmv_rlx": cpu_ms(lambda: exe_mv(v, x), runs),
               "spmv_scipy": cpu_ms(lambda: a @ x, runs),
               "cg_rlx": cpu_ms(lambda: exe_cg(v, b), 3), "cg_scipy": cpu_ms(sc_cg, 3)}
    x_cg, info = exe_cg(v, b)
    x_pc, info_pc = exe_pcg(v, b)
    count[0] = 0
    s_cg = sc_cg()[0]
    it_cg, count[0] = count[0], 0
    s_pc = sc_pcg()[0]
    it_pc = count[0]
    bn = np.linalg.norm(b)

    def res(xx: Any) -> float:
        return float(np.linalg.norm(b - a @ xx) / bn)

    row = {"matrix": name, "n": n, "nnz": int(a.nnz), "threads": threads, "cpu_ms": cpu,
           "spmv": {"rlx": mv["rlx"], "scipy": mv["scipy"], "max_rel_diff": err_mv},
           "cg": {"rlx": cg["rlx"], "scipy": cg["scipy"], "iterations_rlx": int(info[0]),
                  "iterations_scipy": it_cg, "residual_rlx": res(x_cg),
                  "residual_scipy": res(s_cg)},
           "pcg_jacobi": {"rlx": pc["rlx"], "scipy": pc["scipy"],
                          "iterations_rlx": int(info_pc[0]), "iterations_scipy": it_pc,
                          "residual_rlx": res(x_pc), "residual_scipy": res(s_pc)}}
    say(f"  {name} n={n} nnz={a.nnz} threads={threads}: spmv rlx "
        f"{mv['rlx'].p50 * 1e3:.3f} ms scipy {mv['scipy'].p50 * 1e3:.3f} ms "
        f"(x{mv['scipy'].p50 / mv['rlx'].p50:.2f}); cg ({int(info[0])}/{it_cg} it) rlx "
        f"{cg['rlx'].p50 * 1e3:.1f} ms scipy {cg['scipy'].p50 * 1e3:.1f} ms "
        f"(x{cg['scipy'].p50 / cg['rlx'].p50:.2f}); pcg rlx {pc['rlx'].p50 * 1e3:.1f} ms "
        f"({int(info_pc[0])}/{it_pc} it, res {res(x_pc):.1e}) scipy {pc['scipy'].p50 * 1e3:.1f} ms "
        f"(x{pc['scipy'].p50 / pc['rlx'].p50:.2f})")
    return row


def dense_one(n: int, runs: int, out: list[dict], save: Any) -> None:
    import numpy as np
    import scipy.linalg as sla

    import rlx_core as rlx

    rng = np.random.default_rng(n)
    m = rng.standard_normal((n, n))
    spd = m @ m.T + n * np.eye(n)
    b = rng.standard_normal((n, 1))
    exes = {"cholesky": rlx.jit(rlx.linalg.cholesky, target="cpu"),
            "solve": rlx.jit(rlx.linalg.solve, target="cpu"),
            "qr": rlx.jit(rlx.linalg.qr, target="cpu")}
    peers = {
        "cholesky": ({"rlx": lambda: exes["cholesky"](spd),
                      "scipy": lambda: sla.cholesky(spd, lower=True)}),
        "solve": ({"rlx": lambda: exes["solve"](m, b), "scipy": lambda: sla.solve(m, b)}),
        "qr": ({"rlx": lambda: exes["qr"](m),
                "scipy": lambda: sla.qr(m, mode="economic")}),
    }
    an = np.linalg.norm(spd)
    mn = np.linalg.norm(m)
    resid = {
        "cholesky": (lambda: float(np.linalg.norm((lo := exes["cholesky"](spd)) @ lo.T - spd)
                                   / an),
                     lambda: float(np.linalg.norm((lo := sla.cholesky(spd, lower=True))
                                                  @ lo.T - spd) / an)),
        "solve": (lambda: float(np.linalg.norm(m @ exes["solve"](m, b) - b)
                                / np.linalg.norm(b)),
                  lambda: float(np.linalg.norm(m @ sla.solve(m, b) - b) / np.linalg.norm(b))),
        "qr": (lambda: float(np.linalg.norm(np.matmul(*exes["qr"](m)) - m) / mn),
               lambda: float(np.linalg.norm(np.matmul(*sla.qr(m, mode="economic")) - m)
                             / mn)),
    }
    for op, pe in peers.items():
        st = interleaved(pe, runs if n <= 512 else 3, 1, budget_s=15, settle_s=SETTLE_S)
        r_rlx, r_sc = resid[op][0](), resid[op][1]()
        c_rlx, c_sc = cpu_ms(pe["rlx"], 3), cpu_ms(pe["scipy"], 3)
        say(f"  {op} n={n}: rlx {st['rlx'].p50 * 1e3:.2f} ms scipy "
            f"{st['scipy'].p50 * 1e3:.2f} ms (x{st['scipy'].p50 / st['rlx'].p50:.2f}); "
            f"residual rlx {r_rlx:.1e} scipy {r_sc:.1e}")
        out.append({"op": op, "n": n, "rlx": st["rlx"], "scipy": st["scipy"],
                    "cpu_ms_rlx": c_rlx, "cpu_ms_scipy": c_sc,
                    "residual_rlx": r_rlx, "residual_scipy": r_sc})
        save()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--quick", action="store_true", help="small sizes (a smoke run)")
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--sparse-only", action="store_true", help="SpMV and CG only, no dense")
    args = ap.parse_args()
    t_start = time.time()
    if args.quick:
        mats_spec = {"poisson2d": ("2d", 60), "poisson3d": ("3d", 16), "random_spd": ("rand", 5000)}
        sizes: tuple[int, ...] = (128, 256)
    else:
        mats_spec = {"poisson2d": ("2d", 400), "poisson3d": ("3d", 50),
                     "random_spd": ("rand", 100000)}
        sizes = (256, 512, 1024, 2048)
    run = start_run(1, with_torch=False)
    build = {"2d": poisson2d, "3d": poisson3d, "rand": lambda n: random_spd(n, 9)}
    mats = {name: build[kind](size) for name, (kind, size) in mats_spec.items()}
    info = run.machine
    info["sparse_only"] = args.sparse_only
    say(f"{info['cpu']} ({info['isa']}), load {info['load_average_1m']}")
    rows: list[dict] = []
    dense: list[dict] = []
    info["skipped"] = []

    def save() -> None:  # after every measurement: a run cut short keeps what it measured
        info["seconds"] = round(time.time() - t_start, 1)
        finish_run(run)
        write(rows, dense, info, args.quick)

    for threads in (1, 2):
        limit_threads(threads)
        say(f"sparse, {threads} thread(s)")
        for name, a in mats.items():
            if time.time() - t_start > BUDGET_S:
                info["skipped"].append(f"{name} on {threads} thread(s)")
                continue
            rows.append(sparse_one(name, a, threads, args.runs, CG_MAXITER))
            save()
    limit_threads(1)
    if args.sparse_only:
        sizes = ()
    else:
        say("dense, 1 thread")
    for n in sizes:
        if time.time() - t_start > BUDGET_S:
            info["skipped"].append(f"dense n={n}")
            continue
        dense_one(n, max(3, args.runs // 3), dense, save)
    save()


def write(rows: list[dict], dense: list[dict], info: dict, quick: bool) -> None:
    def ms(s: Any) -> str:
        return f"{s.p50 * 1e3:.3f}"

    dense_md = [] if info.get("sparse_only") else [
        "## Dense (1 thread)\n",
        markdown_table(["op", "n", "rlx ms", "scipy ms", "ratio", "CPU ms rlx",
                        "CPU ms scipy", "CPU ratio", "residual rlx", "residual scipy"],
                       [[d["op"], d["n"], ms(d["rlx"]), ms(d["scipy"]),
                         f"{d['scipy'].p50 / d['rlx'].p50:.2f}", f"{d['cpu_ms_rlx']:.2f}",
                         f"{d['cpu_ms_scipy']:.2f}",
                         f"{d['cpu_ms_scipy'] / max(d['cpu_ms_rlx'], 1e-9):.2f}",
                         f"{d['residual_rlx']:.1e}", f"{d['residual_scipy']:.1e}"]
                        for d in dense])]
    flags = (" --quick" if quick else "") + (" --sparse-only" if info["sparse_only"] else "")
    md = [f"# Linear algebra: rlx (cpu) vs scipy\n\n{stamp(info)}; {info['seconds']} s.\n\n"
          f"Command: `nice python benchmarks/bench_linalg.py{flags}`. Per-call medians "
          "(interleaved turns); ratio = scipy / rlx (> 1: rlx faster). f64.\n",
          "## SpMV and CG\n",
          markdown_table(
              ["matrix", "n", "nnz", "threads", "SpMV rlx ms", "SpMV scipy ms", "ratio",
               "CG rlx ms", "CG scipy ms", "ratio", "CG iters rlx / scipy", "CG res rlx / scipy",
               "Jacobi-PCG rlx ms", "scipy ms", "ratio", "PCG iters rlx / scipy",
               "PCG res rlx / scipy"],
              [[r["matrix"], r["n"], r["nnz"], r["threads"], ms(r["spmv"]["rlx"]),
                ms(r["spmv"]["scipy"]), f"{r['spmv']['scipy'].p50 / r['spmv']['rlx'].p50:.2f}",
                ms(r["cg"]["rlx"]), ms(r["cg"]["scipy"]),
                f"{r['cg']['scipy'].p50 / r['cg']['rlx'].p50:.2f}",
                f"{r['cg']['iterations_rlx']} / {r['cg']['iterations_scipy']}",
                f"{r['cg']['residual_rlx']:.1e} / {r['cg']['residual_scipy']:.1e}",
                ms(r["pcg_jacobi"]["rlx"]), ms(r["pcg_jacobi"]["scipy"]),
                f"{r['pcg_jacobi']['scipy'].p50 / r['pcg_jacobi']['rlx'].p50:.2f}",
                f"{r['pcg_jacobi']['iterations_rlx']} / {r['pcg_jacobi']['iterations_scipy']}",
                f"{r['pcg_jacobi']['residual_rlx']:.1e} / "
                f"{r['pcg_jacobi']['residual_scipy']:.1e}"] for r in rows]),
          (f"\nSkipped (the run's {BUDGET_S} s budget on a shared machine): "
           f"{', '.join(info['skipped'])}.\n" if info.get("skipped") else ""),
          "\nscipy's SpMV and CG matvec are single-threaded at any thread count; its CG loop "
          "is Python around them. rlx's CG is one kernel (the whole loop in C).\n",
          *dense_md,
          "\n## CPU time, 1 thread (the machine was oversubscribed; see cpu_ms)\n",
          markdown_table(["matrix", "SpMV CPU ms rlx", "scipy", "ratio", "CG CPU ms rlx",
                          "scipy", "ratio"],
                         [[r["matrix"], f"{r['cpu_ms']['spmv_rlx']:.3f}",
                           f"{r['cpu_ms']['spmv_scipy']:.3f}",
                           f"{r['cpu_ms']['spmv_scipy'] / max(r['cpu_ms']['spmv_rlx'], 1e-9):.2f}",
                           f"{r['cpu_ms']['cg_rlx']:.2f}", f"{r['cpu_ms']['cg_scipy']:.2f}",
                           f"{r['cpu_ms']['cg_scipy'] / max(r['cpu_ms']['cg_rlx'], 1e-9):.2f}"]
                          for r in rows if r["cpu_ms"]])]
    base = "linalg" + ("-quick" if quick else "") + ("-sparse" if info["sparse_only"] else "")
    js, mdp = save_run(base, "wall", {"machine": info, "sparse": rows, "dense": dense},
                       "\n".join(md))
    say(f"wrote {js} and {mdp}")


if __name__ == "__main__":
    main()
