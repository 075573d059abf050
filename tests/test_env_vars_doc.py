"""Every RLX_* environment variable that rlx_core or rlx_explorer reads is named in docs/.

The cpu target's own settings have a table of their own (tests/targets/test_cpu_settings_doc.py
checks it row by row); this catches the rest: a tool override (RLX_VERILATOR was read by the
fpga target and named nowhere in docs/), a runtime or explorer switch.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# os.environ.get("RLX_X"), os.environ["RLX_X"], getenv("RLX_X"), cpu/env.py's
# env_count/env_choice/env_flag("RLX_X", ...), and a tool's override: find_tool(name, "RLX_X")
_READ = re.compile(r'(?:environ\.get\(|environ\[|getenv\(|env_(?:count|choice|flag)\(\s*'
                   r'|find_tool\(\s*"[^"]*",\s*)"(RLX_[A-Z0-9_]+)"')


def _read_by_the_code() -> set[str]:
    names: set[str] = set()
    for package in ("rlx_core", "rlx_explorer"):
        for path in sorted((ROOT / package).rglob("*.py")):
            names.update(_READ.findall(path.read_text(encoding="utf-8")))
    return names


def _named_in_the_docs() -> set[str]:
    text = "\n".join(p.read_text(encoding="utf-8") for p in sorted((ROOT / "docs").glob("*.md")))
    return set(re.findall(r"\bRLX_[A-Z0-9_]+\b", text))


def test_every_variable_the_code_reads_is_named_in_docs() -> None:
    code = _read_by_the_code()
    # the scan works: a cpu setting, a tool override, the fpga's find_tool form
    assert {"RLX_CPU_ISA", "RLX_HEXAGON_CC", "RLX_VERILATOR"} <= code
    missing = code - _named_in_the_docs()
    assert missing == set(), f"read by the code, named nowhere in docs/: {sorted(missing)}"
