"""IR text view model: the printed level, highlighted, each line linked to its graph node."""

from __future__ import annotations

import re
from typing import Any

from rlx_explorer.views.highlight import highlight_ir

_DEF = re.compile(r"^\s*(?:input |param )?%([A-Za-z0-9_.]+) :")
_KERNEL = re.compile(r"^\s*kernel @([A-Za-z0-9_.]+) ")


def ir_text_view(text: str, graph: dict[str, Any] | None) -> dict[str, Any]:
    """``lines``: tokens plus the id of the node (or kernel) the line defines, if any."""
    ids = {n["name"]: n["id"] for n in (graph or {}).get("nodes", [])}
    kernels = {k["name"]: k["id"] for k in (graph or {}).get("kernels", [])}
    lines = []
    for raw, tokens in zip(text.splitlines(), highlight_ir(text), strict=False):
        node = ""
        m = _DEF.match(raw)
        if m:
            node = ids.get(m.group(1), "")
        else:
            k = _KERNEL.match(raw)
            if k:
                node = kernels.get(k.group(1), "")
        lines.append({"tokens": tokens, "node": node})
    return {"level": (graph or {}).get("level", ""), "lines": lines}
