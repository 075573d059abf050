"""Where each target keeps what it builds: one convention, one environment variable.

``RLX_CACHE_DIR`` names the CPU target's folder (its programs, kernel objects and
``peaks.json``; ``cpu/cache.py`` checks it), by default ``~/.cache/rlx/cpu``. A
target with builds of its own (cortex-m's firmware, fpga's simulators, hexagon's programs,
vulkan's SPIR-V and glslang server) keeps them in a folder named after it:
``<RLX_CACHE_DIR>/<target>`` where the variable is set, else ``~/.cache/rlx/<target>`` beside
the CPU's. So one variable moves every build, and
deleting ``~/.cache/rlx`` (or the folder the variable names) clears them all. How an entry is
written and checked before use (a record beside it, an atomic rename, quarantine when damaged)
is ``verified_files.py``: the cpu, vulkan and hexagon targets' entries are files; cortex-m's
and fpga's are build folders renamed into place whole, the files a hit runs recorded inside.
"""

from __future__ import annotations

import os
from pathlib import Path

from rlx_core.targets.verified_files import CacheWriteError, clean_stale, reason

CPU = "cpu"
_CLEANED: set[str] = set()  # folders this process has cleaned of stale temporaries


def configured(target: str = CPU) -> Path:
    """The folder ``target`` builds into, as configured (not created or checked)."""
    env = os.environ.get("RLX_CACHE_DIR")
    if env:
        return Path(env) if target == CPU else Path(env) / target
    return Path.home() / ".cache" / "rlx" / target


def target_cache_dir(target: str) -> Path:
    """``configured(target)``, created if missing, the temporaries and ``build-*`` folders a
    killed build left there deleted once per process (``verified_files.clean_stale``): for a
    target other than the CPU
    (the CPU's folder is created, checked and cleaned by ``cpu/cache.cache_dir``). A folder that
    cannot be made (a file in its place, no permission) is ``CacheWriteError`` (RLX-R014)."""
    root = configured(target)
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise CacheWriteError(f"cannot create the {target} target's build cache folder {root}: "
                              f"{reason(err)}",
                              hint="set RLX_CACHE_DIR to a writable folder (each target's "
                                   "builds go to <RLX_CACHE_DIR>/<target>)") from None
    if str(root) not in _CLEANED:
        clean_stale(root)
        _CLEANED.add(str(root))
    return root
