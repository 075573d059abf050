"""docs/targets.md's GPU dialect table states each dialect file's length; keep it true.

The table is there to show how little a GPU language costs once the shared renderer exists, so a
stale count misleads (it said 96 lines for a wgsl.py of over 150). Every count in the table, the
main file's and each "(+ `file`, N" beside it, must equal the file's line count.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ROW = re.compile(r"^\| [^|]+ \| `(targets/[^`]+\.py)`(.*)\| (\d+) \|$")
EXTRA = re.compile(r"\(\+ `(targets/[^`]+\.py)`, (\d+)")


def _lines(rel: str) -> int:
    return len((ROOT / "rlx_core" / rel).read_text().splitlines())


def _claims() -> list[tuple[str, int]]:
    text = (ROOT / "docs" / "targets.md").read_text()
    head = text.index("| dialect | file | lines |")
    claims = []
    for line in text[head:].splitlines()[2:]:
        row = ROW.match(line)
        if row is None:
            break
        claims.append((row.group(1), int(row.group(3))))
        claims += [(path, int(n)) for path, n in EXTRA.findall(row.group(2))]
    return claims


def test_table_lists_every_dialect_row():
    files = [path for path, _ in _claims()]
    assert "targets/webgpu/wgsl.py" in files and "targets/metal/dialect.py" in files
    assert len(files) >= 8  # six rows, two of them with a second file


def test_line_counts_are_the_files():
    wrong = [(path, said, _lines(path)) for path, said in _claims() if said != _lines(path)]
    assert not wrong, f"docs/targets.md dialect table: (file, stated, actual) {wrong}"
