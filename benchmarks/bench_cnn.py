"""CNNs imported from ONNX, on rlx's cpu target, against ONNX Runtime and PyTorch eager.

ResNet-50, MobileNetV2, a VGG-style and an Inception-style network (benchmarks/cnn_nets.py:
PyTorch modules with seeded random weights, torchvision does not import beside the pinned
torch) are exported to ONNX with the TorchScript exporter at opsets 9, 13 and 17 (the dynamo
exporter needs onnxscript, which is not installed, and starts at opset 18), imported with
``rlx.from_onnx`` and compiled for ``cpu``. Peers, in this one process on the same input:

- ``rlx``: the imported graph compiled for cpu;
- ``onnxruntime``: the same ONNX bytes on the CPU execution provider (all graph optimizations),
  its intra-op pool spinning (ORT's default) and not; the faster is the peer;
- ``torch``: the module in eager mode (``torch.inference_mode``).

Before timing, rlx's output at every opset is checked against ONNX Runtime's: max abs
difference <= 1e-4 after a softmax over the logits (the relative difference of the logits is
reported too), every opset at the first batch size, the last opset at the others. The opsets
produce the same graph after import, so the timing runs on the last opset given. p50 of the calls in interleaved turns (benchmarks/common.py).

    python benchmarks/bench_cnn.py                  # every network, batch 1 and 8
    python benchmarks/bench_cnn.py --quick          # small input, batch 1, nothing written
    python benchmarks/bench_cnn.py --nets resnet50 --batches 1

Writes results/cnn-<cpu>.json and .md (one pair per CPU model, ``-<n>thread`` for an explicit
--threads run; CPU model and ISA inside). The .md's ``## Notes`` section is hand-written and
kept when a run rewrites the file.
Goal (issue 23): rlx >= 1.0x ONNX Runtime on every network at batch 1 and 8, >= 1.2x on
ResNet-50.
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
    RESULTS,
    add_turn_args,
    cpu_slug,
    end_of_run,
    interleaved,
    isa,
    limit_threads,
    machine,
    markdown_table,
    placement_line,
    placement_text,
    result_stem,
    say,
    torch_threads,
    turns_text,
    write_results,
)

NETS = ("resnet50", "mobilenet_v2", "vgg", "inception")
OPSETS = (9, 13, 17)
TOLERANCE = 1e-4  # max abs difference of the softmax outputs
NOTES = "## Notes"  # the .md's hand-written section: a run rewrites the table, not this


def kept_notes(md: Path) -> str:
    """The ``## Notes`` section of an earlier results file, from its heading to the end (what
    people wrote about earlier runs), or a fresh heading."""
    old = md.read_text() if md.exists() else ""
    at = old.find("\n" + NOTES)
    return old[at + 1:] if at >= 0 else f"{NOTES}\n\n(kept when bench_cnn rewrites this file)\n"


def softmax(a: Any) -> Any:
    import numpy as np

    e = np.exp(a - a.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def compare(got: Any, want: Any) -> dict[str, float]:
    import numpy as np

    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    return {"softmax_max_abs_diff": float(np.abs(softmax(got) - softmax(want)).max()),
            "logits_max_rel_diff": float(np.abs(got - want).max() / max(np.abs(want).max(),
                                                                         1e-30))}


def ort_session(data: bytes, threads: int, spin: bool) -> Any:
    """An ONNX Runtime CPU session of model ``data`` as the bench runs it: ``threads`` intra-op
    threads (spinning between ops or not), all graph optimisations."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    opts.add_session_config_entry("session.intra_op.allow_spinning", "1" if spin else "0")
    return ort.InferenceSession(data, opts, providers=["CPUExecutionProvider"])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nets", default=",".join(NETS))
    ap.add_argument("--opsets", default=",".join(map(str, OPSETS)))
    ap.add_argument("--batches", default="1,8")
    ap.add_argument("--size", type=int, default=224, help="input height and width")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    add_turn_args(ap, block=2)
    ap.add_argument("--budget", type=float, default=40.0, help="seconds of timing per case")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--clock", choices=("wall", "thread"), default="wall",
                    help="thread: every peer on one thread (the calling one), timed by that "
                         "thread's CPU time, which time slices taken by other processes do "
                         "not inflate (a loaded machine still compares the kernels)")
    args = ap.parse_args(argv)
    if args.clock == "thread":
        args.threads = 1
    threads = args.threads or len(os.sched_getaffinity(0))
    limits = limit_threads(threads)
    import numpy as np
    import onnxruntime as ort
    import torch

    import rlx_core as rlx
    from benchmarks.cnn_nets import build, export

    torch_threads(torch, threads)
    if args.quick:
        args.size, args.batches, args.runs, args.warmup = 64, "1", 3, 1
    nets = args.nets.split(",")
    opsets = [int(o) for o in args.opsets.split(",")]
    batches = [int(b) for b in args.batches.split(",")]

    results: list[dict[str, Any]] = []
    say(f"{machine()['cpu']} ({isa()}), {threads} thread(s) per peer, input {args.size}x"
        f"{args.size}; {placement_line()}")
    for name in nets:
        net = build(name)
        rng = np.random.default_rng(0)
        for batch in batches:
            x = rng.standard_normal((batch, 3, args.size, args.size)).astype(np.float32)
            checks: dict[int, dict[str, float]] = {}
            exe = sessions = None
            compile_s = 0.0
            # every opset at the first batch; later batches only at the last opset (the
            # imported graphs are the same, only the input shape differs)
            for opset in opsets if batch == batches[0] else opsets[-1:]:
                data = export(net, torch.from_numpy(x), opset)
                graph = rlx.from_onnx(data)
                t0 = time.perf_counter()
                exe = rlx.compile(graph, x, target="cpu", record=False)
                compile_s = time.perf_counter() - t0
                sessions = {"onnxruntime": ort_session(data, threads, True),
                            "onnxruntime-nospin": ort_session(data, threads, False)}
                want = sessions["onnxruntime"].run(None, {"x": x})[0]
                checks[opset] = compare(exe(x), want)
                checks[opset]["import_path"] = graph.origin.get("path", "")  # type: ignore
                say(f"  {name} b{batch} opset {opset}: compiled in {compile_s:.1f} s, "
                    f"softmax diff {checks[opset]['softmax_max_abs_diff']:.1e}")
            bad = {o: c for o, c in checks.items() if not c["softmax_max_abs_diff"] <= TOLERANCE}
            assert exe is not None and sessions is not None
            tx = torch.from_numpy(x)

            def run_torch(tx: Any = tx, net: Any = net) -> Any:
                with torch.inference_mode():
                    return net(tx)

            peers: dict[str, Any] = {
                "rlx": lambda exe=exe, x=x: exe(x),
                **{k: (lambda s=s, x=x: s.run(None, {"x": x})[0]) for k, s in sessions.items()},
                "torch": run_torch,
            }
            cpu: dict[str, Any] = {}
            stats = interleaved(peers, args.runs, args.warmup, budget_s=args.budget,
                                block=args.block, settle_s=args.settle, thread_cpu=cpu)
            stats = cpu if args.clock == "thread" else stats
            p50 = {n: s.p50 for n, s in stats.items()}
            ort_best = min(sessions, key=lambda k: p50[k])
            row = {"net": name, "batch": batch, "size": args.size, "opsets_checked": checks,
                   "over_tolerance": bad, "rlx_compile_s": round(compile_s, 1),
                   "stats_s": stats, "onnxruntime_variant": ort_best,
                   "rlx_vs_onnxruntime": round(p50[ort_best] / p50["rlx"], 3),
                   "rlx_vs_torch": round(p50["torch"] / p50["rlx"], 3)}
            results.append(row)
            say(f"{name} batch {batch}: rlx {p50['rlx'] * 1e3:.1f} ms  onnxruntime "
                f"{p50[ort_best] * 1e3:.1f} ms  torch {p50['torch'] * 1e3:.1f} ms  | rlx vs "
                f"ORT {row['rlx_vs_onnxruntime']:.2f}x, vs torch {row['rlx_vs_torch']:.2f}x"
                + (f"  | OVER TOLERANCE {bad}" if bad else ""))

    mach = end_of_run(machine())
    mach["isa"] = isa()
    data = {"benchmark": "cnn", "machine": mach, "threads": limits, "clock": args.clock,
            "runs": args.runs,
            "warmup": args.warmup, "size": args.size,
            "versions": {"torch": torch.__version__, "onnxruntime": ort.__version__,
                         "numpy": np.__version__}, "results": results}
    headers = ["network", "batch", "rlx ms", "onnxruntime ms", "torch ms", "rlx vs ORT",
               "rlx vs torch", "max softmax diff (opsets)"]
    rows = []
    for r in results:
        s = r["stats_s"]
        diffs = ", ".join(f"{o}: {c['softmax_max_abs_diff']:.0e}"
                          for o, c in r["opsets_checked"].items())
        rows.append([r["net"], r["batch"], f"{s['rlx'].p50 * 1e3:.1f}",
                     f"{s[r['onnxruntime_variant']].p50 * 1e3:.1f}",
                     f"{s['torch'].p50 * 1e3:.1f}", f"{r['rlx_vs_onnxruntime']:.2f}x",
                     f"{r['rlx_vs_torch']:.2f}x", diffs])
    md = (f"# CNNs from ONNX, {args.size}x{args.size} input\n\n{mach['cpu']} (ISA: {mach['isa']})"
          f", {threads} thread(s) per peer, load average {mach['load_average_1m']} at the end, "
          f"{placement_text(mach)}, "
          + ("CPU time of the calling thread, " if args.clock == "thread" else "wall time, ")
          + f"p50 of up to {args.runs} calls ({turns_text(args.block, args.settle)}) after "
          f"{args.warmup} warm-up calls (`python benchmarks/bench_cnn.py "
          f"{' '.join(argv if argv is not None else sys.argv[1:])}`). Outputs checked against "
          f"ONNX Runtime at opsets {', '.join(map(str, opsets))}; timed on opset "
          f"{opsets[-1]}.\n\n" + markdown_table(headers, rows))
    if not (args.quick or args.no_write):
        stem = result_stem(f"cnn-{cpu_slug(mach['cpu'])}", args.threads, args.settle)
        if args.clock == "thread":
            stem += "-threadcpu"
        js, mdp = write_results(stem, data, md + "\n" + kept_notes(RESULTS / f"{stem}.md"))
        say(f"wrote {js} and {mdp}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
