"""The viewer's assets: the ESM (its parts joined in name order — the whole 'build step') and
the vendored Graphviz WASM module (static/viz/viz.js, @viz-js/viz; see static/viz/LICENSE.txt)."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

STATIC = Path(__file__).resolve().parent / "static"


@lru_cache(maxsize=1)
def viewer_esm() -> str:
    """One ES module exporting ``default {render}``: the parts share one module scope."""
    parts = sorted((STATIC / "parts").glob("*.js"))
    return "\n".join(p.read_text(encoding="utf-8") for p in parts)


@lru_cache(maxsize=1)
def viz_source() -> str:
    """The single-file Graphviz WASM build (an ES module exporting ``instance()``)."""
    return (STATIC / "viz" / "viz.js").read_text(encoding="utf-8")
