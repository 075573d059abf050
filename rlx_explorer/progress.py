"""Progress of long explorer work (a compile per target, the layouts, the profile), shown
where the user is looking: one line per stage on stderr in a terminal, one status line that
updates in place (and is cleared at the end) in a notebook."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any

Report = Callable[[str], None]


def terminal() -> Report:
    """Stages on stderr with the time since the start (stdout stays the command's output)."""
    t0 = time.perf_counter()

    def report(stage: str) -> None:
        print(f"  [{time.perf_counter() - t0:5.1f} s] {stage}", file=sys.stderr, flush=True)
    return report


class NotebookStatus:
    """One output line under the cell, updated per stage; ``close()`` removes it."""

    def __init__(self) -> None:
        from IPython.display import display

        self._t0 = time.perf_counter()
        self._handle: Any = display(self._html("starting"), display_id=True)

    def _html(self, stage: str) -> Any:
        import html

        from IPython.display import HTML
        return HTML(f"<div style='font:12px monospace;color:#64748b'>rlx: {html.escape(stage)} "
                    f"({time.perf_counter() - self._t0:.1f} s)</div>")

    def __call__(self, stage: str) -> None:
        if self._handle is not None:
            self._handle.update(self._html(stage))

    def close(self) -> None:
        if self._handle is not None:
            from IPython.display import HTML

            self._handle.update(HTML(""))
            self._handle = None
