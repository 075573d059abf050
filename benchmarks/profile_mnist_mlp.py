"""Where an MLP training step's time goes on the CPU target: each kernel's share of the step.

The step (forward, softmax cross-entropy, backward, SGD, one program: ``bench_mnist_mlp``'s
rlx peer) is timed two ways in one process, on the same batches:

- as the benchmark calls it (``CompiledStep`` with ``in_place=True``, the specialization
  cache's module): p50 ms;
- built again with per-kernel timers (``RLX_CPU_PROFILE``): each kernel's median time on
  thread 0 from its start until its last claimed chunk is done (the wait for the other
  thread included); the step's p50 less their sum is what it spends outside the kernels.
  A run of small row-wise kernels shared out by rows (cpu/row_split.py: in 784-128-10/128
  the output layer k1, the loss head k2-k9 and the input gradient k11) is one phase, timed as
  its first kernel; the others show 0.

    python benchmarks/profile_mnist_mlp.py                      # 784-128-10 at batch 128
    python benchmarks/profile_mnist_mlp.py --sizes 784,512,512,10 --batch 1024

The timed build ends every team kernel in a wait for all of its chunks, so its kernels add up
to a little more than the plain step; the team statistics (calls shrunk to one thread) say
whether the machine's other jobs got in the way. Writes results/profile-mnist_mlp-<sizes>-
<batch>-<cpu>.{md,json}.
"""

from __future__ import annotations

import argparse
import sys
import time
import types
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import (  # noqa: E402
    end_of_run,
    isa,
    machine,
    machine_stem,
    markdown_table,
    say,
    stamp,
    write_results,
)

BLOCK = 20  # consecutive calls of one form per turn


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="784,128,10")
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--runs", type=int, default=2000, help="timed calls, half of each form")
    ap.add_argument("--no-write", action="store_true", help="print only")
    args = ap.parse_args(argv)
    import numpy as np

    from benchmarks.bench_contention import team_stats
    from benchmarks.bench_mnist_mlp import LR, Batches, step_flops
    from benchmarks.peak import bench_peaks
    from rlx_core.data.mnist import load_mnist
    from rlx_core.models.mlp import init_mlp, mlp_loss
    from rlx_core.optim import SGD, compile_step
    from rlx_core.targets.cpu.threads import num_threads
    from rlx_core.targets.registry import get_target

    mach = machine()  # the load at the start
    mach["isa"] = isa()
    sizes = tuple(int(v) for v in args.sizes.split(","))
    x, y = load_mnist().flat("train")
    b = Batches(x, y, args.batch)
    step = compile_step(mlp_loss, SGD(LR), init_mlp(sizes, seed=0), b.x[0], b.y[0], target="cpu",
                        in_place=True)  # as bench_mnist_mlp: the SGD update over W in place
    exe = step.executable
    timed = get_target("cpu").build(exe.lir, types.SimpleNamespace(flags={"profile": True}))
    prof = timed.info["profile"]
    leaves = [*step._p_leaves, *step._s_leaves]  # the step's own leaves: same values, types

    def plain(i: int) -> None:
        step(b.x[i % b.count], b.y[i % b.count])

    def profiled(i: int) -> None:
        timed.run((*leaves, b.x[i % b.count], b.y[i % b.count]), exe.params)

    for i in range(50):
        plain(i)
        profiled(i)
    calls: list[float] = []
    call_p: list[float] = []
    per: dict[str, list[float]] = {}
    stats0 = team_stats({})
    for i in range(args.runs):  # the two forms in turns of BLOCK calls (one call each would
        # leave the other form's data in the caches), so both see the same machine
        if i // BLOCK % 2 == 0:
            t = time.perf_counter()
            plain(i)
            calls.append(time.perf_counter() - t)
            continue
        before = prof()
        t = time.perf_counter()
        profiled(i)
        call_p.append(time.perf_counter() - t)
        for k, v in prof().items():
            per.setdefault(k, []).append(v["seconds"] - before[k]["seconds"])
    stats = {k: v - stats0[k] for k, v in team_stats({}).items()}
    impl = {k: v["impl"] for k, v in prof().items()}
    med = {k: float(np.median(v)) * 1e6 for k, v in per.items()}
    step_us, timed_us = float(np.median(calls)) * 1e6, float(np.median(call_p)) * 1e6
    peaks = bench_peaks(num_threads())
    peak, run_peak = peaks.kept.gflops, peaks.now.gflops
    gflop = step_flops(sizes, args.batch) * 1e-9
    kernels = sum(med.values())
    ops = {k.name: ", ".join(dict.fromkeys(n.op for n in k.nodes)) for k in exe.lir.kernels}
    rows = [[k, impl[k], ops[k], f"{us:.1f}", f"{us / step_us:.0%}"]
            for k, us in sorted(med.items(), key=lambda kv: -kv[1])]
    rows.append(["(the step outside these: Python, arguments, outputs, team start and end)",
                 "", "", f"{step_us - kernels:.1f}", f"{(step_us - kernels) / step_us:.0%}"])
    label = f"{'-'.join(map(str, sizes))}/{args.batch}"
    text = (f"{label}, {num_threads()} thread(s): the step p50 {step_us:.1f} us "
            f"({args.batch / step_us * 1e6:,.0f} img/s, {gflop * 1e6 / step_us / peak:.0%} of the "
            f"stored {peak:.0f} GFLOP/s FMA peak, {gflop * 1e6 / step_us / run_peak:.0%} of this "
            f"run's {run_peak:.0f}: host at {peaks.host_fraction:.2f}); timed build p50 {timed_us:.1f} us, its kernels' "
            f"medians {kernels:.1f} us; team calls {stats['team_calls']}, shrunk "
            f"{stats['calls_shrunk']}\n")
    say(text + markdown_table(["kernel", "impl", "ops", "us (median)", "of the step"], rows))
    if not args.no_write:
        end_of_run(mach)
        cmd = " ".join(argv if argv is not None else sys.argv[1:])
        md = (f"# Profile: MLP training step {label}, rlx kernels\n\n{stamp(mach)}; each "
              f"kernel's median wall time on thread 0 over {args.runs // 2} calls of the timed "
              f"build, in turns of {BLOCK} with as many of the plain step "
              f"(`python benchmarks/profile_mnist_mlp.py {cmd}`)\n\n{text}\n"
              + markdown_table(["kernel", "impl", "ops", "us (median)", "of the step"], rows))
        data = {"benchmark": "profile_mnist_mlp", "machine": mach, "sizes": list(sizes),
                "batch": args.batch, "runs": args.runs, "step_us_p50": step_us,
                "timed_us_p50": timed_us, "kernel_us_median": med, "impl": impl,
                "team": stats, "fma_peak_gflops": peak,
                "peaks": peaks.to_json()}
        stem = machine_stem(f"profile-mnist_mlp-{'-'.join(map(str, sizes))}-b{args.batch}")
        say("wrote " + " ".join(str(p) for p in write_results(stem, data, md)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
