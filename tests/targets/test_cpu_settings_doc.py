"""docs/targets.md's *cpu target settings* table names every environment variable the cpu
target reads (rlx_core/targets/cpu/, the C renderer it shares, c_common/, and the build cache
convention it shares with the other targets, targets/build_cache.py): a setting added to the
code without a row fails here, and so does a row whose setting the code no longer reads, or
one whose *read* column (when the setting is read) says something its preamble does not
define."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# os.environ.get("RLX_X", ...), os.environ["RLX_X"], getenv("RLX_X") in the C sources,
# env_count, env_choice and env_flag("RLX_X", ...) (cpu/env.py)
_READ = re.compile(r'(?:environ\.get\(|environ\[|getenv\(|env_(?:count|choice|flag)\(\s*)"(RLX_[A-Z0-9_]+)"')


def _read_by_the_code() -> set[str]:
    targets = ROOT / "rlx_core" / "targets"
    paths = [*(p for folder in ("cpu", "c_common") for p in sorted((targets / folder).glob("*.py"))),
             targets / "build_cache.py"]
    return {name for path in paths for name in _READ.findall(path.read_text(encoding="utf-8"))}


def _section() -> str:
    text = (ROOT / "docs" / "targets.md").read_text(encoding="utf-8")
    return text.split("## cpu target settings", 1)[1].split("\n## ", 1)[0]


def _rows_of_the_table() -> set[str]:
    return set(re.findall(r"^\| `(RLX_[A-Z0-9_]+)` \|", _section(), flags=re.M))


def test_every_cpu_setting_has_a_row_and_every_row_a_setting() -> None:
    code, table = _read_by_the_code(), _rows_of_the_table()
    assert {"RLX_CPU_ISA", "RLX_GV_PF", "RLX_WAIT_PREFETCH", "RLX_NO_AMX"} <= code  # the scan works
    assert code - table == set(), f"read by the cpu target, missing from docs/targets.md: {code - table}"
    assert table - code == set(), f"in docs/targets.md, read nowhere: {table - code}"


def test_every_row_is_read_when_the_preamble_says() -> None:
    """The preamble defines each value of the *read* column ("*build*: when a program is
    rendered ..."); a row saying anything else (``process`` before its definition was added,
    ``at import``) fails here."""
    preamble, table = _section().split("\n| variable |", 1)
    defined = {d.lower() for d in re.findall(r"\*([A-Za-z][a-z ]*)\*: ",
                                             " ".join(preamble.split()))}
    assert {"build", "run"} <= defined  # the preamble's form is the one parsed
    reads = dict(re.findall(r"^\| `(RLX_[A-Z0-9_]+)` \| ([^|]*?) \|", table, flags=re.M))
    assert len(reads) == len(_rows_of_the_table())
    undefined = {name: read for name, read in reads.items() if read not in defined}
    assert undefined == {}, f"read values the preamble does not define: {undefined}"
