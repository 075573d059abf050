"""User source view model: the files the IR's locations point at, line by line.

Locations are relative to the working directory or to the repository (how the tracer shortens
them); files that cannot be read (a notebook cell, a deleted file) are shown as missing rather
than failing the explorer. File contents are data and are escaped by the viewer.
"""

from __future__ import annotations

import linecache
from pathlib import Path
from typing import Any

from rlx_core.cli import REPO_ROOT
from rlx_explorer.views.ir_text import cell_label

MAX_FILE_LINES = 5000


class SourceIndex:
    """Reads each referenced file once; remembers which lines were referenced."""

    def __init__(self, extra: dict[str, str] | None = None):
        self._files: dict[str, list[str] | None] = {}
        self._extra = dict(extra or {})  # file label -> text (e.g. a notebook cell)
        self.referenced: dict[str, set[int]] = {}

    def _read(self, file: str) -> list[str] | None:
        if file in self._files:
            return self._files[file]
        lines: list[str] | None = None
        if file in self._extra:
            lines = self._extra[file].splitlines()
        elif linecache.getlines(file):  # notebook cells: IPython registers their text here
            lines = [ln.rstrip("\n") for ln in linecache.getlines(file)][:MAX_FILE_LINES]
        else:
            for cand in (Path(file), Path.cwd() / file, REPO_ROOT / file):
                try:
                    if cand.is_file():
                        lines = cand.read_text(errors="replace").splitlines()[:MAX_FILE_LINES]
                        break
                except OSError:
                    continue
        self._files[file] = lines
        return lines

    def line(self, file: str, line: int) -> str:
        """The text of ``file:line`` ('' when unknown); marks it as referenced."""
        if not file or line <= 0:
            return ""
        self.referenced.setdefault(file, set()).add(line)
        lines = self._read(file)
        return lines[line - 1] if lines is not None and line <= len(lines) else ""

    def find(self, file: str, pattern: str) -> int:
        """The first line of ``file`` matching the regex ``pattern`` (1-based; 0 when none)."""
        import re

        rx = re.compile(pattern)
        for i, text in enumerate(self._read(file) or (), start=1):
            if rx.search(text):
                return i
        return 0

    def label(self, file: str) -> str:
        """How ``file`` is shown: ``cell [n]`` for a notebook cell, else the file itself."""
        return cell_label(file)

    def to_json(self) -> dict[str, Any]:
        """Every referenced file with all its lines (the viewer scrolls to the selected one)."""
        files = []
        for file in sorted(self.referenced):
            lines = self._read(file)
            files.append({"file": file, "label": cell_label(file), "found": lines is not None,
                          "lines": lines or [], "referenced": sorted(self.referenced[file])})
        return {"files": files}
