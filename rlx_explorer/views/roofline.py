"""Cost overlay per kernel: a roofline of this machine next to the measured kernel times.

Each LIR kernel's FLOPs (dispatch/decision.estimate: 2*M*N*K for contractions, one per element
otherwise) and bytes (its inputs read once and its outputs written once: what crosses memory
after fusion) give its arithmetic intensity. Against the CPU's measured ceilings
(targets/cpu/peaks.py: the FMA probe's GFLOP/s and the streaming read GB/s) the least time it
can take is max(FLOPs / peak, bytes / bandwidth), compute-bound above the ridge intensity and
memory-bound below it. Next to the profile's measured time, "of roofline" says how close the
kernel runs to that bound. A kernel is ``uncalibrated`` while either side is unknown: the
peaks were never measured on this CPU, the target does not run on the CPU the probes measure,
or the profile has no per-kernel time for it.
"""

from __future__ import annotations

from typing import Any

from rlx_core.dispatch.decision import estimate
from rlx_core.ir.graph import Graph

# targets whose kernels execute on this host's CPU cores (the probes' ceilings apply)
HOST_CPU_TARGETS: tuple[str, ...] = ("cpu", "numpy")


def kernel_cost(lir: Graph, kernel: Any) -> tuple[int, int]:
    """(FLOPs, bytes moved) of one fused kernel."""
    types = {name: v.type for name, v in lir.values().items()}
    flops = estimate(list(kernel.nodes), types).flops
    made = {n.name for n in kernel.nodes}
    reads = {i for n in kernel.nodes for i in n.inputs if i not in made and i in types}
    nbytes = sum(types[i].nbytes for i in reads) + sum(types[o].nbytes for o in kernel.outputs
                                                     if o in types)
    return flops, nbytes


def roofline_view(lir: Graph | None, lir_view: dict[str, Any] | None, target: str,
                  measured: dict[str, float], peaks: Any | None) -> dict[str, Any]:
    """Per kernel: flops, bytes, intensity, predicted and measured time, bound, status."""
    if lir is None:
        return {"present": False, "kernels": [], "peaks": None, "status": "no compiled kernels"}
    kid = {k["name"]: k["id"] for k in (lir_view or {}).get("kernels", [])}
    applies = target in HOST_CPU_TARGETS
    why = ("" if peaks is not None and applies else
           f"no peaks for {target}: the probes measure this host's CPU" if not applies else
           "the CPU peaks were never measured here: run `rlx peaks` (about 2 s) or "
           "explore(..., calibrate=True)")
    rows = []
    for k in lir.kernels:
        flops, nbytes = kernel_cost(lir, k)
        row: dict[str, Any] = {"name": k.name, "id": kid.get(k.name, ""), "kind": k.kind,
                               "flops": flops, "bytes": nbytes,
                               "intensity": flops / nbytes if nbytes else 0.0,
                               "predicted_s": None, "bound": "", "measured_s": None,
                               "of_roofline": None, "status": "uncalibrated", "why": why}
        if peaks is not None and applies:
            t_c, t_m = flops / (peaks.gflops * 1e9), nbytes / (peaks.gbps * 1e9)
            row["predicted_s"] = max(t_c, t_m)
            row["bound"] = "compute" if t_c >= t_m else "memory"
        sec = measured.get(k.name)
        if sec is not None and sec > 0:
            row["measured_s"] = sec
            row["achieved_gflops"] = flops / sec / 1e9
            if row["predicted_s"] is not None:
                row["of_roofline"] = row["predicted_s"] / sec
                row["status"], row["why"] = "calibrated", ""
                if row["achieved_gflops"] > 1.05 * peaks.gflops:  # faster than the FMA roof
                    row["status"], row["why"] = "uncalibrated", (
                        "this kernel beat the stored FMA peak, which was measured low (a "
                        "busy machine): run `rlx peaks` again when the machine is quiet")
        elif not row["why"]:
            row["why"] = "no per-kernel time measured for it"
        rows.append(row)
    return {"present": True, "target": target, "kernels": rows,
            "peaks": peaks.to_json() if peaks is not None else None,
            "status": "calibrated" if any(r["status"] == "calibrated" for r in rows)
            else "uncalibrated", "why": why}
