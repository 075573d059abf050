"""The extension's TypeScript unit tests (vitest: protocol checks, the executor on a fake GPU,
the MIME renderer on a fake viewer, the comm wiring), run from pytest so CI runs them too."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from tests.binder.harness import ROOT

EXT = ROOT / "extension"


def test_vitest_suite_passes() -> None:
    if shutil.which("npm") is None:
        pytest.skip("npm is not installed")
    if not (EXT / "node_modules" / "vitest").exists():
        done = subprocess.run(["npm", "ci", "--no-audit", "--no-fund", "--silent"], cwd=EXT,
                              capture_output=True, text=True, timeout=900)
        assert done.returncode == 0, done.stderr
    done = subprocess.run(["npx", "vitest", "run"], cwd=EXT, capture_output=True, text=True,
                          timeout=600)
    out = re.sub(r"\x1b\[[0-9;]*m", "", done.stdout + done.stderr)
    assert done.returncode == 0, out
    m = re.search(r"Tests\s+(\d+) passed", out)
    assert m and int(m.group(1)) >= 20, out
