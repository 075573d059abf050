"""Each target's own LIR and generated source for the side-by-side views, without its device.

A target the session compiled gives its real kernels. Any other registered target lowers the
model itself (``rlx.lower``: its own legalization, fusion and plan) and renders it with its
``render_sources`` (every renderer can: GPU dialects, C, StableHLO, Hexagon C, Cortex-M C,
Verilog), so CUDA, HIP, MSL and the rest are shown on a machine with no such device. A target
that cannot take the model says why (its typed error), and a strict check's problem lines
(cortex-m and fpga: int8 only) feed the "what would it take" summary.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import rlx_core as rlx
from rlx_core.errors import RlxError
from rlx_core.ir.graph import Graph
from rlx_core.runtime.executable import Executable
from rlx_core.targets.registry import get_target


def _first_line(err: RlxError) -> str:
    return f"[{err.code}] {err.message.splitlines()[0]}"


def emit_target(fn: Callable[..., Any] | Graph, args: tuple[Any, ...], target: str,
                policy: str | None, exe: Executable | None) -> dict[str, Any]:
    """{"lir", "sources", "how", "error", "problems"} for one target."""
    if exe is not None:
        how = "compiled here" if exe.sources else "interpreted (the LIR is what runs)"
        return {"lir": exe.lir, "sources": dict(exe.sources), "how": how, "error": "",
                "problems": []}
    try:
        tgt = get_target(target)
        _, _, lir, _ = rlx.lower(fn, *args, target=target, policy=policy, record=False)
        render = getattr(tgt, "render_sources", None)
        srcs = dict(render(lir)) if callable(render) else {}
    except RlxError as err:
        return {"lir": None, "sources": {}, "how": "", "error": _first_line(err),
                "problems": list(getattr(err, "lines", []) or [])}
    except (ImportError, OSError) as err:  # a renderer's optional dependency or tool probe
        # (under Pyodide: no numpy, no subprocess): this column says so, the others stand
        return {"lir": None, "sources": {}, "how": "", "problems": [],
                "error": f"cannot render here: {type(err).__name__}: {err}"}
    how = "rendered without the device" if srcs else "interpreted (the LIR is what runs)"
    return {"lir": lir, "sources": srcs, "how": how, "error": "", "problems": []}


def emit_all(fn: Callable[..., Any] | Graph, args: tuple[Any, ...], targets: Sequence[str],
             policy: str | None, compiled: dict[str, Executable],
             progress: Callable[[str], None] | None = None) -> dict[str, dict[str, Any]]:
    """``emit_target`` for every name in ``targets`` (progress told per target)."""
    out = {}
    for i, t in enumerate(targets):
        if progress is not None and t not in compiled:
            progress(f"rendering {t}'s source without its device ({i + 1}/{len(targets)})")
        out[t] = emit_target(fn, args, t, policy, compiled.get(t))
    return out
