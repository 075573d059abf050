"""Run int8 GEMM checks on one kernel path (RLX_IGEMM_ISA: the portable C tile, AVX2, AVX-VNNI,
AVX512-VNNI, AMX) in a child process: the kernels read the variable once per loaded program,
and the test process has loaded the same programs with the CPU's own path."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def assert_passes_on_portable_tile(code: str) -> None:
    """Run ``code`` (Python that raises on a mismatch) under RLX_IGEMM_ISA=c from the repo root
    and assert it finished."""
    assert_passes_on_path(code, "c")


def assert_passes_on_path(code: str, path: str) -> None:
    """Run ``code`` in a child process whose int8 kernels are capped at ``path``
    (RLX_IGEMM_ISA: c, avx2, avxvnni, avx512vnni, amx) and assert it finished, after the
    child confirmed that ``path`` is the one its kernels pick."""
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "RLX_IGEMM_ISA": path,
           "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")])}
    check = f"from rlx_core.targets.cpu.igemm import isa_here; assert isa_here() == {path!r}"
    res = subprocess.run([sys.executable, "-c", f"{check}; {code}; print('ok')"], cwd=root,
                         env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0 and "ok" in res.stdout, res.stderr[-3000:]
