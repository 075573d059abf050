"""The two sides of a per-kernel profile, shared by profile_cnn, profile_minilm and
profile_quant_minilm: each rlx kernel's and each ONNX Runtime node's fastest call over a few
runs (the fastest leaves most of a loaded machine's preemptions out), and the results file."""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any


def rlx_kernel_times(exe: Any, args: tuple[Any, ...], runs: int,
                     ) -> tuple[dict[str, float], dict[str, str]]:
    """Per kernel of ``exe`` (a cpu program compiled with ``RLX_CPU_PROFILE=thread``): the
    seconds of its fastest call over ``runs`` calls after one warm-up call, and its
    implementation label."""
    exe(*args)
    prof = exe.program.info["profile"]
    best: dict[str, float] = {}
    impl: dict[str, str] = {}
    for _ in range(runs):
        before = prof()
        exe(*args)
        for k, v in prof().items():
            best[k] = min(best.get(k, 1e9), v["seconds"] - before[k]["seconds"])
            impl[k] = v["impl"]
    return best, impl


def ort_profiled_session(model: str | bytes, threads: int = 1) -> Any:
    """An ONNX Runtime CPU session of ``model`` with its per-node profile on (all graph
    optimisations, ``threads`` intra-op threads: with 1 the nodes run on the calling thread)."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    opts.enable_profiling = True
    opts.profile_file_prefix = str(Path(tempfile.mkdtemp()) / "ort")
    return ort.InferenceSession(model, opts, providers=["CPUExecutionProvider"])


def ort_fastest_nodes(sess: Any, calls: int, skip: int,
                      ) -> dict[str, tuple[str, float, dict[str, Any]]]:
    """End ``sess``'s profile (``calls`` runs in it) and keep each node's fastest call of all
    but the first ``skip`` runs: name -> (op type, ms, the profile event's args), in execution
    order."""
    events = json.loads(Path(sess.end_profiling()).read_text())
    nodes = [e for e in events if e.get("cat") == "Node" and e["name"].endswith("_kernel_time")]
    per: dict[str, tuple[str, float, dict[str, Any]]] = {}
    for e in nodes[len(nodes) // calls * skip:]:
        args = e.get("args", {})
        name, ms = e["name"][:-len("_kernel_time")], float(e["dur"]) / 1e3
        if name not in per or ms < per[name][1]:
            per[name] = (args.get("op_name", "?"), ms, args)
    return per


def ort_node_times(model: str | bytes, feeds: dict[str, Any], runs: int, threads: int = 1,
                   ) -> dict[str, tuple[str, float, dict[str, Any]]]:
    """ONNX Runtime's nodes in execution order (its own profile, all graph optimisations on):
    name -> (op type, ms of its fastest call after the first run, the profile event's args)."""
    sess = ort_profiled_session(model, threads)
    for _ in range(runs + 1):
        sess.run(None, feeds)
    return ort_fastest_nodes(sess, runs + 1, 1)


def side_by_side_times(exe: Any, args: tuple[Any, ...], sess: Any, feeds: dict[str, Any],
                       runs: int, warmup: int = 2) -> dict[str, Any]:
    """rlx's kernels and ONNX Runtime's nodes timed in one process, their calls alternating
    (which side goes first swaps each round, so load that drifts reaches both alike).

    ``exe``: a cpu program compiled with a per-kernel profile (``RLX_CPU_PROFILE``), ``sess``
    an ``ort_profiled_session``. Returns ``rlx`` (kernel -> seconds of its fastest call),
    ``impl`` (kernel -> implementation label), ``ort`` (``ort_fastest_nodes``) and
    ``calls`` (side -> each timed call's wall seconds, profiled)."""
    import time

    for _ in range(warmup):
        exe(*args)
        sess.run(None, feeds)
    prof = exe.program.info["profile"]
    best: dict[str, float] = {}
    impl: dict[str, str] = {}
    calls: dict[str, list[float]] = {"rlx": [], "onnxruntime": []}

    def rlx_call() -> None:
        before = prof()
        t0 = time.perf_counter()
        exe(*args)
        calls["rlx"].append(time.perf_counter() - t0)
        for k, v in prof().items():
            best[k] = min(best.get(k, 1e9), v["seconds"] - before[k]["seconds"])
            impl[k] = v["impl"]

    def ort_call() -> None:
        t0 = time.perf_counter()
        sess.run(None, feeds)
        calls["onnxruntime"].append(time.perf_counter() - t0)

    for r in range(runs):
        for fn in ((rlx_call, ort_call) if r % 2 == 0 else (ort_call, rlx_call)):
            fn()
    return {"rlx": best, "impl": impl, "ort": ort_fastest_nodes(sess, runs + warmup, warmup),
            "calls": calls}


def event_shape(args: dict[str, Any], key: str = "output_type_shape") -> list[int]:
    """The first output's (or, with ``key="input_type_shape"``, input's) shape of a node's
    profile event."""
    v = args.get(key)
    return next(iter(v[0].values()), []) if v else []


THREAD_VS_WALL = "rlx: each kernel's thread CPU time, ONNX Runtime: each node's wall time"


def write_profile(script: str, stem: str, title: str, what: str, runs: int, text: str,
                  data: dict[str, Any], argv: list[str] | None,
                  clocks: str = THREAD_VS_WALL) -> None:
    """Write results/<stem>-<cpu>.md/.json: the printed ``text`` under a heading, with the CPU
    model, ISA, load, how each side was clocked and the command that made it."""
    from benchmarks.common import (
        end_of_run,
        isa,
        machine,
        machine_stem,
        placement_text,
        write_results,
    )

    mach = end_of_run(machine())
    mach["isa"] = isa()
    cmd = " ".join(argv if argv is not None else sys.argv[1:])
    md = (f"# Profile: {title}, rlx kernels vs ONNX Runtime nodes\n\n{mach['cpu']} (ISA: "
          f"{mach['isa']}), {what}, load average {mach['load_average_1m']} at the end, "
          f"{placement_text(mach)}; {clocks}, the fastest of {runs} calls "
          f"(`python benchmarks/{script}.py {cmd}`)\n\n```\n{text}```\n")
    data = {"benchmark": script, "machine": mach, **data}
    print("wrote", *write_results(machine_stem(stem), data, md))
