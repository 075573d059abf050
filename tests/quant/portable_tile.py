"""Run int8 GEMM checks on the portable C tile (RLX_IGEMM_ISA=c) in a child process: the
kernels read the variable once per loaded program, and the test process has loaded the same
programs with the CPU's own tile."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def assert_passes_on_portable_tile(code: str) -> None:
    """Run ``code`` (Python that raises on a mismatch) under RLX_IGEMM_ISA=c from the repo root
    and assert it finished."""
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "RLX_IGEMM_ISA": "c",
           "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")])}
    res = subprocess.run([sys.executable, "-c", f"{code}; print('ok')"], cwd=root, env=env,
                         capture_output=True, text=True, timeout=600)
    assert res.returncode == 0 and "ok" in res.stdout, res.stderr[-3000:]
