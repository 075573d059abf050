"""Profile and specialization-cache view models: per-kernel time from a run, and the guards,
hits, misses and failing guard of each miss of a jitted function."""

from __future__ import annotations

from typing import Any


def profile_view(profile: dict[str, Any], lir_view: dict[str, Any] | None) -> dict[str, Any]:
    """Kernels sorted by time, each with its share of the kernel total and its LIR box id."""
    kid = {k["name"]: k for k in (lir_view or {}).get("kernels", [])}
    rows = [dict(k) for k in profile.get("kernels", [])]
    total = sum(float(r["seconds"]) for r in rows)
    for r in rows:
        k = kid.get(r["name"])
        r["id"] = k["id"] if k else ""
        r["kind"] = k["kind"] if k else ""
        r["share"] = float(r["seconds"]) / total if total > 0 else 0.0
    rows.sort(key=lambda r: -float(r["seconds"]))
    return {"present": bool(profile), "target": profile.get("target", ""),
            "method": profile.get("method", ""), "runs": profile.get("runs", 0),
            "total_seconds": float(profile.get("total_seconds", 0.0)),
            "kernel_seconds": total, "kernels": rows}


def _guard_text(guard: Any) -> list[str]:
    """One line per argument: ``arg i: dtype[shape]`` (guards are ((shape, dtype), ...))."""
    out = []
    try:
        for i, (shape, dtype) in enumerate(guard):
            out.append(f"arg {i}: {dtype}[{','.join(str(d) for d in shape)}]")
    except (TypeError, ValueError):
        out.append(str(guard))
    return out


def cache_view(jit: Any | None, recorded: dict[str, Any] | None = None) -> dict[str, Any]:
    """From a JitFunction (``specializations``, ``events``, ``hits``, ``misses``) or, when none
    is given, from what the compile recorded in ``CompileTrace.cache``."""
    if jit is None:
        rec = dict(recorded or {})
        return {"present": bool(rec), "function": rec.get("function", ""),
                "specializations": rec.get("specializations", []),
                "events": rec.get("events", []), "hits": int(rec.get("hits", 0)),
                "misses": int(rec.get("misses", 0)), "raw": rec}
    specs = []
    for i, spec in enumerate(getattr(jit, "specializations", [])):
        guard, exe = (spec[0], spec[1]) if isinstance(spec, tuple) else (
            getattr(spec, "guard", spec), getattr(spec, "executable", None))
        specs.append({"index": i, "guards": _guard_text(guard),
                      "target": getattr(exe, "target", getattr(jit, "target", "")),
                      "kernels": len(getattr(getattr(exe, "lir", None), "kernels", ()))})
    events = [{"hit": bool(e.hit), "specialization": int(e.specialization),
               "failed_guard": str(getattr(e, "failed_guard", ""))}
              for e in getattr(jit, "events", [])]
    name = getattr(getattr(jit, "fn", None), "__name__", "") or getattr(jit, "__name__", "")
    return {"present": True, "function": name, "specializations": specs, "events": events,
            "hits": int(getattr(jit, "hits", sum(e["hit"] for e in events))),
            "misses": int(getattr(jit, "misses", sum(not e["hit"] for e in events))), "raw": {}}
