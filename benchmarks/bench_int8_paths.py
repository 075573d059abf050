"""Every int8 kernel path of this machine on MiniLM's linears: one thread, thread CPU time.

Each path (``RLX_IGEMM_ISA``: c, avx2, avxvnni, avx512vnni, amx; the ones this CPU has) runs
in a process of its own, since the compiled kernels read the variable once per process. Per
shape (rows x K x N: MiniLM's q/k/v/o, FFN-up and FFN-down linears at batch 1 and 8, seq 128)
it times the dynamic (per-token) and the static int8 linear of ``rlx.quant.ptq`` with no
epilogue, and ONNX Runtime's ``MatMulInteger`` (u8 x s8 -> i32, one thread) beside them as
the raw-GEMM reference: rlx's figures include quantizing x and the dequantized f32 store.

    python benchmarks/bench_int8_paths.py [--paths amx,avx512vnni] [--reps 50]

writes ``results/int8_paths-<cpu>.md/.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.common import (  # noqa: E402
    end_of_run,
    machine,
    machine_stem,
    markdown_table,
    stamp,
    write_results,
)

SHAPES = ((128, 384, 384), (128, 384, 1536), (128, 1536, 384),
          (1024, 384, 384), (1024, 384, 1536), (1024, 1536, 384))


def _time(fn, reps: int) -> float:
    """The fastest of three blocks of ``reps`` calls, seconds per call (thread CPU time)."""
    for _ in range(3):
        fn()
    best = float("inf")
    for _ in range(3):
        t = time.thread_time()
        for _ in range(reps):
            fn()
        best = min(best, (time.thread_time() - t) / reps)
    return best


def _rlx_child(reps: int) -> dict[str, float]:
    """In the child: each shape's dynamic and static linear on this process's path."""
    import numpy as np

    import rlx_core as rlx
    from rlx_core.frontend.tracer import spec
    from rlx_core.quant import ptq

    out = {}
    for m, k, n in SHAPES:
        rng = np.random.default_rng(0)
        w = rng.standard_normal((n, k)).astype(np.float32)
        b = rng.standard_normal(n).astype(np.float32)
        g = rlx.trace(lambda x, w=w, b=b: rlx.nn.linear(x, w, b), spec((m, k), "f32"))
        x = rng.standard_normal((m, k)).astype(np.float32)
        for kind, q in (("dynamic", ptq.quantize_dynamic(g, granularity="token")),
                        ("static", ptq.quantize_static(g, data=[x], target="numpy",
                                                       method="minmax"))):
            exe = rlx.compile(q.graph, target="cpu")
            out[f"{kind} {m}x{k}x{n}"] = _time(lambda exe=exe, x=x: exe(x), reps)
    return out


def _ort(reps: int) -> dict[str, float]:
    """ONNX Runtime's MatMulInteger (u8 x s8, one thread) per shape."""
    import numpy as np
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    out = {}
    for m, k, n in SHAPES:
        wq = np.random.default_rng(0).integers(-127, 128, (k, n), dtype=np.int8)
        graph = helper.make_graph(
            [helper.make_node("MatMulInteger", ["a", "w"], ["y"])], "g",
            [helper.make_tensor_value_info("a", TensorProto.UINT8, [m, k])],
            [helper.make_tensor_value_info("y", TensorProto.INT32, [m, n])],
            initializer=[numpy_helper.from_array(wq, "w")])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        onnx.checker.check_model(model)
        so = ort.SessionOptions()
        so.intra_op_num_threads = so.inter_op_num_threads = 1
        sess = ort.InferenceSession(model.SerializeToString(), so,
                                    providers=["CPUExecutionProvider"])
        a = np.random.default_rng(1).integers(0, 256, (m, k), dtype=np.uint8)
        out[f"{m}x{k}x{n}"] = _time(lambda sess=sess, a=a: sess.run(None, {"a": a}), reps)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--paths", default="", help="comma-separated (default: every path here)")
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--child", default="", help=argparse.SUPPRESS)
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()
    for var in ("OMP_NUM_THREADS", "RLX_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = "1"
    if args.child:
        print(json.dumps(_rlx_child(args.reps)))
        return
    from rlx_core.targets.cpu.igemm import paths_here

    paths = [p for p in (args.paths.split(",") if args.paths else paths_here())]
    info = {**machine(), "threads": 1, "clock": "thread CPU time", "reps": args.reps}
    times: dict[str, dict[str, float]] = {}
    for path in paths:
        env = {**os.environ, "RLX_IGEMM_ISA": path, "PYTHONPATH": str(ROOT)}
        res = subprocess.run([sys.executable, __file__, "--child", path, "--reps",
                              str(args.reps)], env=env, capture_output=True, text=True,
                             check=True)
        times[path] = json.loads(res.stdout.strip().splitlines()[-1])
        print(path, {k: round(v * 1e3, 3) for k, v in times[path].items()}, flush=True)
    ort_times = _ort(args.reps)
    end_of_run(info)
    rows = []
    for m, k, n in SHAPES:
        shape = f"{m}x{k}x{n}"
        for kind in ("dynamic", "static"):
            row = [shape, kind]
            for path in paths:
                t = times[path][f"{kind} {shape}"]
                row.append(f"{t * 1e3:.3f} ({m * k * n / t / 1e9:.0f})")
            rows.append(row)
        t = ort_times[shape]
        rows.append([shape, "ORT MatMulInteger"] + [f"{t * 1e3:.3f} ({m * k * n / t / 1e9:.0f})"]
                    * (1 if paths else 0) + [""] * max(len(paths) - 1, 0))
    md = ("# int8 linears on each kernel path (MiniLM's shapes)\n\n"
          f"`python benchmarks/bench_int8_paths.py{' --paths ' + args.paths if args.paths else ''}"
          f" --reps {args.reps}`. {stamp(info)}. One thread, thread CPU time, the fastest of "
          "three blocks of calls; ms per call (G multiply-adds/s). rlx: the dynamic (per-token) "
          "and static int8 linear with its row quantization and f32 store, no epilogue; ONNX "
          "Runtime: MatMulInteger alone (u8 x s8 -> i32).\n\n"
          + markdown_table(["rows x K x N", "linear"] + paths, rows))
    print(md)
    if not args.no_write:
        data = {"info": info, "rlx": times, "ort_matmulinteger": ort_times}
        for p in write_results(machine_stem("int8_paths"), data, md):
            print("wrote", p)


if __name__ == "__main__":
    main()
