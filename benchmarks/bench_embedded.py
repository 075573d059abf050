"""The int8 MNIST MLP (784-512-512-10, QAT) as Cortex-M firmware under QEMU, on the full test set.

One f32 model trained here (Adam, 1 epoch, batch 128, seed 0, target cpu), fine-tuned with
LSQ QAT (as benchmarks/bench_quant_mnist.py does), converted to an int8 graph at batch 1 that
returns (logits, argmax). The host reference is the numpy target on the same graph (at batch
1,000). The firmware (rlx compile ... --target cortex-m) runs every image under
``qemu-system-arm -icount shift=0``, many images per QEMU launch over semihosting files:

- ``mps2-an386`` (Cortex-M4F, DSP, hard float): all ``--images`` images;
- ``mps2-an386`` with the portable C kernel (no SMLAD) and ``mps2-an505`` (Cortex-M33):
  the first ``--subset`` images, for their instruction counts.

Reported: accuracy, predictions identical to the host int8 reference, logits bit-identical,
flash / RAM from the ELF, the arena from the LIR memory plan, instructions per inference
(SysTick ticks at 1 instruction per ns of virtual time, resolution 40 instructions at 25 MHz,
50 at 20 MHz), and host seconds per image under QEMU.

    python benchmarks/bench_embedded.py                 # writes results/embedded_cortex_m-<cpu>.*
    python benchmarks/bench_embedded.py --images 500 --no-write
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import (  # noqa: E402
    finish_run,
    in_fixed_batches,
    markdown_table,
    save_run,
    say,
    stamp,
    start_run,
)


def _train_qat(args: argparse.Namespace) -> dict:
    import numpy as np

    from rlx_core.data.mnist import load_mnist
    from rlx_core.models.train_mnist import train_mlp
    from rlx_core.optim import Adam, compile_step
    from rlx_core.quant import ptq, qat
    from rlx_core.quant.observers import MinMaxObserver

    data = load_mnist()
    x, y = data.flat("train")
    if args.params and Path(args.params).exists():
        z = np.load(args.params)
        return {k: {n: z[f"{k}.{n}"] for n in ("weight", "bias", "x_log_scale", "w_log_scale")}
                for k in ("fc1", "fc2", "fc3")}
    t0 = time.perf_counter()
    params = train_mlp(data, epochs=1.0, target="cpu").params
    params = {k: {n: np.asarray(v, np.float32) for n, v in p.items()} for k, p in params.items()}
    say(f"trained f32 in {time.perf_counter() - t0:.0f} s")
    import rlx_core as rlx
    from rlx_core.models.mlp import mlp_logits

    g32 = rlx.trace(lambda v: mlp_logits(params, v), x[:1000])
    lins = ptq.quantizable(g32)
    obs = {n.inputs[0]: MinMaxObserver("u8", "asymmetric") for n in lins}
    ptq.calibrate(g32, list(obs), obs, [x[i:i + 1000] for i in range(0, 5000, 1000)])
    amax = [float(np.max(obs[n.inputs[0]].range()[1])) for n in lins]
    qparams = qat.init_qat(params, amax)
    step = compile_step(qat.qat_mlp_loss, Adam(1e-4), qparams, x[:128], y[:128], target="cpu")
    order = np.random.default_rng(1).permutation(len(x))
    for i in range(int(args.qat_epochs * (len(x) // 128))):
        idx = order[i * 128:(i + 1) * 128]
        step(x[idx], y[idx])
    out = {k: {n: np.asarray(v) for n, v in p.items()} for k, p in step.params.items()}
    if args.params:
        np.savez(args.params, **{f"{k}.{n}": v for k, p in out.items() for n, v in p.items()})
    say(f"QAT done in {time.perf_counter() - t0:.0f} s")
    return out


def _run_firmware(prog: Any, xt: Any, chunk: int) -> tuple[Any, Any, list[int], float]:
    import numpy as np

    from rlx_core.targets.cortex_m.runtime import firmware_of

    fw = firmware_of(prog)
    logits, preds, instr = [], [], []
    t0 = time.perf_counter()
    for s in range(0, len(xt), chunk):
        res = fw.run_calls([[xt[i:i + 1]] for i in range(s, min(s + chunk, len(xt)))])
        logits += [o[0][0] for o in res.outputs]
        preds += [int(o[1][0]) for o in res.outputs]
        instr += res.instructions
        say(f"  {prog.info['board']}: {s + len(res.outputs)} / {len(xt)} images")
    return np.stack(logits), np.asarray(preds), instr, time.perf_counter() - t0


def main() -> None:
    import numpy as np

    import rlx_core as rlx
    from rlx_core.data.mnist import load_mnist
    from rlx_core.quant import qat
    from rlx_core.targets.registry import get_target

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--images", type=int, default=10000)
    ap.add_argument("--subset", type=int, default=1000)
    ap.add_argument("--chunk", type=int, default=2500, help="images per QEMU launch")
    ap.add_argument("--qat-epochs", type=float, default=0.5)
    ap.add_argument("--params", help="an .npz of QAT weights to reuse (saved if absent)")
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()

    # no peers timed side by side (instruction counts under QEMU): pools at their defaults
    run = start_run(None, with_torch=False)
    data = load_mnist()
    xt, yt = data.flat("test")
    xt, yt = xt[:args.images], yt[:args.images]
    params = _train_qat(args)
    q1 = qat.convert_qat_mlp(params, xt[:1], argmax=True).graph
    batch = min(1000, len(xt))
    ref = rlx.compile(qat.convert_qat_mlp(params, xt[:batch], argmax=True).graph, target="numpy")
    ref_l, ref_p = in_fixed_batches(ref, xt, batch)  # static int8: rows independent

    tgt = get_target("cortex-m")
    _, _, lir, ctx = rlx.lower(q1, target="cortex-m", record=False)
    rows, data_out = [], {}
    for label, board, dsp, n in (("Cortex-M4F (an386), SMLAD", "mps2-an386", True, len(xt)),
                                 ("Cortex-M4F (an386), portable C", "mps2-an386", False,
                                  min(args.subset, len(xt))),
                                 ("Cortex-M33 (an505), SMLAD", "mps2-an505", True,
                                  min(args.subset, len(xt)))):
        prog = tgt.build(lir, ctx.options, board=board, dsp=dsp)
        lg, pr, instr, secs = _run_firmware(prog, xt[:n], args.chunk)
        mem = prog.info["memory"]
        same = int((pr == ref_p[:n]).sum())
        exact = int(sum(np.array_equal(a, b) for a, b in zip(lg, ref_l[:n], strict=True)))
        acc = float((pr == yt[:n]).mean())
        ins = np.asarray(instr)
        rows.append([label, n, f"{100 * acc:.2f}", f"{same} / {n}", f"{exact} / {n}",
                     mem["flash_bytes"], mem["ram_bytes"], mem["arena_bytes"],
                     f"{ins.mean():,.0f}", f"{secs / n * 1e3:.1f}"])
        data_out[label] = {"board": board, "dsp": dsp, "images": n, "accuracy": acc,
                           "identical_predictions": same, "identical_logits": exact,
                           "memory": mem, "instructions_mean": float(ins.mean()),
                           "instructions_min": int(ins.min()), "instructions_max": int(ins.max()),
                           "host_seconds": secs}
    host_acc = float((ref_p == yt).mean())
    table = markdown_table(["firmware", "images", "accuracy %", "predictions = host int8",
                            "logits bit-identical", "flash B", "RAM B", "arena B",
                            "instructions / inference", "host ms / image (QEMU)"], rows)
    info = finish_run(run)
    md = (f"# int8 MNIST MLP 784-512-512-10 as Cortex-M firmware under QEMU\n\n"
          f"Command: `python benchmarks/bench_embedded.py`. Host: {stamp(info)} (shared). "
          f"qemu-system-arm 7.2 `-icount shift=0`; arm-none-eabi-gcc 12.2 `-Os`. Model: f32 1 epoch + QAT "
          f"({args.qat_epochs} epoch LSQ), int8 graph at batch 1 returning (logits, argmax); "
          f"the host int8 reference (numpy target, same graph) scores {100 * host_acc:.2f}% "
          f"on these {len(xt)} images.\n\n{table}\n\n"
          "Executes (emulated): QEMU runs the ELF instruction by instruction; the instruction "
          "count is exact to the SysTick resolution (40 instructions at 25 MHz, 50 at 20 MHz), "
          "but QEMU does not model cycles (no pipeline, no flash wait states), so instructions "
          "are not cycles of a real part. Flash = .text + .data of the ELF; RAM = .data + .bss "
          "(arena, I/O buffers, 4 KiB stack). Logits are computed on the device (dequantize "
          "feeds the argmax) and compared bit for bit.\n")
    print(md)
    if not args.no_write:
        save_run("embedded_cortex_m", "wall", {"machine": info, "host_int8_accuracy": host_acc,
                                               "images": len(xt), "runs": data_out}, md)


if __name__ == "__main__":
    main()
