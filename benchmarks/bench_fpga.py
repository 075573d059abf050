"""The int8 MNIST MLPs as an FPGA datapath: Verilator simulation (bit-exact against the host
int8 reference, cycles per inference) and yosys synth_ice40 + nextpnr-ice40 (HX8K) reports.

- the QAT MLP 784-512-512-10 of bench_embedded.py (``--params`` reuses its weights) at 16 MAC
  lanes per layer on the first ``--images`` test images: its 668 KB of weights fit no iCE40
  (an HX8K has 16 KB of block RAM), so it is simulated, not synthesized;
- a small MLP 784-16-10 (f32 1 epoch, static PTQ min-max) at each ``--knobs`` pair of weight
  bits (8, or 4: symmetric per-channel weights in [-7, 7], the ROM and multipliers 4 bits
  wide) and MAC lanes: accuracy of the host int8 reference on all 10,000 test images,
  simulated on ``--small-images`` images and synthesized each: the knob table.

images/s = fmax / cycles per inference (one image at a time, no overlap between images).

    python benchmarks/bench_fpga.py --images 10000 --knobs "" --params /tmp/qat.npz
                                                # results/embedded_fpga_mlp-<cpu>.*
    python benchmarks/bench_fpga.py --images 0 --knobs 4:4,4:4:p,8:4,4:8,8:4:p \
        --small-images 200                      # results/embedded_fpga_knobs-<cpu>.*
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import (  # noqa: E402
    Run,
    finish_run,
    in_fixed_batches,
    markdown_table,
    save_run,
    say,
    stamp,
    start_run,
)


def _simulate(g: Any, lanes: int, xt: Any, pipeline: bool = False,
              chunk: int = 500) -> tuple[Any, Any, list[int]]:
    import numpy as np

    import rlx_core as rlx
    from rlx_core.targets.registry import get_target

    _, _, lir, ctx = rlx.lower(g, target="fpga", record=False)
    prog = get_target("fpga").build(lir, ctx.options, parallelism=lanes, pipeline=pipeline)
    sim = prog.run_fn.__self__
    logits, cycles = [], []
    for s in range(0, len(xt), chunk):
        res = sim.run_calls([[xt[i:i + 1]] for i in range(s, min(s + chunk, len(xt)))])
        logits += [o[0][0] for o in res.outputs]
        cycles += res.instructions
    return prog, np.stack(logits), cycles


def _reference(g_batch: Any, xt: Any, batch: int = 1000) -> Any:
    """The host int8 reference's logits of ``xt``, ``batch`` images (``g_batch``'s batch) a
    call (static quantization: each image's logits depend on that image alone)."""
    import rlx_core as rlx

    return in_fixed_batches(rlx.compile(g_batch, target="numpy"), xt, batch)


def main() -> None:
    from rlx_core.data.mnist import load_mnist

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--images", type=int, default=1000)
    ap.add_argument("--small-images", type=int, default=1000)
    ap.add_argument("--knobs", default="4:4,4:4:p,8:4,4:8,8:4:p",
                    help="weight bits:MAC lanes[:p for pipelined MAC lanes] of the knob "
                         "table's rows ('' for none)")
    ap.add_argument("--qat-epochs", type=float, default=0.5)
    ap.add_argument("--params", help="QAT weights of bench_embedded.py to reuse")
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--no-synth", action="store_true",
                    help="knob rows from simulation only (accuracy, bit-exactness, cycles): "
                         "for a machine too loaded for nextpnr's run time")
    args = ap.parse_args()

    # no peers timed side by side: every pool at its default, no torch
    run = start_run(None, with_torch=False)
    data = load_mnist()
    xt, yt = data.flat("test")
    out: dict[str, Any] = {"machine": run.machine}

    # the big MLP: simulated only
    if args.images:
        _big(args, run, xt, yt, out)
    if args.knobs:
        _knobs(args, run, data, out)


def _big(args: argparse.Namespace, run: Run, xt: Any, yt: Any, out: dict[str, Any]) -> None:
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
    info = finish_run(run)
    big = {"images": n, "lanes": 16, "accuracy": acc, "identical_predictions": same,
           "identical_logits": exact, "cycles": int(np.mean(cyc)), "sim_seconds": secs,
           "weight_bytes": prog.info["weight_bytes"]}
    say(f"784-512-512-10: {big}")
    out["mlp_784_512_512_10"] = big
    md = (f"# int8 MNIST MLP 784-512-512-10 (QAT) as an FPGA datapath, simulated\n\n"
          f"Command: `python benchmarks/bench_fpga.py --images {n} --knobs \"\" --params "
          f"QAT.npz` (the QAT weights of bench_embedded.py, trained and saved there if absent). "
          f"Host: {stamp(info)} (shared). Verilator simulation of the "
          f"generated RTL, 16 MAC lanes per layer.\n\n"
          f"{n} test images: accuracy {100 * acc:.2f}%, predictions identical to the host int8 "
          f"reference {same} / {n}, logits bit-identical {exact} / {n}, "
          f"{big['cycles']:,} cycles per inference ({secs / n * 1e3:.1f} ms of simulation per "
          f"image). Not synthesized: its {big['weight_bytes']:,} bytes of weights fit no iCE40 "
          f"(HX8K: 16 KB of block RAM). Each layer's serial requantize unit (about 36 "
          f"cycles an output, overlapped with the MAC array) adds cycles where 16 lanes x 36 "
          f"exceed a layer's inputs (the second layer's 512) and after the last group.\n")
    print(md)
    if not args.no_write:
        save_run("embedded_fpga_mlp", "wall", out, md)


def _quantized(small: dict[str, Any], example: Any, calib: list[Any], bits: int) -> Any:
    """The static PTQ graph of the small MLP at ``example``'s batch: activations u8 min-max
    observed over ``calib``, weights symmetric per channel in 8 bits or in 4 (codes in [-7, 7],
    held in i8: the fpga's ROM stores them as 4-bit fields)."""
    import rlx_core as rlx
    from rlx_core.models.mlp import mlp_logits
    from rlx_core.quant import ptq
    from rlx_core.quant.observers import make_observer
    from rlx_core.quant.params import QParams

    g = rlx.trace(lambda v: mlp_logits(small, v), example)
    lins = ptq.quantizable(g)
    watched = list(dict.fromkeys([n.inputs[0] for n in lins]
                                 + [ptq.post_value(g, n) for n in lins]))
    obs = {v: make_observer("minmax", dtype="u8", scheme="asymmetric") for v in watched}
    gc = rlx.trace(lambda v: mlp_logits(small, v), calib[0])
    ptq.calibrate(gc, watched, obs, [(c,) for c in calib], "cpu")
    weights = {}
    if bits == 4:
        for n in lins:
            p = ptq.weight_qparams(ptq.host_value(g, n.inputs[1]), True, "i4")
            weights[n.inputs[1]] = QParams(p.scale, p.zero_point, "i8", p.axis)
    return ptq.convert_static(g, {v: o.qparams() for v, o in obs.items()}, weights).graph


def _knobs(args: argparse.Namespace, run: Run, data: Any, out: dict[str, Any]) -> None:
    import numpy as np

    import rlx_core as rlx
    from rlx_core.models.train_mnist import train_mlp
    from rlx_core.targets.fpga.errors import SynthesisError
    from rlx_core.targets.fpga.synth import synthesize
    from rlx_core.targets.registry import get_target

    x, _ = data.flat("train")
    xt, yt = data.flat("test")
    small = train_mlp(data, epochs=1.0, sizes=(784, 16, 10), target="cpu").params
    small = {k: {m: np.asarray(v, np.float32) for m, v in p.items()} for k, p in small.items()}
    calib = [x[i:i + 1] for i in range(0, 2000, 10)]
    ns = args.small_images
    rows, knobs, graphs = [], [], {}
    for knob in args.knobs.split(","):
        bits, lanes, pipe = int(knob.split(":")[0]), int(knob.split(":")[1]), knob.endswith(":p")
        if bits not in graphs:
            ref = rlx.compile(_quantized(small, xt[:1000], calib, bits), target="numpy")
            full = np.concatenate([np.asarray(ref(xt[s:s + 1000])) for s in range(0, 10000, 1000)])
            graphs[bits] = (_quantized(small, xt[:1], calib, bits), full,
                            float((full.argmax(-1) == yt).mean()))
        gs, full, acc = graphs[bits]
        prog, lg_s, cyc_s = _simulate(gs, lanes, xt[:ns], pipe)
        assert [ly["weight_bits"] for ly in prog.info["layers"]] == [bits, bits]
        exact_s = int(sum(np.array_equal(a, b) for a, b in zip(lg_s, full[:ns], strict=True)))
        _, _, lir, _ = rlx.lower(gs, target="fpga", record=False)
        proj, _, _ = get_target("fpga").project(lir, lanes, pipe)
        c = int(np.mean(cyc_s))
        t = time.perf_counter()
        if args.no_synth:
            rows.append([bits, lanes, "yes" if pipe else "no", f"{100 * acc:.2f}",
                         f"{exact_s} / {ns}", c, "not synthesized (--no-synth)", "", "", "", "",
                         "", "", ""])
            knobs.append({"weight_bits": bits, "lanes": lanes, "pipeline": pipe, "cycles": c,
                          "identical_logits": exact_s, "synth": None})
            _write_knobs(args, run, out, rows, knobs, graphs)
            continue
        try:
            rep = synthesize(proj)
        except SynthesisError as err:  # e.g. more logic than the HX8K's cells place
            lines = err.message.splitlines()
            why = next((ln.strip() for ln in lines if "ERROR" in ln), lines[0])
            say(f"{bits}-bit, lanes {lanes}{' pipelined' if pipe else ''}: {err.message}")
            rows.append([bits, lanes, "yes" if pipe else "no", f"{100 * acc:.2f}",
                         f"{exact_s} / {ns}", c, f"not placed: {why[:120]}", "", "", "", "",
                         "", "", ""])
            knobs.append({"weight_bits": bits, "lanes": lanes, "pipeline": pipe, "cycles": c,
                          "identical_logits": exact_s, "synth": None,
                          "synth_error": err.message})
            _write_knobs(args, run, out, rows, knobs, graphs)
            continue
        say(f"{bits}-bit, lanes {lanes}: synthesized in {time.perf_counter() - t:.0f} s: {rep}")
        ips = rep.fmax_mhz * 1e6 / c
        rows.append([bits, lanes, "yes" if pipe else "no", f"{100 * acc:.2f}", f"{exact_s} / {ns}",
                     c, rep.luts, rep.ffs,
                     f"{rep.brams} / {rep.bram_total}", rep.dsps, f"{rep.lc_used} / {rep.lc_total}",
                     f"{rep.fmax_mhz:.1f}", f"{ips:,.0f}", rep.generic_cells])
        knobs.append({"weight_bits": bits, "lanes": lanes, "pipeline": pipe, "cycles": c,
                      "identical_logits": exact_s, "synth": rep.to_json(), "images_per_s": ips})
        _write_knobs(args, run, out, rows, knobs, graphs)  # after every row: a partial table


def _write_knobs(args: argparse.Namespace, run: Run, out: dict[str, Any], rows: list[Any],
                 knobs: list[Any], graphs: dict[int, Any]) -> None:
    ns = args.small_images
    out["mlp_784_16_10"] = {"host_int8_accuracy": {str(b): v[2] for b, v in graphs.items()},
                            "accuracy_images": 10000, "images": ns, "knobs": knobs}
    table = markdown_table(["weight bits", "MAC lanes", "pipelined MAC",
                            "accuracy % (host int8, 10,000)",
                            "logits bit-identical", "cycles / inference", "SB_LUT4",
                            "flip-flops", "BRAM", "DSP", "logic cells (P&R)", "fmax MHz",
                            "images / s", "generic synth cells"], rows)
    info = finish_run(run)
    md = (f"# int8 MNIST MLP 784-16-10 on an FPGA datapath: weight bits and MAC lanes\n\n"
          f"Command: `python benchmarks/bench_fpga.py --images 0 --knobs {args.knobs} "
          f"--small-images {ns}{' --no-synth' if args.no_synth else ''}`. Host: {stamp(info)} "
          f"(shared). f32 1 epoch, static PTQ (u8 activations "
          f"min-max over 200 training images; weights symmetric per channel, 8-bit in [-127, "
          f"127] or 4-bit in [-7, 7]); accuracy of the host int8 reference on all 10,000 test "
          f"images; each row simulated by Verilator on the first {ns} test images (logits "
          f"bit-identical to the reference counted)"
          + (" and not synthesized (--no-synth: on this loaded machine nextpnr-ice40 did not "
             "finish a row in its 900 s limit; rerun without --no-synth on a quiet machine for "
             "the resource columns).\n\n" if args.no_synth else
             " and synthesized by yosys `synth_ice40` + `nextpnr-ice40 --hx8k --package "
             "ct256 --seed 1`; generic cells from yosys `synth`.\n\n")
          + f"{table}\n\n"
          f"images/s = fmax / cycles per inference, one image at a time. 4-bit weights halve "
          f"the weight ROM (block RAM) and shrink each lane's multiplier to 8x4 bits, which "
          f"frees logic cells for more lanes. Each layer has one serial requantize unit (a "
          f"shift-add 32x32-bit multiply, about 36 cycles an output) that works through a "
          f"finished group of P outputs while the MAC array sums the next group: it adds "
          f"cycles only for the last group and where P x 36 exceeds the layer's inputs (the "
          f"HX8K has no DSP blocks; a combinational requantize was 6,875 LUTs at 9.9 MHz for "
          f"8-bit, 4 lanes). Pipelined MAC lanes register the 8xWB-bit products before the "
          f"32-bit accumulators: one cycle more per group. Rows: {len(rows)} of "
          f"{len(args.knobs.split(','))} asked.\n")
    print(md)
    if not args.no_write:
        save_run("embedded_fpga_knobs", "wall", out, md)


if __name__ == "__main__":
    main()
