"""How many threads the CPU target's kernels use: one OpenMP team for loops and GEMMs alike.

Left alone, OpenMP (the generated outer loops) and OpenBLAS (its own pthreads) would each
start one thread per core, and the waiting workers of one pool hold the cores the other
needs (on a loaded 2-core machine MiniLM ran several times slower at 2 threads than at
1). So OpenBLAS is kept on one thread and large GEMMs are split over the program's team by
the kernels themselves (blas.emit_gemm, team.py). The count is explicit: ``RLX_NUM_THREADS``,
else the cores this process may run on, pushed into every loaded program
(``<prefix>_threads(n)``, see renderer.py).
"""

from __future__ import annotations

import ctypes
import os

from rlx_core.errors import ArgumentError

_STATE: dict[str, int] = {}
# the most threads a count may ask for: each program's setter takes a C int (ctypes would
# silently truncate 10**12 to 727,379,968, and 2**32 to 0); the team itself uses at most
# team_runtime.py's RLX_TEAM_MAXT of them
MAX_THREADS = (1 << 31) - 1
_LOADED: list[tuple[ctypes.CDLL, str]] = []  # (library, setter symbol) of loaded programs


def default_threads() -> int:
    """``RLX_NUM_THREADS`` when set, else the number of cores available to this process."""
    env = os.environ.get("RLX_NUM_THREADS", "")
    if env.strip():
        try:
            n = int(env)
        except ValueError:
            raise ArgumentError(f"RLX_NUM_THREADS={env!r} is not an integer",
                                hint="set it to a thread count such as 2") from None
        if not 1 <= n <= MAX_THREADS:
            raise ArgumentError(f"RLX_NUM_THREADS={n} must be from 1 to {MAX_THREADS}",
                                hint="set it to a thread count such as 2")
        return n
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def num_threads() -> int:
    """The thread count programs run with now."""
    if "n" not in _STATE:
        _STATE["n"] = default_threads()
    return _STATE["n"]


def set_num_threads(n: int) -> None:
    """Use ``n`` threads in every loaded CPU program and in those loaded later."""
    if not isinstance(n, int) or not 1 <= n <= MAX_THREADS:
        raise ArgumentError(f"thread count {n!r} must be an integer from 1 to {MAX_THREADS}",
                            hint="pass 1 for single-threaded kernels")
    _STATE["n"] = n
    for lib, sym in _LOADED:
        getattr(lib, sym)(n)


def attach(lib: ctypes.CDLL, symbol: str) -> None:
    """Register a loaded program's thread setter and apply the current count to it."""
    fn = getattr(lib, symbol, None)
    if fn is None:
        return  # built by an older renderer: it keeps the pools' defaults
    fn.restype = None
    fn.argtypes = [ctypes.c_int]
    fn(num_threads())
    # once per program: a second compile of the same build loads the same library (one dlopen
    # per path), and a reader summing the programs' team counters (bench_contention.team_stats)
    # counted it twice
    if not any(have is lib and sym == symbol for have, sym in _LOADED):
        _LOADED.append((lib, symbol))


def detach(lib: ctypes.CDLL) -> None:
    """Forget the thread setters of a library whose programs no longer run: a specialization
    cache module retired by the rebuild that holds all of its programs again. Each rebuild
    attached every specialization anew, so a function with n specializations kept n(n+1)/2
    setters, each set by set_num_threads. The library itself stays loaded (runtime._LIBS: one
    dlopen per path, never closed; an extension module cannot be unloaded), so no handle is
    freed or leaked here."""
    _LOADED[:] = [(have, sym) for have, sym in _LOADED if have is not lib]
