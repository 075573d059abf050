"""Single 3x3 stride-1 convolutions on cpu: the direct blocked kernel against Winograd F(2x2,
3x3) and F(4x4, 3x3) (rlx_core/targets/cpu/winograd.py) and ONNX Runtime, one thread, each
timed by its thread's CPU time, A/B in one process. The rule conv.winograd_tile comes from
these numbers.

    python benchmarks/bench_winograd.py            # ResNet-50's and VGG's layers at 112x112
    chrt -f 1 python benchmarks/bench_winograd.py  # on a loaded machine (as committed)

Writes benchmarks/results/winograd-<cpu>.{json,md} (CPU model and ISA inside); ``--layers``
picks some (``c,o,hw,batch`` separated by ``;``).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import (  # noqa: E402
    end_of_run,
    interleaved,
    isa,
    limit_threads,
    machine,
    machine_stem,
    markdown_table,
    say,
    stamp,
    write_results,
)

# (input channels, output channels, output side, batch): ResNet-50's and VGG's 3x3 stride-1
# convs at a 112x112 input, batch 1 and 8
LAYERS = [(64, 64, 28, 1), (128, 128, 14, 1), (256, 256, 7, 1), (512, 512, 4, 1),
          (64, 64, 28, 8), (128, 128, 14, 8), (256, 256, 7, 8), (512, 512, 4, 8),
          (64, 64, 112, 1), (128, 128, 56, 1), (256, 256, 28, 1), (512, 512, 14, 1)]
VARIANTS = {"direct": "0", "F(2,3)": "2", "F(4,3)": "4"}


def _onnx_conv(c: int, o: int, w: Any, b: Any) -> bytes:
    from onnx import TensorProto, helper, numpy_helper

    node = helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1],
                            kernel_shape=[3, 3])
    relu = helper.make_node("Relu", ["c"], ["y"])
    g = helper.make_graph([node, relu], "conv",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                         [None, c, None, None])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--layers", default="")
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args(argv)
    limits = limit_threads(1)
    import numpy as np
    import onnxruntime as ort

    import rlx_core as rlx
    from rlx_core import nn

    layers = ([tuple(int(v) for v in s.split(",")) for s in args.layers.split(";")]
              if args.layers else LAYERS)
    mach = machine()
    mach["isa"] = isa()
    say(stamp(mach))
    rows, data = [], []
    for c, o, hw, n in layers:
        rng = np.random.default_rng(0)
        x = rng.standard_normal((n, c, hw, hw)).astype(np.float32)
        w = (rng.standard_normal((o, c, 3, 3)) / np.sqrt(9 * c)).astype(np.float32)
        b = rng.standard_normal(o).astype(np.float32)
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = opts.inter_op_num_threads = 1
        sess = ort.InferenceSession(_onnx_conv(c, o, w, b), opts,
                                    providers=["CPUExecutionProvider"])
        want = sess.run(None, {"x": x})[0]
        peers: dict[str, Any] = {"onnxruntime": lambda s=sess, x=x: s.run(None, {"x": x})}
        errs: dict[str, float] = {}
        for name, mode in VARIANTS.items():
            os.environ["RLX_WINOGRAD"] = mode

            def f(v: Any, w: Any = w, b: Any = b) -> Any:
                return nn.relu(nn.conv2d(v, rlx.param(w, "w"), rlx.param(b, "b"),
                                         stride=(1, 1), padding=(1, 1)))

            exe = rlx.compile(f, x, target="cpu", record=False)
            impl = {k["impl"] for k in exe.program.info["kernels"].values()}
            got = exe(x)
            got = np.asarray(got[0] if isinstance(got, tuple) else got)
            errs[name] = float(np.abs(got - want).max() / np.abs(want).max())
            peers[f"{name} ({'/'.join(sorted(impl))})"] = lambda e=exe, x=x: e(x)
        os.environ.pop("RLX_WINOGRAD", None)
        cpu: dict[str, Any] = {}
        interleaved(peers, args.runs, 1, thread_cpu=cpu)
        p50 = {k: s.p50 for k, s in cpu.items()}
        ort_t = p50["onnxruntime"]
        flops = 2 * n * o * c * 9 * hw * hw
        cells = [f"{c}->{o} @{hw} b{n}", f"{ort_t * 1e3:.2f}"]
        for k, t in p50.items():
            if k != "onnxruntime":
                cells.append(f"{t * 1e3:.2f} ({ort_t / t:.2f}x)")
        cells.append(" / ".join(f"{e:.1e}" for e in errs.values()))
        rows.append(cells)
        data.append({"layer": [c, o, hw, n], "gflop": flops / 1e9, "p50_s": p50,
                     "rel_err_vs_ort": errs})
        say(" | ".join(cells))
    end_of_run(mach)
    heads = ["layer (3x3 s1 p1 + bias + ReLU)", "ORT ms", "direct ms (vs ORT)",
             "F(2,3) ms", "F(4,3) ms", "max rel err vs ORT (direct / F2 / F4)"]
    md = (f"# Winograd vs direct 3x3 convs (cpu, 1 thread, thread CPU time, p50 of "
          f"{args.runs})\n\n{stamp(mach)}\n\n" + markdown_table(heads, rows))
    if not args.no_write:
        write_results(machine_stem("winograd"),
                      {"benchmark": "winograd", "machine": mach, "threads": limits,
                       "layers": data}, md)
    print(md)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
