"""The cpu target's build folder: where its shared objects, object files and probes are kept.

``cache_dir`` creates and checks the folder once per process (a ``CacheDirError``, RLX-R013,
when it cannot be used) and deletes the temporaries a killed compile left there; ``find`` looks
an entry up along ``search_path``. Every entry is a verified file (``targets/verified_files.py``:
published with a size + sha256 record, hashed again before it is loaded, quarantined and built
again when damaged).

A folder that cannot be written but already holds verified entries (a cache baked into a
container image, a read-only mount shared by a cluster) is used read-only: its entries are
found and verified as usual, and what it lacks is built into a private writable folder beside
the system's temporary files, with one ``CacheReadOnlyWarning`` (RLX-R016) saying so.

Environment: ``RLX_CACHE_DIR`` (default ``~/.cache/rlx/cpu``).
"""

from __future__ import annotations

import errno
import os
import tempfile
from pathlib import Path

from rlx_core.errors import RlxError, RlxWarning
from rlx_core.targets import build_cache
from rlx_core.targets.verified_files import RECORD, clean_stale, lookup, reason

_READ_ONLY_ERRNOS = {errno.EROFS, errno.EACCES, errno.EPERM}


class CacheDirError(RlxError):
    """The cache folder (RLX_CACHE_DIR) cannot be used: not a folder, not writable."""

    code = "RLX-R013"


class CacheReadOnlyWarning(RlxWarning):
    """The cache folder is read-only but holds entries: they are used, new builds go to a
    private writable folder."""

    code = "RLX-R016"


_READY: set[str] = set()  # folders this process has checked and cleaned
# writable folder -> the read-only cache folder it stands in for (searched after it)
_READ_ONLY: dict[str, Path] = {}


def cache_dir() -> Path:
    """The folder builds are written to, created and checked once per process (CacheDirError
    when unusable). For a read-only folder with entries: the private folder that stands in."""
    path = build_cache.configured()  # RLX_CACHE_DIR, else ~/.cache/rlx/cpu
    for overlay, base in _READ_ONLY.items():
        if base == path and Path(overlay).is_dir():
            return Path(overlay)
    if str(path) in _READY and path.is_dir():  # (deleted since: create and check it again)
        return path
    hint = "set RLX_CACHE_DIR to a writable folder (or unset it for ~/.cache/rlx/cpu)"
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise CacheDirError(f"cannot create the cache folder {path}: {reason(err)}",
                            hint=hint) from None
    if not path.is_dir():
        raise CacheDirError(f"the cache folder {path} is not a folder", hint=hint)
    try:  # the only reliable test of writability (root passes os.access on /proc, read-only mounts)
        _probe_write(path)
    except OSError as err:
        if err.errno in _READ_ONLY_ERRNOS and any(path.glob("*" + RECORD)):
            return _read_only(path, err)
        raise CacheDirError(f"cannot write into the cache folder {path}: {reason(err)}",
                            hint=hint) from None
    clean_stale(path)
    _READY.add(str(path))
    return path


def _probe_write(path: Path) -> None:
    fd, probe = tempfile.mkstemp(dir=path, prefix=".rlx-probe-", suffix=".tmp")
    os.close(fd)
    os.unlink(probe)


def _read_only(base: Path, err: OSError) -> Path:
    """Use ``base`` read-only: a private writable folder for new builds, searched first."""
    import hashlib
    import warnings

    tag = hashlib.sha256(str(base.resolve()).encode()).hexdigest()[:12]
    overlay = Path(tempfile.gettempdir()) / f"rlx-cache-{os.getuid()}-{tag}"
    try:
        overlay.mkdir(mode=0o700, exist_ok=True)
        _probe_write(overlay)
    except OSError as err2:
        raise CacheDirError(
            f"the cache folder {base} is read-only ({reason(err)}) and no private folder for new "
            f"builds can be made at {overlay}: {reason(err2)}",
            hint="set RLX_CACHE_DIR to a writable folder, or make the temporary folder "
                 "(TMPDIR) writable") from None
    clean_stale(overlay)
    _READY.add(str(overlay))
    _READ_ONLY[str(overlay)] = base
    warnings.warn(CacheReadOnlyWarning(
        f"the cache folder {base} is read-only ({reason(err)}): its entries are used as they "
        f"are, new builds go to {overlay}",
        hint="nothing to do if the folder is read-only on purpose; else make it writable or "
             "set RLX_CACHE_DIR"), stacklevel=3)
    return overlay


def search_path() -> list[Path]:
    """Where cached entries are looked up: the folder builds go to, then the read-only folder
    it stands in for (if any)."""
    root = cache_dir()
    base = _READ_ONLY.get(str(root))
    return [root] if base is None else [root, base]


def find(name: str) -> Path | None:
    """The verified entry ``name`` from the search path, or None (a miss: build it)."""
    for folder in search_path():
        if lookup(folder / name):
            return folder / name
    return None
