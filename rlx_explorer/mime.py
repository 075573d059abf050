"""The explorer as a notebook output that survives saving: ``application/vnd.rlx.trace+json``.

The JupyterLab extension (extension/src/mime.ts) renders this MIME type with the same ESM viewer
as the widget, from the saved bundle alone, so a notebook opened later, without a kernel (or on
GitHub-like viewers that fall back to text/plain), still shows the explorer.

    from rlx_explorer.mime import trace_output
    trace_output(explore(model, x, targets=["numpy", "webgpu"]))   # last line of a cell
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

MIME_TYPE = "application/vnd.rlx.trace+json"


def mimebundle(bundle: dict[str, Any]) -> dict[str, Any]:
    """The output's data: the bundle itself, and a text line for frontends without the extension."""
    title = str(bundle.get("title", ""))
    targets = ", ".join(str(t.get("name")) for t in bundle.get("targets", ()))
    text = (f"RLX Explorer · {title} ({targets}) — shown by the rlx-explorer JupyterLab "
            "extension")
    return {MIME_TYPE: bundle, "text/plain": text}


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
