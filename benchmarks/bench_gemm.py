"""Single-thread sgemm throughput on the shapes of MiniLM and the MNIST MLP, side by side.

Why rlx's CPU figures are where they are: almost all of a MiniLM call and most of an MLP step
is f32 GEMM. This times the same products through rlx (a compiled ``x @ W.T`` on target cpu:
rlx's own AVX-512 kernel where the machine has AVX-512, rlx_core/targets/cpu/sgemm.py), the
BLAS rlx otherwise calls (scipy-openblas32, with the weight operand transposed as rlx passes
it and not), numpy's OpenBLAS, PyTorch and ONNX Runtime's MLAS (a one-node MatMul model), all
on one thread, and prints GFLOP/s. A second table times one-row products (GPT-2 small's
decoding shapes), where rlx's prepacked form runs its GEMV (cpu/gemv.py) and OpenBLAS's
sgemv on W as stored is a peer too.

    python benchmarks/bench_gemm.py                  # writes results/gemm-<cpu slug>.{json,md}
    python benchmarks/bench_gemm.py --clock thread   # results/gemm-<cpu slug>-threadcpu.*
    python benchmarks/bench_gemm.py --groups gemv    # the one-row table only
    python benchmarks/bench_gemm.py --threads 2      # every peer on 2 threads (wall clock):
                                                     # results/gemm-<cpu slug>-2thread.*
"""

from __future__ import annotations

import argparse
import ctypes
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import (  # noqa: E402
    command_text,
    finish_run,
    interleaved,
    markdown_table,
    save_run,
    say,
    stamp,
    start_run,
)

# (M, K, N): MiniLM seq 128 (FFN up, FFN down, attention projections), MLP forward / dW
SHAPES = ((128, 384, 1536), (128, 1536, 384), (128, 384, 384), (128, 784, 128), (1024, 784, 128))
# one row, GPT-2 small's decoding step (bench_decode.py): the tied LM head, the MLP's up and
# down projections; rlx's prepacked form runs its GEMV (rlx_core/targets/cpu/gemv.py), and
# OpenBLAS's sgemv on W as stored is a peer of its own
GEMV_SHAPES = ((1, 768, 50257), (1, 768, 3072), (1, 3072, 768))
GROUPS = {"gemm": SHAPES, "gemv": GEMV_SHAPES}
# the goal's two comparisons (issue 22: >= MLAS with W prepacked and with W per call)
MLAS_PER_CALL = "onnxruntime (MLAS, W per call)"
PAIR_HEADERS = ["prepacked: rlx / MLAS", "per call: rlx / MLAS"]


def openblas32(threads: int = 1) -> Any:
    import scipy_openblas32 as sob

    lib_dir = Path(sob.get_lib_dir())
    path = next(p for p in lib_dir.iterdir() if p.name.startswith(f"lib{sob.get_library()}"))
    lib = ctypes.CDLL(str(path))
    lib.scipy_openblas_set_num_threads(threads)
    lib.scipy_cblas_sgemm.restype = None
    return lib


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=60)
    ap.add_argument("--quick", action="store_true", help="few runs, write nothing")
    ap.add_argument("--clock", choices=("wall", "thread"), default="wall",
                    help="what the table's GFLOP/s divide by: the p50 wall time per call, or "
                         "the p50 CPU time of this thread per call (every peer runs on it "
                         "alone: a loaded machine's time slices taken by others drop out); "
                         "both are in the JSON")
    ap.add_argument("--threads", type=int, default=1,
                    help="threads for every peer (rlx's team, MLAS, OpenBLAS, torch); above 1 "
                         "only the wall clock means anything (the others' threads leave the "
                         "calling thread's CPU time out)")
    ap.add_argument("--groups", default="gemm,gemv",
                    help="comma list: gemm (MiniLM/MLP shapes), gemv (one-row decoding shapes)")
    args = ap.parse_args(argv)
    if args.threads > 1 and args.clock == "thread":
        ap.error("--clock thread times the calling thread alone: use the wall clock with "
                 "--threads above 1")
    run = start_run(args.threads)
    runs = 10 if args.quick else max(20, args.runs)
    tables, data = [], []
    for group in args.groups.split(","):
        rows, headers = [], []
        for m, k, n in GROUPS[group]:
            peers, flop = _peers(m, k, n, args.threads)
            cpu: dict[str, Any] = {}
            # a call of the LM head streams 154 MB: fewer, longer calls
            # on several threads a turn starts after the previous peer's idle pool stopped
            # spinning (onnxruntime's spins ~50 ms; under SCHED_FIFO it held rlx's worker's
            # core, and rlx's team ran its calls on one thread): a pause, then settle calls
            pools = {"gap_s": 0.1, "settle_s": 0.05, "vary_order": True} \
                if args.threads > 1 else {}
            stats = interleaved(peers, runs if flop < 1e8 else max(20, runs // 3), 5, block=5,
                                thread_cpu=cpu, **pools)
            wall = {p: flop / s.p50 / 1e9 for p, s in stats.items()}
            # every peer computes on this thread alone (one thread each): its CPU time is what
            # a quiet machine would show, where time slices taken by others inflate the wall
            gf = {p: flop / s.p50 / 1e9 for p, s in cpu.items()} if args.clock == "thread" \
                else wall
            say(f"{m}x{k}x{n}: " + "  ".join(f"{p} {v:.1f}" for p, v in gf.items()) +
                f" GFLOP/s ({args.clock} clock)")
            rlx_gf = max(v for p, v in gf.items() if p.startswith("rlx"))
            best = max(v for p, v in gf.items() if not p.startswith("rlx"))
            per_call = next(iter(peers))  # rlx's form packing W in the call comes first
            pairs = [gf["rlx (W prepacked)"] / gf["onnxruntime (MLAS)"],
                     gf[per_call] / gf[MLAS_PER_CALL]]
            rows.append([f"{m}x{k}x{n}"] + [f"{gf[p]:.1f}" for p in peers]
                        + [f"{rlx_gf / best:.2f}x"] + [f"{r:.2f}x" for r in pairs]
                        + ([f"{4 * k * n / cpu['rlx (W prepacked)'].p50 / 1e9:.1f}"]
                           if group == "gemv" else []))
            headers = ["M x K x N"] + list(peers) + ["best rlx / best other"] + \
                PAIR_HEADERS + \
                (["rlx prepacked weight GB/s"] if group == "gemv" else [])
            data.append({"group": group, "shape": [m, k, n], "gflops": gf, "gflops_wall": wall,
                         "gflops_thread_cpu": {p: flop / s.p50 / 1e9 for p, s in cpu.items()},
                         "stats_wall_s": stats, "stats_thread_cpu_s": cpu})
        title = {"gemm": "GEMM (MiniLM and MLP shapes)",
                 "gemv": "One row (GPT-2 small decoding: LM head, MLP up, MLP down)"}[group]
        tables.append(f"## {title}\n\n" + markdown_table(headers, rows))
    mach = finish_run(run)
    how = ("the p50 wall time per call" if args.clock == "wall" else
           "the p50 CPU time of the calling thread per call (every peer runs on it alone; "
           "other processes' time slices drop out, their cache pollution does not)")
    cmd = command_text("benchmarks/bench_gemm.py", argv)
    md = (f"# f32 GEMM, {_threads_text(args.threads)}, GFLOP/s\n\n{stamp(mach)}; GFLOP/s over {how}, p50 of "
          f"{runs} calls in turns of 5 ({max(20, runs // 3)} for a call of >= 100 MFLOP) "
          f"(`{cmd}`). Each peer reads a copy of W of its own (no peer finds in L3 a W that "
          f"the peer before it just read; see OWN_COPY in the script).\n\n" + "\n".join(tables))
    if not args.quick:
        out = {"machine": mach, "clock": args.clock, "threads": args.threads, "results": data}
        js, mdp = save_run("gemm", args.clock, out, md, args.threads)
        say(f"wrote {js} and {mdp}")
    return 0


def _threads_text(threads: int) -> str:
    return "one thread" if threads == 1 else f"{threads} threads per peer"


def _peers(m: int, k: int, n: int, threads: int = 1,
           ) -> tuple[dict[str, Callable[[], Any]], float]:
    """The zero-argument calls of every peer computing ``x @ W^T`` (x: m x k, W: n x k) on
    ``threads`` threads, and the FLOPs of one call."""
    import numpy as np
    import onnxruntime as ort
    import torch
    from onnx import TensorProto, helper, numpy_helper

    import rlx_core as rlx

    lib = openblas32(threads)
    vp, f32 = ctypes.c_void_p, ctypes.c_float
    rng = np.random.default_rng(0)
    a = rng.random((m, k), dtype=np.float32)
    wt = rng.random((n, k), dtype=np.float32)  # weights as torch/rlx store them: (out, in)
    w = np.ascontiguousarray(wt.T)
    c = np.empty((m, n), np.float32)
    # OWN_COPY: each peer reads a copy of W of its own, as rlx's and MLAS's prepacked forms
    # do. With one shared W, the peer after another whose turn had just read the LM head's
    # 154 MB found much of it still in this VM's ~160 MB of L3: torch read as 15.1 GFLOP/s
    # there against 9.0 alone (state-review, 1x768x50257)
    wt_ob, wt_gemv, wt_rlx = wt.copy(), wt.copy(), wt.copy()
    w_ob, w_np, w_torch, w_mlas = w.copy(), w.copy(), w.copy(), w.copy()
    ta, tw = torch.from_numpy(a), torch.from_numpy(w_torch)
    g = helper.make_graph([helper.make_node("MatMul", ["A", "W"], ["C"])], "g",
                          [helper.make_tensor_value_info("A", TensorProto.FLOAT, [m, k])],
                          [helper.make_tensor_value_info("C", TensorProto.FLOAT, [m, n])],
                          [numpy_helper.from_array(w, "W")])
    # W as a graph input: MLAS packs it in every call, the peer of rlx's unpacked form
    g_in = helper.make_graph([helper.make_node("MatMul", ["A", "W"], ["C"])], "g",
                             [helper.make_tensor_value_info("A", TensorProto.FLOAT, [m, k]),
                              helper.make_tensor_value_info("W", TensorProto.FLOAT, [k, n])],
                             [helper.make_tensor_value_info("C", TensorProto.FLOAT, [m, n])])
    opts = ort.SessionOptions()
    opts.intra_op_num_threads, opts.inter_op_num_threads = threads, 1
    sess, sess_in = (ort.InferenceSession(
        helper.make_model(gr, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString(),
        opts, providers=["CPUExecutionProvider"]) for gr in (g, g_in))

    def ob_t() -> None:
        lib.scipy_cblas_sgemm(101, 111, 112, m, n, k, f32(1), vp(a.ctypes.data), k,
                              vp(wt_ob.ctypes.data), k, f32(0), vp(c.ctypes.data), n)

    def ob_n() -> None:
        lib.scipy_cblas_sgemm(101, 111, 111, m, n, k, f32(1), vp(a.ctypes.data), k,
                              vp(w_ob.ctypes.data), n, f32(0), vp(c.ctypes.data), n)

    def ob_gemv() -> None:  # y = W x, W (n x k) row-major as stored
        lib.scipy_cblas_sgemv(101, 111, n, k, f32(1), vp(wt_gemv.ctypes.data), k, vp(a.ctypes.data),
                              1, f32(0), vp(c.ctypes.data), 1)

    exe = rlx.compile(lambda x, wt: rlx.nn.linear(x, wt), a, wt, target="cpu", record=False)
    impl = "+".join(sorted({v["impl"] for v in exe.program.info["kernels"].values()}))
    prog, par = exe.program, exe.params
    # W closed over: a graph parameter, packed once per binding (prepack.py), as ORT's
    # initializer is prepacked by MLAS; the input form packs W^T in every call
    fixed = rlx.compile(lambda x, wt=wt: rlx.nn.linear(x, wt), a, target="cpu", record=False)
    fprog, fpar = fixed.program, fixed.params
    peers: dict[str, Callable[[], Any]] = {
        f"rlx ({impl})": lambda: prog.run((a, wt_rlx), par),
        "rlx (W prepacked)": lambda: fprog.run((a,), fpar),
        "openblas32 (W^T)": ob_t, "openblas32 (W)": ob_n}
    if m == 1:
        peers["openblas32 sgemv"] = ob_gemv
    peers |= {"numpy": lambda: np.matmul(a, w_np, out=c), "torch": lambda: ta @ tw,
              "onnxruntime (MLAS)": lambda: sess.run(None, {"A": a}),
              MLAS_PER_CALL: lambda: sess_in.run(None, {"A": a, "W": w_mlas})}
    return peers, 2.0 * m * n * k


if __name__ == "__main__":
    raise SystemExit(main())
