"""The int8 MNIST MLPs as an FPGA datapath: Verilator simulation (bit-exact against the host
int8 reference, cycles per inference) and yosys synth_ice40 + nextpnr-ice40 (HX8K) reports.

- the QAT MLP 784-512-512-10 of bench_embedded.py (``--params`` reuses its weights) at 16 MAC
  lanes per layer on the first ``--images`` test images: its 668 KB of weights fit no iCE40
  (an HX8K has 16 KB of block RAM), so it is simulated, not synthesized;
- a small MLP 784-16-10 (f32 1 epoch, static PTQ min-max) at 1, 2, 4, 8 MAC lanes: simulated
  on ``--small-images`` images and synthesized each: the parallelism knob table.

images/s = fmax / cycles per inference (one image at a time, no overlap between images).

    python benchmarks/bench_fpga.py --lanes "" --params /tmp/qat.npz  # results/embedded_fpga_mlp.*
    python benchmarks/bench_fpga.py --images 0 --lanes 1,4             # results/embedded_fpga_knobs.*
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import machine, markdown_table, say, write_results  # noqa: E402


def _simulate(g: Any, lanes: int, xt: Any, chunk: int = 500) -> tuple[Any, Any, list[int]]:
    import numpy as np

    import rlx_core as rlx
    from rlx_core.targets.registry import get_target

    _, _, lir, ctx = rlx.lower(g, target="fpga", record=False)
    prog = get_target("fpga").build(lir, ctx.options, parallelism=lanes)
    sim = prog.run_fn.__self__
    logits, cycles = [], []
    for s in range(0, len(xt), chunk):
        res = sim.run_calls([[xt[i:i + 1]] for i in range(s, min(s + chunk, len(xt)))])
        logits += [o[0][0] for o in res.outputs]
        cycles += res.instructions
    return prog, np.stack(logits), cycles


def _reference(g_batch: Any, xt: Any) -> Any:
    import numpy as np

    import rlx_core as rlx

    ref = rlx.compile(g_batch, target="numpy")
    return np.concatenate([np.asarray(ref(xt[s:s + 1000])) for s in range(0, len(xt), 1000)])


def main() -> None:
    from rlx_core.data.mnist import load_mnist

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--images", type=int, default=1000)
    ap.add_argument("--small-images", type=int, default=1000)
    ap.add_argument("--lanes", default="1,2,4,8")
    ap.add_argument("--qat-epochs", type=float, default=0.5)
    ap.add_argument("--params", help="QAT weights of bench_embedded.py to reuse")
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()

    data = load_mnist()
    xt, yt = data.flat("test")
    out: dict[str, Any] = {"machine": machine()}

    # the big MLP: simulated only
    if args.images:
        _big(args, xt, yt, out)
    if args.lanes:
        _knobs(args, data, out)


def _big(args: argparse.Namespace, xt: Any, yt: Any, out: dict[str, Any]) -> None:
    import numpy as np

    from benchmarks.bench_embedded import _train_qat
    from rlx_core.quant import qat

    params = _train_qat(args)
    xb = xt[:1000]
    gb = qat.convert_qat_mlp(params, xb).graph
    g1 = qat.convert_qat_mlp(params, xt[:1]).graph
    n = args.images
    t0 = time.perf_counter()
    prog, lg, cyc = _simulate(g1, 16, xt[:n])
    secs = time.perf_counter() - t0
    ref = _reference(gb, xt[:n])
    same = int((lg.argmax(-1) == ref.argmax(-1)).sum())
    exact = int(sum(np.array_equal(a, b) for a, b in zip(lg, ref, strict=True)))
    acc = float((lg.argmax(-1) == yt[:n]).mean())
    big = {"images": n, "lanes": 16, "accuracy": acc, "identical_predictions": same,
           "identical_logits": exact, "cycles": int(np.mean(cyc)), "sim_seconds": secs,
           "weight_bytes": prog.info["weight_bytes"]}
    say(f"784-512-512-10: {big}")
    out["mlp_784_512_512_10"] = big
    info = out["machine"]
    md = (f"# int8 MNIST MLP 784-512-512-10 (QAT) as an FPGA datapath, simulated\n\n"
          f"Command: `python benchmarks/bench_fpga.py --lanes \"\" --params QAT.npz` (the QAT "
          f"weights of bench_embedded.py). Host: {info['cpu']}, {info['cores']} cores, load "
          f"average {info.get('load_average_1m')} (shared). Verilator simulation of the "
          f"generated RTL, 16 MAC lanes per layer.\n\n"
          f"{n} test images: accuracy {100 * acc:.2f}%, predictions identical to the host int8 "
          f"reference {same} / {n}, logits bit-identical {exact} / {n}, "
          f"{big['cycles']:,} cycles per inference ({secs / n * 1e3:.1f} ms of simulation per "
          f"image). Not synthesized: its {big['weight_bytes']:,} bytes of weights fit no iCE40 "
          f"(HX8K: 16 KB of block RAM).\n")
    print(md)
    if not args.no_write:
        write_results("embedded_fpga_mlp", out, md)


def _knobs(args: argparse.Namespace, data: Any, out: dict[str, Any]) -> None:
    import numpy as np

    import rlx_core as rlx
    from rlx_core.models.mlp import mlp_logits
    from rlx_core.models.train_mnist import train_mlp
    from rlx_core.quant import ptq
    from rlx_core.targets.fpga.synth import synthesize
    from rlx_core.targets.registry import get_target

    x, _ = data.flat("train")
    xt, yt = data.flat("test")
    # the small MLP: the parallelism knob table
    small = train_mlp(data, epochs=1.0, sizes=(784, 16, 10), target="cpu").params
    small = {k: {m: np.asarray(v, np.float32) for m, v in p.items()} for k, p in small.items()}
    calib = [x[i:i + 1] for i in range(0, 2000, 10)]
    gs = ptq.quantize_static(rlx.trace(lambda v: mlp_logits(small, v), xt[:1]), data=calib).graph
    refs = rlx.compile(ptq.quantize_static(rlx.trace(lambda v: mlp_logits(small, v), xt[:1]),
                                           data=calib).graph, target="numpy")
    ns = args.small_images
    ref_s = np.concatenate([np.asarray(refs(xt[i:i + 1])) for i in range(ns)])
    host_acc = float((ref_s.argmax(-1) == yt[:ns]).mean())
    rows, knobs = [], []
    for lanes in (int(v) for v in args.lanes.split(",")):
        _, lg_s, cyc_s = _simulate(gs, lanes, xt[:ns])
        exact_s = int(sum(np.array_equal(a, b) for a, b in zip(lg_s, ref_s, strict=True)))
        _, _, lir, _ = rlx.lower(gs, target="fpga", record=False)
        proj, _, _ = get_target("fpga").project(lir, lanes)
        t = time.perf_counter()
        rep = synthesize(proj)
        say(f"lanes {lanes}: synthesized in {time.perf_counter() - t:.0f} s: {rep}")
        c = int(np.mean(cyc_s))
        ips = rep.fmax_mhz * 1e6 / c
        rows.append([lanes, f"{100 * host_acc:.2f}", f"{exact_s} / {ns}", c, rep.luts, rep.ffs,
                     f"{rep.brams} / {rep.bram_total}", rep.dsps, f"{rep.lc_used} / {rep.lc_total}",
                     f"{rep.fmax_mhz:.1f}", f"{ips:,.0f}", rep.generic_cells])
        knobs.append({"lanes": lanes, "cycles": c, "identical_logits": exact_s,
                      "synth": rep.to_json(), "images_per_s": ips})
    out["mlp_784_16_10"] = {"host_int8_accuracy": host_acc, "images": ns, "knobs": knobs}
    table = markdown_table(["MAC lanes", "accuracy % (int8)", "logits bit-identical",
                            "cycles / inference", "SB_LUT4", "flip-flops", "BRAM", "DSP",
                            "logic cells (P&R)", "fmax MHz", "images / s",
                            "generic synth cells"], rows)
    info = out["machine"]
    md = (f"# int8 MNIST MLP 784-16-10 on an FPGA datapath: the parallelism knob\n\n"
          f"Command: `python benchmarks/bench_fpga.py --images 0 --lanes {args.lanes} "
          f"--small-images {ns}`. Host: {info['cpu']}, {info['cores']} cores, load average "
          f"{info.get('load_average_1m')} (shared). f32 1 epoch, static PTQ (min-max); each row "
          f"simulated by Verilator on {ns} test images (bit-identical logits counted against "
          f"the numpy int8 reference) and synthesized by yosys `synth_ice40` + `nextpnr-ice40 "
          f"--hx8k --package ct256`; generic cells from yosys `synth`.\n\n{table}\n\n"
          f"images/s = fmax / cycles per inference, one image at a time. The requantize unit "
          f"(a 32x32-bit multiply and 64-bit shifts, combinational in one cycle; the HX8K has "
          f"no DSP blocks) bounds fmax; more lanes cut cycles nearly in proportion. Weight "
          f"precision: 8-bit only (a 4-bit weight knob is not built).\n")
    print(md)
    if not args.no_write:
        write_results("embedded_fpga_knobs", out, md)


if __name__ == "__main__":
    main()
