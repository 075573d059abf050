"""IR text view model: the printed level, highlighted, each line linked to its graph node."""

from __future__ import annotations

import re
from typing import Any

from rlx_explorer.views.highlight import highlight_ir

_DEF = re.compile(r"^\s*(?:input |param )?%([A-Za-z0-9_.]+) :")
_LOC = re.compile(r"\s+loc\(.*\)\s*$")
# the file IPython compiles a notebook cell under: /tmp/ipykernel_<pid>/<hash>.py
_CELL_FILE = re.compile(r'"([^"]*ipykernel_\d+[/\\]\d+\.py)"')
_KERNEL = re.compile(r"^\s*kernel @([A-Za-z0-9_.]+) ")


def cell_label(path: str) -> str:
    """``cell [n]`` for the file of notebook cell n (IPython's compiler knows the number),
    ``cell`` when the kernel that ran it is gone; ``path`` itself for ordinary files."""
    if not _CELL_FILE.fullmatch(f'"{path}"'):
        return path
    try:
        from IPython import get_ipython

        shell = get_ipython()
        n = shell.compile._filename_map.get(path) if shell is not None else None
    except (ImportError, AttributeError):
        n = None
    return f"cell [{n}]" if n is not None else "cell"


def short_loc(loc: str) -> str:
    """``loc("/tmp/ipykernel_1/2.py":5 ...)`` -> ``loc("cell [3]":5 ...)``."""
    return _CELL_FILE.sub(lambda m: f'"{cell_label(m.group(1))}"', loc)


def ir_text_view(text: str, graph: dict[str, Any] | None) -> dict[str, Any]:
    """``lines``: tokens plus the id of the node (or kernel) the line defines, if any, and the
    line's source location apart (``loc``, notebook cells shortened to ``cell [n]``), so the
    viewer can show or hide locations."""
    ids = {n["name"]: n["id"] for n in (graph or {}).get("nodes", [])}
    kernels = {k["name"]: k["id"] for k in (graph or {}).get("kernels", [])}
    bare, locs = [], []
    for raw in text.splitlines():
        m = _LOC.search(raw)
        bare.append(raw[:m.start()] if m else raw)
        locs.append(short_loc(m.group(0).strip()) if m else "")
    lines = []
    for raw, tokens, loc in zip(bare, highlight_ir("\n".join(bare)), locs, strict=False):
        node = ""
        m = _DEF.match(raw)
        if m:
            node = ids.get(m.group(1), "")
        else:
            k = _KERNEL.match(raw)
            if k:
                node = kernels.get(k.group(1), "")
        lines.append({"tokens": tokens, "node": node, "loc": loc})
    return {"level": (graph or {}).get("level", ""), "lines": lines}
