"""Worker (2 ranks): rank 1 fails mid-training (``hang``: sleeps; ``kill``: SIGKILLs
itself; ``raise``: raises); rank 0 must fail with RLX-N001 (or be stopped by the launcher)
in bounded time, never hang."""

import os
import signal
import sys
import time

import numpy as np

from rlx_core.distributed import init

mode = sys.argv[1]
comm = init()  # the deadline comes from $RLX_DIST_TIMEOUT
buf = np.ones(1 << 12, dtype=np.float32)
for step in range(1000):
    if comm.rank == 1 and step == 3:
        print(f"rank 1: {mode} at step {step}", flush=True)
        if mode == "hang":
            time.sleep(3600)
        elif mode == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        else:
            raise RuntimeError("rank 1 failed on purpose")
    comm.all_reduce(buf, "mean", out=buf)
print(f"rank {comm.rank}: finished all steps (the fault was not seen)", flush=True)
