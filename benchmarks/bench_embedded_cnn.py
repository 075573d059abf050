"""A small int8 MNIST CNN as Cortex-M firmware under QEMU, on the full 10,000-image test set.

Model (default widths, ``--c1 --c2 --hidden``): conv 1->8 3x3 stride 2 pad 1, relu, conv
8->16 3x3 stride 2 pad 1, relu, flatten (16x7x7 = 784), linear 784->32, relu, linear 32->10
(strided convolutions do the downsampling). Trained here in f32 with torch (CPU, one thread, Adam 2e-3 decayed 0.4x per
epoch, ``--epochs``, batch 64, seed 0), then quantized by rlx's static PTQ
(``rlx_core.quant.ptq``: u8 activations min-max over ``--calib`` training images, i8 weights
symmetric per output channel; each conv becomes ``int_conv2d`` + per-channel ``requantize``
+ relu on the integers, the flatten reshapes u8 values, the linears ``int_linear``), as a
graph at batch 1 returning (logits, argmax). The host int8 reference is the numpy target on
the same integer graph at batch 1,000. The firmware (``rlx.compile(..., target="cortex-m")``,
``--board``: ``mps2-an386``, Cortex-M4F, or ``mps2-an505``, Cortex-M33; both with SMLAD) runs every image under ``qemu-system-arm -icount
shift=0``, ``--chunk`` images per QEMU launch over semihosting files.

Reported: f32, host int8 and firmware accuracy, predictions and logits identical to the host
reference, flash / RAM from the ELF, arena and conv scratch, instructions per inference.

    python benchmarks/bench_embedded_cnn.py --c1 16  # results/embedded_cortex_m_cnn_<cpu>.*
    python benchmarks/bench_embedded_cnn.py         # conv 8->16: 97.49%, half the instructions
    python benchmarks/bench_embedded_cnn.py --images 500 --no-write
    python benchmarks/bench_embedded_cnn.py --c1 16 --board mps2-an505 --images 1000
                                    # Cortex-M33: results/embedded_cortex_m_cnn_mps2-an505_<cpu>.*
    python benchmarks/bench_embedded_cnn.py --c1 16 --qat-epochs 1
                                    # QAT: results/embedded_cortex_m_cnn_qat_c16_<cpu>.*
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import (  # noqa: E402
    cpu_slug,
    end_of_run,
    machine,
    markdown_table,
    placement_text,
    say,
    write_results,
)

CORES = {"mps2-an386": "Cortex-M4F (an386)", "mps2-an505": "Cortex-M33 (an505)"}


def _train(args: argparse.Namespace, x: Any, y: Any) -> dict[str, Any]:
    """f32 weights ({c1,b1,c2,b2,fc,bfc}) trained with torch, or loaded from ``--params``."""
    import numpy as np

    if args.params and Path(args.params).exists():
        z = np.load(args.params)
        return {k: z[k] for k in z.files}
    import torch

    torch.manual_seed(0)
    torch.set_num_threads(1)  # tiny convolutions: a second thread only waits on a shared host
    c1, c2, hid = args.c1, args.c2, args.hidden
    net = torch.nn.Sequential(
        torch.nn.Conv2d(1, c1, 3, stride=2, padding=1), torch.nn.ReLU(),
        torch.nn.Conv2d(c1, c2, 3, stride=2, padding=1), torch.nn.ReLU(),
        torch.nn.Flatten(), torch.nn.Linear(c2 * 49, hid), torch.nn.ReLU(),
        torch.nn.Linear(hid, 10))
    opt = torch.optim.Adam(net.parameters(), lr=2e-3)
    sched = torch.optim.lr_scheduler.StepLR(opt, 1, gamma=0.4)  # per epoch
    xs, ys = torch.tensor(x.reshape(-1, 1, 28, 28)), torch.tensor(y.astype(np.int64))
    gen = torch.Generator().manual_seed(0)
    t0 = time.perf_counter()
    for epoch in range(args.epochs):
        for i, idx in enumerate(torch.randperm(len(xs), generator=gen).split(64)):
            if i % 200 == 0:
                say(f"  epoch {epoch + 1}, batch {i}: {time.perf_counter() - t0:.0f} s")
            opt.zero_grad()
            torch.nn.functional.cross_entropy(net(xs[idx]), ys[idx]).backward()
            opt.step()
        sched.step()
        say(f"epoch {epoch + 1}: {time.perf_counter() - t0:.0f} s")
    sd = {k: v.detach().numpy().astype(np.float32) for k, v in net.state_dict().items()}
    out = {"c1": sd["0.weight"], "b1": sd["0.bias"], "c2": sd["2.weight"], "b2": sd["2.bias"],
           "fc": sd["5.weight"], "bfc": sd["5.bias"], "fc2": sd["7.weight"],
           "bfc2": sd["7.bias"]}
    if args.params:
        np.savez(args.params, **out)
    return out


def cnn(p: dict[str, Any]) -> Any:
    """The model as an rlx function of an (N, 1, 28, 28) batch: (logits, argmax)."""
    import rlx_core as rlx

    def head(x: Any) -> Any:
        h = rlx.nn.relu(rlx.nn.conv2d(x, p["c1"], p["b1"], stride=2, padding=1))
        h = rlx.nn.relu(rlx.nn.conv2d(h, p["c2"], p["b2"], stride=2, padding=1))
        h = rlx.nn.relu(rlx.nn.linear(rlx.reshape(h, (h.shape[0], -1)), p["fc"], p["bfc"]))
        logits = rlx.nn.linear(h, p["fc2"], p["bfc2"])
        return logits, rlx.argmax(logits, axis=-1)

    return head


def quantized(p: dict[str, Any], calib: Any, batches: tuple[int, ...], example: Any) -> list[Any]:
    """The static-PTQ integer graphs at each batch size of ``batches`` (traced on the first
    rows of ``example``), from one calibration (u8 min-max over ``calib``, observed at its
    own batch size)."""
    import rlx_core as rlx
    from rlx_core.quant import ptq
    from rlx_core.quant.observers import make_observer

    graphs = [rlx.trace(cnn(p), example[:b]) for b in batches]
    g = graphs[0]
    layers = ptq.quantizable_layers(g)
    watched = list(dict.fromkeys([n.inputs[0] for n in layers]
                                 + [ptq.post_value(g, n) for n in layers]))
    obs = {v: make_observer("minmax", dtype="u8", scheme="asymmetric") for v in watched}
    gc = rlx.trace(cnn(p), calib[:250])  # same function, same value names
    ptq.calibrate(gc, watched, obs, [calib[i:i + 250] for i in range(0, len(calib), 250)],
                  "numpy")
    act = {v: o.qparams() for v, o in obs.items()}
    return [ptq.convert_static(gi, act).graph for gi in graphs]


def qat_finetune(args: argparse.Namespace, p: dict[str, Any], x: Any, y: Any,
                 calib: Any) -> dict[str, Any]:
    """QAT (rlx_core.quant.qat: fake-quantized inputs and per-channel weights, LSQ step sizes)
    from the f32 weights ``p`` for ``--qat-epochs`` epochs with rlx's autodiff and Adam on the
    cpu target (batch 64, seed 1); the step sizes start at min-max PTQ's over ``calib``.
    Loaded from ``--qat-params`` if that file exists (saved there otherwise)."""
    import numpy as np

    import rlx_core as rlx
    from rlx_core.optim import Adam, compile_step
    from rlx_core.quant import ptq, qat
    from rlx_core.quant.observers import make_observer

    names = ("weight", "bias", "x_log_scale", "w_log_scale")
    if args.qat_params and Path(args.qat_params).exists():
        z = np.load(args.qat_params)
        return {k: {n: z[f"{k}.{n}"] for n in names} for k in ("conv1", "conv2", "fc1", "fc2")}
    f32 = {"conv1": {"weight": p["c1"], "bias": p["b1"]},
           "conv2": {"weight": p["c2"], "bias": p["b2"]},
           "fc1": {"weight": p["fc"], "bias": p["bfc"]},
           "fc2": {"weight": p["fc2"], "bias": p["bfc2"]}}
    g = rlx.trace(cnn(p), calib[:250])
    inputs = [n.inputs[0] for n in ptq.quantizable_layers(g)]
    obs = {v: make_observer("minmax", dtype="u8", scheme="asymmetric") for v in inputs}
    ptq.calibrate(g, inputs, obs, [calib[i:i + 250] for i in range(0, len(calib), 250)],
                  "numpy")
    amax = [float(np.max(obs[v].range()[1])) for v in inputs]
    step = compile_step(qat.cnn_loss(), Adam(args.qat_lr), qat.init_qat(f32, amax), x[:64],
                        y[:64], target="cpu")
    order = np.random.default_rng(1).permutation(len(x))
    steps = int(args.qat_epochs * (len(x) // 64))
    t0 = time.perf_counter()
    for i in range(steps):
        idx = order[i * 64 % len(x):][:64]
        if len(idx) < 64:
            idx = order[:64]
        loss = step(x[idx], y[idx])
        if i % 100 == 0:
            say(f"  QAT step {i} / {steps}: loss {float(loss):.4f}, "
                f"{time.perf_counter() - t0:.0f} s")
    out = {k: {n: np.asarray(v) for n, v in q.items()} for k, q in step.params.items()}
    say(f"QAT: {steps} steps in {time.perf_counter() - t0:.0f} s")
    if args.qat_params:
        np.savez(args.qat_params, **{f"{k}.{n}": v for k, q in out.items() for n, v in q.items()})
    return out


def main() -> None:
    import numpy as np

    import rlx_core as rlx
    from rlx_core.data.mnist import load_mnist
    from rlx_core.targets.cortex_m.runtime import firmware_of

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--images", type=int, default=10000)
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--c1", type=int, default=8, help="channels of the first conv")
    ap.add_argument("--c2", type=int, default=16, help="channels of the second conv")
    ap.add_argument("--hidden", type=int, default=32, help="width of the hidden linear")
    ap.add_argument("--calib", type=int, default=1000, help="training images calibrated on")
    ap.add_argument("--chunk", type=int, default=2000, help="images per QEMU launch")
    ap.add_argument("--params", help="an .npz of f32 weights to reuse (saved if absent)")
    ap.add_argument("--board", default="mps2-an386", help="mps2-an386 (Cortex-M4F) or "
                    "mps2-an505 (Cortex-M33)")
    ap.add_argument("--qat-epochs", type=float, default=0.0,
                    help="QAT fine-tuning epochs from the f32 weights (0: static PTQ)")
    ap.add_argument("--qat-lr", type=float, default=1e-4)
    ap.add_argument("--qat-params", help="an .npz of QAT weights to reuse (saved if absent)")
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()

    info = machine()
    data = load_mnist()
    x, y = data.flat("train")
    xt, yt = data.flat("test")
    xt, yt = xt[:args.images].reshape(-1, 1, 28, 28), yt[:args.images]
    p = _train(args, x, y)
    bs = 1000 if len(xt) % 1000 == 0 else len(xt)  # the host's batch
    f32 = rlx.compile(cnn(p), xt[:bs], target="numpy")
    f32_pred = np.concatenate([np.asarray(f32(xt[s:s + bs])[1]) for s in range(0, len(xt), bs)])
    calib = x[:args.calib].reshape(-1, 1, 28, 28)
    if args.qat_epochs:
        from rlx_core.quant import qat

        qp = qat_finetune(args, p, x.reshape(-1, 1, 28, 28), y, calib)
        q1, qb = (qat.convert_qat(qp, xt[:b], argmax=True).graph for b in (1, bs))
    else:
        q1, qb = quantized(p, calib, (1, bs), xt[:bs])
    ref = rlx.compile(qb, target="numpy")
    outs = [ref(xt[s:s + bs]) for s in range(0, len(xt), bs)]
    ref_l = np.concatenate([np.asarray(o[0]) for o in outs])
    ref_p = np.concatenate([np.asarray(o[1]) for o in outs])
    say(f"f32 {100 * (f32_pred == yt).mean():.2f}%, host int8 {100 * (ref_p == yt).mean():.2f}%")
    vs_ptq, ptq_acc, differ = "", None, None
    if args.qat_epochs:  # the static PTQ of the same f32 weights, on the host, for comparison
        ptq_ref = rlx.compile(quantized(p, calib, (bs,), xt[:bs])[0], target="numpy")
        ptq_p = np.concatenate([np.asarray(ptq_ref(xt[s:s + bs])[1])
                                for s in range(0, len(xt), bs)])
        ptq_acc, differ = float((ptq_p == yt).mean()), int((ptq_p != ref_p).sum())
        vs_ptq = (f" Static PTQ of the same f32 weights (min-max over {args.calib} training "
                  f"images), host int8 reference: {100 * ptq_acc:.2f}%; its predictions differ "
                  f"from QAT's on {differ} of {len(xt)} images.")
        say(f"PTQ host int8 {100 * ptq_acc:.2f}%, {differ} predictions differ")

    os.environ["RLX_CORTEX_M_BOARD"] = args.board  # read by the target's build
    exe = rlx.compile(q1, target="cortex-m")
    fw = firmware_of(exe)
    logits, preds, instr = [], [], []
    t0 = time.perf_counter()
    for s in range(0, len(xt), args.chunk):
        res = fw.run_calls([[xt[i:i + 1]] for i in range(s, min(s + args.chunk, len(xt)))])
        logits += [o[0][0] for o in res.outputs]
        preds += [int(o[1][0]) for o in res.outputs]
        instr += res.instructions
        say(f"  {exe.program.info['board']}: {s + len(res.outputs)} / {len(xt)} images")
    secs = time.perf_counter() - t0
    lg, pr, ins = np.stack(logits), np.asarray(preds), np.asarray(instr)
    n = len(xt)
    acc = float((pr == yt).mean())
    same = int((pr == ref_p).sum())
    exact = int(sum(np.array_equal(a, b) for a, b in zip(lg, ref_l, strict=True)))
    mem = exe.program.info["memory"]
    c1, c2, hid = (int(v) for v in (p["c1"].shape[0], p["c2"].shape[0], p["fc"].shape[0]))
    end_of_run(info)
    f32_acc, host_acc = float((f32_pred == yt).mean()), float((ref_p == yt).mean())
    table = markdown_table(
        ["model", "images", "f32 accuracy %", "host int8 accuracy %", "firmware accuracy %",
         "predictions = host int8", "logits bit-identical", "flash B", "RAM B", "arena B",
         "conv scratch B", "instructions / inference", "host ms / image (QEMU)"],
        [[f"CNN conv{c1}-conv{c2}-fc{hid}-fc10, {CORES[args.board]}, SMLAD", n,
          f"{100 * f32_acc:.2f}",
          f"{100 * host_acc:.2f}", f"{100 * acc:.2f}", f"{same} / {n}", f"{exact} / {n}",
          mem["flash_bytes"], mem["ram_bytes"], mem["arena_bytes"], mem["scratch_bytes"],
          f"{ins.mean():,.0f}", f"{secs / n * 1e3:.1f}"]])
    flags = "".join(f" --{k} {v}" for k, v, d in (("images", args.images, 10000),
                                                 ("epochs", args.epochs, 4), ("c1", c1, 8),
                                                 ("c2", c2, 16), ("hidden", hid, 32),
                                                 ("board", args.board, "mps2-an386"),
                                                 ("qat-epochs", args.qat_epochs, 0.0),
                                                 ("qat-lr", args.qat_lr, 1e-4)) if v != d)
    quant = (f"static PTQ by rlx (u8 activations min-max over {args.calib} training images, "
             f"i8 weights per output channel)" if not args.qat_epochs else
             f"QAT by rlx ({args.qat_epochs:g} epochs from the f32 weights with rlx's autodiff "
             f"and Adam {args.qat_lr:g} on the cpu target, batch 64: fake-quantized u8 inputs "
             f"and i8 weights per output channel, LSQ step sizes started at min-max over "
             f"{args.calib} training images)")
    md = (f"# int8 MNIST CNN as Cortex-M firmware under QEMU\n\n"
          f"Command: `python benchmarks/bench_embedded_cnn.py{flags}`. Host: {info['cpu']}, "
          f"{info['cores']} cores, load average {info.get('load_average_1m')} at the start, "
          f"{info['load_average_end']} at the end (shared), {placement_text(info)}. "
          f"qemu-system-arm `-icount shift=0`, "
          f"arm-none-eabi-gcc `-Os`. Model: conv 1->{c1} 3x3/2 + relu, conv {c1}->{c2} 3x3/2 + "
          f"relu, flatten, linear {c2 * 49}->{hid} + relu, linear {hid}->10; f32 {args.epochs} epochs (torch, "
          f"Adam 2e-3 x0.4 per epoch, batch 64, seed 0), "
          f"{quant}: `int_conv2d` -> `requantize` -> relu twice, a u8 "
          f"flatten, `int_linear` -> `requantize` -> relu, `int_linear`, the logits dequantized on the device and their argmax. "
          f"The host int8 reference is the numpy target on the same integer graph.{vs_ptq}\n\n"
          f"{table}\n\n"
          "Executes (emulated): QEMU runs the ELF instruction by instruction; instructions are "
          "SysTick ticks at 1 instruction per ns (resolution 40 instructions at 25 MHz), not "
          "cycles of a real part. Flash = .text + .data; RAM = .data + .bss (arena, I/O "
          "buffers, the conv steps' NCHW<->NHWC scratch, 4 KiB stack).\n")
    print(md)
    if not args.no_write:
        board = "" if args.board == "mps2-an386" else f"{args.board}_"
        kind = ("qat_" + (f"c{c1}_" if c1 != 8 else "")) if args.qat_epochs else ""
        write_results(f"embedded_cortex_m_cnn_{kind}{board}{cpu_slug(info['cpu'])}",
                      {"machine": info, "images": n, "f32_accuracy": f32_acc,
                       "host_int8_accuracy": host_acc, "firmware_accuracy": acc,
                       "identical_predictions": same, "identical_logits": exact,
                       "memory": mem, "instructions_mean": float(ins.mean()),
                       "instructions_min": int(ins.min()), "instructions_max": int(ins.max()),
                       "host_seconds": secs, "epochs": args.epochs, "calib": args.calib,
                       "channels": [c1, c2], "hidden": hid, "board": args.board,
                       "qat_epochs": args.qat_epochs, "qat_lr": args.qat_lr,
                       "ptq_host_int8_accuracy": ptq_acc,
                       "ptq_differing_predictions": differ}, md)


if __name__ == "__main__":
    main()
