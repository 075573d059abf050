"""Per-kernel timing of one executable, for the profile view.

A target whose program reports per-kernel times (``program.profile(inputs, params)`` returning
``{kernel: seconds}``, or ``program.info["profile"]``) is asked for them. The numpy reference
runs kernel by kernel in Python, so its kernels are timed here by the same loop the target
uses (its own ``eval_op`` semantics). The cpu target's kernels are timed by a profiling build
of the same LIR (its ``profile`` flag). Anything else gets an honest whole-call time only.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from rlx_core.errors import RlxError
from rlx_core.runtime.executable import Executable, _to_host


def _numpy_kernel_times(exe: Executable, args: Sequence[Any]) -> tuple[dict[str, float], list[Any]]:
    import numpy as np

    from rlx_core.targets.numpy_ref.executor import bind, eval_op, load, store

    g = exe.lir
    host = [_to_host(a, t) for a, t in zip(args, exe.input_types, strict=False)]
    env = bind(g, host, exe.params)
    types = {name: v.type for name, v in g.values().items()}
    plan = g.plan
    arena = np.zeros(plan.peak_bytes if plan is not None else 0, dtype=np.uint8)
    offsets = {s.value: s.offset for s in plan.slots} if plan is not None else {}
    owned: dict[str, Any] = {}

    def read(name: str) -> Any:
        if name in offsets:
            return load(arena, offsets[name], types[name])
        return owned[name] if name in owned else env[name]

    times: dict[str, float] = {}
    for k in g.kernels:
        start = time.perf_counter()
        local: dict[str, Any] = {}
        for n in k.nodes:
            local[n.name] = eval_op(n.op, n.a, [local[i] if i in local else read(i)
                                                for i in n.inputs], n.type)
        for o in k.outputs:
            if o in offsets:
                store(arena, offsets[o], local[o], types[o])
            else:
                owned[o] = np.array(local[o], copy=True)
        times[k.name] = time.perf_counter() - start
    return times, [np.array(read(o), copy=True) for o in g.outputs]


def _cpu_kernel_times(exe: Executable, args: Sequence[Any], repeats: int) -> dict[str, float]:
    """Per-kernel seconds of a profiling build of the same LIR (the cpu target's ``profile``
    flag: a timer around every kernel call; the program the user runs stays untimed)."""
    from rlx_core.passes.base import CompileOptions
    from rlx_core.targets.registry import get_target

    prog = exe.program if callable(exe.program.info.get("profile")) else \
        get_target("cpu").build(exe.lir, CompileOptions(target="cpu", flags={"profile": True}))
    host = [_to_host(a, t) for a, t in zip(args, exe.input_types, strict=False)]
    for _ in range(max(1, repeats) + 1):
        prog.run(host, exe.params)
    totals = prog.info["profile"]()
    return {k: v["seconds"] / v["calls"] for k, v in totals.items() if v.get("calls")}


def profile_executable(exe: Executable, args: Sequence[Any], repeats: int = 3) -> dict[str, Any]:
    """``{"target", "method", "runs", "total_seconds", "kernels": [{name, seconds}]}``; the
    per-kernel figure is the minimum over ``repeats`` runs (the least disturbed one)."""
    exe.check_args(args)
    start = time.perf_counter()
    exe(*args)
    whole = time.perf_counter() - start
    per: dict[str, list[float]] = {}
    method = "whole-call"
    program = exe.program
    for _ in range(max(1, repeats)):
        times: dict[str, float] | None = None
        if callable(getattr(program, "profile", None)):
            host = [_to_host(a, t) for a, t in zip(args, exe.input_types, strict=False)]
            times, method = dict(program.profile(host, exe.params)), "target-reported"
        elif isinstance(program.info.get("profile"), dict):
            times, method = dict(program.info["profile"]), "target-reported"
        elif exe.target == "cpu":
            try:
                per = {k: [sec] for k, sec in _cpu_kernel_times(exe, args, repeats).items()}
                method = "per kernel: a profiling build of the same LIR (a timer around each call)"
            except RlxError as err:  # the whole-call time stays honest
                method = f"whole-call (the profiling build failed: {err.code})"
            break
        elif exe.target == "numpy":
            times, _ = _numpy_kernel_times(exe, args)
            method = "kernel-by-kernel (numpy reference loop)"
        if times is None:
            break
        for name, sec in times.items():
            per.setdefault(name, []).append(float(sec))
    kernels = [{"name": name, "seconds": min(v)} for name, v in per.items()]
    return {"target": exe.target, "method": method, "runs": max(1, repeats),
            "total_seconds": whole, "kernels": kernels}
