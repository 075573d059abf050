"""Verified entries of a build cache: files published with a record, checked before use.

Any target's build cache keeps its artefacts this way (the cpu target's shared objects, object
files and probes, ``cpu/cache.py``; the vulkan target's SPIR-V and glslang server; hexagon's
linked programs and runtime object): every file
is published with a record beside it, ``<name>.sha256`` (size and sha256 of its bytes, written
at build time), and a lookup hashes the file again before anyone loads it: a truncated, emptied
or overwritten entry (which would make ``dlopen`` SIGBUS or raise a raw ``OSError``) is moved
to ``quarantine/`` and built again instead. Files are written to a temporary name and renamed
into place, so a reader never sees half a file; temporaries a killed compile left behind are
deleted (``clean_stale``) once they are older than any compile can take. A failed write is a
``CacheWriteError`` (RLX-R014).

A published file (and its record) gets the mode any new file of this user gets (``0666`` less
the umask; ``0777`` less it when the build made it executable): a temporary starts private
(``mkstemp``: ``0600``), and a cache prepared by one user (a container image, a shared read-only
mount) must stay readable, and its shared objects loadable, by the others. Where the file
system refuses the change (a FAT or SMB mount), the entry keeps the mode it has: still this
user's to use, as before modes were set.

Where each target's folder is, is ``build_cache.py``; this module only needs a folder.
"""

from __future__ import annotations

import errno
import hashlib
import os
import tempfile
import time
from pathlib import Path

from rlx_core.errors import RlxError

# a compile runs at most 600 s (toolchain timeout); a temporary older than this is an orphan
STALE_TMP_SECONDS = 900
RECORD = ".sha256"
_REASONS = {errno.ENOSPC: "the disk is full", errno.EROFS: "the file system is read-only",
            errno.EDQUOT: "the disk quota is exhausted", errno.EACCES: "permission denied",
            errno.EPERM: "permission denied"}

# path -> (inode, size, mtime) of entries already verified in this process: of the very file
# that was hashed (fstat of the descriptor read), not of whatever the path names a moment later
_VERIFIED: dict[str, tuple[int, int, int]] = {}


class CacheWriteError(RlxError):
    """Writing a file into the cache failed (disk full, read-only file system, quota)."""

    code = "RLX-R014"


def reason(err: OSError) -> str:
    """Why a file operation on a cache folder failed, in words (``the disk is full``)."""
    return _REASONS.get(err.errno or 0, err.strerror or str(err))


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
                           f"{reason(err)}",
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


def _umask() -> int:
    """This process's umask, read without changing it (os.umask sets it, for every thread)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    return 0o022


def shared_mode(tmp: Path) -> None:
    """Give a finished temporary the mode a new file of this user gets (see module doc):
    ``0666`` less the umask, ``0777`` less it when any execute bit is set. Best-effort: a file
    system that refuses ``chmod`` leaves the mode as it is (the entry is still usable)."""
    full = 0o777 if tmp.stat().st_mode & 0o111 else 0o666
    try:
        os.chmod(tmp, full & ~_umask())
    except OSError:  # EPERM on a FAT/SMB mount: not a failed write
        pass


def write_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary and a rename (typed error on failure)."""
    tmp = temp_path(path, ".tmp")
    try:
        with open(tmp, "wb") as f:
            f.write(data)
        shared_mode(tmp)
        os.replace(tmp, path)
    except OSError as err:
        raise write_error(path, err) from None
    finally:
        if tmp.exists():
            tmp.unlink()


def _digest(path: Path) -> tuple[int, str, tuple[int, int, int]]:
    """(size, sha256, (inode, size, mtime)) of the file ``path`` names when it is opened."""
    h = hashlib.sha256()
    size = 0
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
            size += len(chunk)
        st = os.fstat(f.fileno())
    return size, h.hexdigest(), (st.st_ino, st.st_size, st.st_mtime_ns)


def publish(tmp: Path, path: Path) -> None:
    """Move a finished artefact from ``tmp`` to ``path`` with its record (typed error on failure).

    The record goes first: a reader that finds the new record with the old (or no) file sees a
    mismatch or a miss and builds again, never trusts a file the record does not describe.
    """
    try:
        size, digest, ident = _digest(tmp)
        shared_mode(tmp)  # (a chmod changes neither inode, size nor mtime)
        write_atomic(path.with_name(path.name + RECORD), f"{size} {digest}\n".encode())
        os.replace(tmp, path)
    except OSError as err:
        raise write_error(path, err) from None
    # the file this process hashed and renamed: another process that publishes the same entry
    # a moment later puts another inode there, which the next lookup hashes again
    _VERIFIED[str(path)] = ident


def forget(path: Path | None = None) -> None:
    """Forget that this process verified ``path`` (every entry when None): its next lookup
    hashes it again, as another process would. For tests, and for a caller that changed a
    file behind the cache's back."""
    if path is None:
        _VERIFIED.clear()
    else:
        _VERIFIED.pop(str(path), None)


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
    ident = None
    try:
        if st.st_size == want[0]:
            size, digest, ident = _digest(path)
            got = (size, digest)
        else:
            got = (st.st_size, "")
    except OSError:
        got = (-1, "")
    if got != want:
        quarantine(path, f"{got[0]} bytes, expected {want[0]} with sha256 {want[1][:12]}")
        return False
    if ident is not None:
        _VERIFIED[str(path)] = ident  # the file hashed (a rename since then: hashed again)
    return True


def quarantine(path: Path, why: str) -> None:
    """Move a bad entry (and its record) out of the way, into ``quarantine/`` for inspection.

    Renaming, not rewriting: a process that already mapped the old file keeps its pages.
    """
    forget(path)
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
