"""The explorer as a notebook output that survives saving: ``application/vnd.rlx.trace+json``.

The JupyterLab extension (extension/src/mime.ts) renders this MIME type with the same ESM viewer
as the widget, from the saved bundle alone, so a notebook opened later, without a kernel (or on
viewers without the extension, through the ``text/html`` fallback), still shows the explorer.

    from rlx_explorer.mime import trace_output
    trace_output(explore(model, x, targets=["numpy", "webgpu"]))   # last line of a cell
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

MIME_TYPE = "application/vnd.rlx.trace+json"


def plain_text(bundle: dict[str, Any]) -> str:
    """One line naming the explorer: what a text-only frontend shows."""
    title = str(bundle.get("title", ""))
    targets = ", ".join(f"{t.get('name')}{'' if t.get('compiled') else ' ✗'}"
                        for t in bundle.get("targets", ()))
    fails = sum(int(f.get("count", 0)) for f in bundle.get("failures", ()))
    return (f"RLX Explorer · {title} ({targets})"
            + (f" · {fails} legalization failures" if fails else ""))


def mimebundle(bundle: dict[str, Any]) -> dict[str, Any]:
    """The output's data: the bundle itself (the extension renders it), a self-contained HTML
    fallback (rlx_explorer/fallback.py) and a text line."""
    from rlx_explorer.fallback import fallback_html

    return {MIME_TYPE: bundle, "text/html": fallback_html(bundle),
            "text/plain": plain_text(bundle)}


@dataclass(frozen=True)
class TraceOutput:
    """A displayable explorer bundle (what ``trace_output`` returns)."""

    bundle: dict[str, Any]

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        return mimebundle(self.bundle)


def trace_output(explorer_or_bundle: Any) -> TraceOutput:
    """Wrap an ``Explorer`` (from ``explore``) or a bundle dict for display."""
    bundle = getattr(explorer_or_bundle, "bundle", explorer_or_bundle)
    if not isinstance(bundle, dict) or "schema" not in bundle:
        from rlx_core.errors import RlxError

        raise RlxError(f"trace_output takes an Explorer or its bundle, got "
                       f"{type(explorer_or_bundle).__name__}",
                       hint="pass explore(fn, *args) or explorer.bundle")
    return TraceOutput(bundle)
