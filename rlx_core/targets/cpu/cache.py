"""The build cache folder and its verified entries (shared objects, object files, probes).

Every artefact is published with a record beside it, ``<name>.sha256`` (size and sha256 of
its bytes, written at build time), and a lookup hashes the file again before anyone loads it:
a truncated, emptied or overwritten entry (which would make ``dlopen`` SIGBUS or raise a raw
``OSError``) is moved to ``quarantine/`` and built again instead. Files are written to a
temporary name and renamed into place, so a reader never sees half a file; temporaries a
killed compile left behind are deleted once they are older than any compile can take.

A folder that cannot be written but already holds verified entries (a cache baked into a
container image, a read-only mount shared by a cluster) is used read-only: its entries are
found and verified as usual, and what it lacks is built into a private writable folder beside
the system's temporary files, with one ``CacheReadOnlyWarning`` (RLX-R016) saying so.

Environment: ``RLX_CACHE_DIR`` (default ``~/.cache/rlx/cpu``).
"""

from __future__ import annotations

import errno
import hashlib
import os
import tempfile
import time
from pathlib import Path

from rlx_core.errors import RlxError, RlxWarning
from rlx_core.targets import build_cache

# a compile runs at most 600 s (toolchain timeout); a temporary older than this is an orphan
STALE_TMP_SECONDS = 900
RECORD = ".sha256"
_READ_ONLY_ERRNOS = {errno.EROFS, errno.EACCES, errno.EPERM}
_DIR_ERRNOS = {errno.ENOSPC: "the disk is full", errno.EROFS: "the file system is read-only",
               errno.EDQUOT: "the disk quota is exhausted", errno.EACCES: "permission denied",
               errno.EPERM: "permission denied"}


class CacheDirError(RlxError):
    """The cache folder (RLX_CACHE_DIR) cannot be used: not a folder, not writable."""

    code = "RLX-R013"


class CacheWriteError(RlxError):
    """Writing a file into the cache failed (disk full, read-only file system, quota)."""

    code = "RLX-R014"


class CacheReadOnlyWarning(RlxWarning):
    """The cache folder is read-only but holds entries: they are used, new builds go to a
    private writable folder."""

    code = "RLX-R016"


_READY: set[str] = set()  # folders this process has checked and cleaned
# writable folder -> the read-only cache folder it stands in for (searched after it)
_READ_ONLY: dict[str, Path] = {}
# path -> (inode, size, mtime) of entries already verified in this process
_VERIFIED: dict[str, tuple[int, int, int]] = {}


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
        raise CacheDirError(f"cannot create the cache folder {path}: {_why(err)}",
                            hint=hint) from None
    if not path.is_dir():
        raise CacheDirError(f"the cache folder {path} is not a folder", hint=hint)
    try:  # the only reliable test of writability (root passes os.access on /proc, read-only mounts)
        _probe_write(path)
    except OSError as err:
        if err.errno in _READ_ONLY_ERRNOS and any(path.glob("*" + RECORD)):
            return _read_only(path, err)
        raise CacheDirError(f"cannot write into the cache folder {path}: {_why(err)}",
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
            f"the cache folder {base} is read-only ({_why(err)}) and no private folder for new "
            f"builds can be made at {overlay}: {_why(err2)}",
            hint="set RLX_CACHE_DIR to a writable folder, or make the temporary folder "
                 "(TMPDIR) writable") from None
    clean_stale(overlay)
    _READY.add(str(overlay))
    _READ_ONLY[str(overlay)] = base
    warnings.warn(CacheReadOnlyWarning(
        f"the cache folder {base} is read-only ({_why(err)}): its entries are used as they "
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


def _why(err: OSError) -> str:
    return _DIR_ERRNOS.get(err.errno or 0, err.strerror or str(err))


def clean_stale(root: Path, older_than: float = STALE_TMP_SECONDS) -> list[Path]:
    """Delete temporaries (``*.tmp``) a killed compile or write left in ``root``; returns them."""
    now, gone = time.time(), []
    for p in root.glob("*.tmp"):
        try:
            if now - p.stat().st_mtime > older_than:
                p.unlink()
                gone.append(p)
        except OSError:  # another process cleaned it first, or it is not ours to delete
            continue
    return gone


def write_error(path: Path, err: OSError) -> CacheWriteError:
    """The typed error for a failed write of ``path`` into the cache."""
    return CacheWriteError(f"cannot write {path.name} into the cache folder {path.parent}: "
                           f"{_why(err)}",
                           hint="free disk space, or set RLX_CACHE_DIR to a writable folder "
                                "with room")


def temp_path(path: Path, suffix: str) -> Path:
    """A fresh temporary file next to ``path`` (for a compiler to write its output into)."""
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=suffix)
    except OSError as err:
        raise write_error(path, err) from None
    os.close(fd)
    return Path(tmp)


def write_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary and a rename (typed error on failure)."""
    tmp = temp_path(path, ".tmp")
    try:
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except OSError as err:
        raise write_error(path, err) from None
    finally:
        if tmp.exists():
            tmp.unlink()


def _digest(path: Path) -> tuple[int, str]:
    h = hashlib.sha256()
    size = 0
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
            size += len(chunk)
    return size, h.hexdigest()


def publish(tmp: Path, path: Path) -> None:
    """Move a finished artefact from ``tmp`` to ``path`` with its record (typed error on failure).

    The record goes first: a reader that finds the new record with the old (or no) file sees a
    mismatch or a miss and builds again, never trusts a file the record does not describe.
    """
    try:
        size, digest = _digest(tmp)
        write_atomic(path.with_name(path.name + RECORD), f"{size} {digest}\n".encode())
        os.replace(tmp, path)
    except OSError as err:
        raise write_error(path, err) from None
    _remember(path)


def _remember(path: Path) -> None:
    try:
        st = path.stat()
    except OSError:
        return
    _VERIFIED[str(path)] = (st.st_ino, st.st_size, st.st_mtime_ns)


def lookup(path: Path) -> bool:
    """True when ``path`` is in the cache and matches its record; a damaged entry (or one
    without a record) is quarantined, so the caller builds it again."""
    try:
        st = path.stat()
    except OSError:
        return False
    if _VERIFIED.get(str(path)) == (st.st_ino, st.st_size, st.st_mtime_ns):
        return True
    record = path.with_name(path.name + RECORD)
    try:
        size_text, digest = record.read_text().split()
        want = (int(size_text), digest)
    except (OSError, ValueError):
        quarantine(path, "no valid record")
        return False
    try:
        got = _digest(path) if st.st_size == want[0] else (st.st_size, "")
    except OSError:
        got = (-1, "")
    if got != want:
        quarantine(path, f"{got[0]} bytes, expected {want[0]} with sha256 {want[1][:12]}")
        return False
    _remember(path)
    return True


def quarantine(path: Path, why: str) -> None:
    """Move a bad entry (and its record) out of the way, into ``quarantine/`` for inspection.

    Renaming, not rewriting: a process that already mapped the old file keeps its pages.
    """
    _VERIFIED.pop(str(path), None)
    qdir = path.parent / "quarantine"
    stamp = f"{os.getpid()}-{time.time_ns()}"
    try:
        qdir.mkdir(exist_ok=True)
        os.replace(path, qdir / f"{path.name}.{stamp}")
        (qdir / f"{path.name}.{stamp}.why").write_text(why + "\n")
    except OSError:
        try:  # no room to keep it: deleting it is enough to rebuild
            path.unlink()
        except OSError:
            pass
    try:
        path.with_name(path.name + RECORD).unlink()
    except OSError:
        pass
