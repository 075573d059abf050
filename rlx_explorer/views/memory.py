"""Memory view model: the arena plan as a buffer-liveness timeline (kernels on the x axis,
arena offsets on the y axis) with peak bytes and what reuse saved."""

from __future__ import annotations

from typing import Any


def memory_view(plan: dict[str, Any], lir_view: dict[str, Any] | None) -> dict[str, Any]:
    """``plan``: CompileTrace.plan (peak_bytes, naive_bytes, alignment, slots)."""
    ids = {n["name"]: n["id"] for n in (lir_view or {}).get("nodes", [])}
    kernels = [k["name"] for k in (lir_view or {}).get("kernels", [])]
    slots = [{"value": s["value"], "id": ids.get(s["value"], ""), "offset": int(s["offset"]),
              "size": int(s["size"]), "first": int(s["first"]), "last": int(s["last"]),
              "alias": s.get("alias", "")}
             for s in plan.get("slots", [])]
    peak = int(plan.get("peak_bytes", 0))
    naive = int(plan.get("naive_bytes", 0))
    # bytes live at each kernel step: the curve under the timeline
    steps = max([len(kernels)] + [s["last"] + 1 for s in slots])
    # an alias (a reshape sharing its input's bytes) adds no bytes: its root's span covers it
    live = [sum(s["size"] for s in slots if s["first"] <= i <= s["last"] and not s["alias"])
            for i in range(steps)]
    return {"peak_bytes": peak, "naive_bytes": naive, "alignment": int(plan.get("alignment", 0)),
            "saved_bytes": max(0, naive - peak), "kernels": kernels, "slots": slots,
            "live_bytes": live, "present": bool(plan)}
