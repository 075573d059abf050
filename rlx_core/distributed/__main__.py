"""``mpiexec -n N python -m rlx_core.distributed FILE [ARGS]``: run FILE on every rank.

FILE runs as ``__main__`` with ``rlx.distributed.init()`` already done. When it raises, the
rank prints the error, tells the other ranks (they stop with RLX-N009 naming it) and aborts
the whole MPI job (``MPI_Abort``), so a failure on one rank (RLX-N001 after a peer hung, or
any exception) stops every rank: no hang, no orphans. A rank the launcher stops (SIGTERM,
after another rank died) prints RLX-N010 on its way out (distributed/faults.py).
"""

from __future__ import annotations

import runpy
import sys
import traceback


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if argv else 2
    from rlx_core.distributed.communicator import init
    from rlx_core.distributed.errors import PeerFailedError
    from rlx_core.distributed.faults import install_stop_handler, notify_failure

    comm = init()
    if comm.size > 1:
        install_stop_handler(comm.rank, comm.size)
    sys.argv = list(argv)
    try:
        runpy.run_path(argv[0], run_name="__main__")
    except SystemExit as stop:
        code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
        if code and comm.size > 1:
            comm.comm.Abort(code)
        return code
    except BaseException as err:  # noqa: BLE001 - any failure must stop the other ranks
        sys.stderr.write(f"rlx.distributed rank {comm.rank}/{comm.size} failed:\n")
        traceback.print_exc()
        sys.stderr.flush()
        sys.stdout.flush()
        if comm.size > 1:
            if not isinstance(err, PeerFailedError):  # the others know of that one already
                notify_failure(comm.mpi, err)
            comm.comm.Abort(1)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
