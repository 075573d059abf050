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
``CacheWriteError`` (RLX-R014). Bytes in hand are published with ``publish_bytes``, a file
built elsewhere with ``publish_copy``; a compiler writes straight into ``temp_path``'s
temporary, which ``publish`` renames into place (and ``discard`` deletes on failure).

A target that builds in a folder and renames the whole folder into place (cortex-m's firmware,
fpga's simulators) keeps a folder entry: ``build_dir`` makes the build folder, ``publish_folder``
records the files it runs inside it before the rename, ``lookup_folder`` checks them on a hit
and quarantines the folder whole when one is damaged or has no record; ``clean_stale`` deletes
the build folders a killed build left, once nothing in them changed for as long as any build
can take.

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
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from rlx_core.errors import RlxError

# a compile runs at most 600 s (toolchain timeout); a temporary older than this is an orphan
STALE_TMP_SECONDS = 900
RECORD = ".sha256"
BUILD_PREFIX = "build-"  # a folder entry's build folder (build_dir), renamed into place whole
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
    """Delete what a killed compile or write left in ``root``, returns it: temporaries
    (``*.tmp``) and build folders (``build-*``, ``build_dir``) untouched for ``older_than``
    seconds. A folder's age is that of the newest file in it: a build still running writes
    there (its tool is killed at its timeout, shorter than ``STALE_TMP_SECONDS``)."""
    now, gone = time.time(), []
    for p in root.glob("*.tmp"):
        try:
            if now - p.stat().st_mtime > older_than:
                p.unlink()
                gone.append(p)
        except OSError:  # another process cleaned it first, or it is not ours to delete
            continue
    for p in root.glob(BUILD_PREFIX + "*"):
        try:
            if p.is_dir() and not p.is_symlink() and now - _last_write(p) > older_than:
                shutil.rmtree(p)
                gone.append(p)
        except OSError:  # renamed into place or cleaned by another process meanwhile
            continue
    return gone


def _last_write(folder: Path) -> float:
    """The newest mtime of ``folder`` and everything under it (OSError when it vanished)."""
    newest = folder.lstat().st_mtime

    def gone(err: OSError) -> None:
        raise err

    for top, dirs, files in os.walk(folder, onerror=gone):
        for name in (*dirs, *files):
            newest = max(newest, os.lstat(os.path.join(top, name)).st_mtime)
    return newest


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
    _user_mode(tmp, 0o777 if tmp.stat().st_mode & 0o111 else 0o666)


def _user_mode(path: Path, full: int) -> None:
    """``full`` less the umask on ``path``, best-effort (EPERM on a FAT/SMB mount: not a
    failed write)."""
    try:
        os.chmod(path, full & ~_umask())
    except OSError:
        pass


def discard(tmp: Path) -> None:
    """Delete a temporary a finished or failed write leaves, if it is there. It never raises:
    a cleanup the file system refuses (it turned read-only) must not replace the typed error
    being raised with a raw ``OSError``; ``clean_stale`` deletes what stays once it is old."""
    try:
        tmp.unlink(missing_ok=True)
    except OSError:
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
        discard(tmp)


def _write_record(path: Path, size: int, digest: str) -> None:
    """``path``'s record (``<name>.sha256``: its size and sha256), written atomically."""
    write_atomic(path.with_name(path.name + RECORD), f"{size} {digest}\n".encode())


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
        _write_record(path, size, digest)
        os.replace(tmp, path)
    except OSError as err:
        raise write_error(path, err) from None
    # the file this process hashed and renamed: another process that publishes the same entry
    # a moment later puts another inode there, which the next lookup hashes again
    _VERIFIED[str(path)] = ident


def publish_bytes(path: Path, data: bytes) -> None:
    """Publish ``data`` (bytes in hand, e.g. SPIR-V) as the verified entry ``path``: written to
    a temporary beside it, then ``publish``. A failure is a ``CacheWriteError`` (RLX-R014) and
    leaves neither a temporary nor a half-written entry."""
    _publish_through(path, lambda tmp: tmp.write_bytes(data))


def publish_copy(src: Path, path: Path) -> None:
    """Publish a copy of the finished file ``src`` (in a temporary folder, maybe on another
    file system) as the verified entry ``path``: copied beside it with ``src``'s mode (an ELF
    stays executable; ``publish`` then gives it the shared mode), then ``publish``. A failure
    (``src`` missing included) is a ``CacheWriteError`` (RLX-R014), leaving no temporary."""

    def fill(tmp: Path) -> None:
        shutil.copyfile(src, tmp)
        shutil.copymode(src, tmp)  # (mkstemp made it 0600)

    _publish_through(path, fill)


def _publish_through(path: Path, fill: Callable[[Path], object]) -> None:
    """``fill`` a fresh temporary beside ``path``, publish it there; typed error on failure,
    and the temporary is gone either way."""
    tmp = temp_path(path, ".tmp")
    try:
        fill(tmp)
        publish(tmp, path)
    except OSError as err:
        raise write_error(path, err) from None
    finally:
        discard(tmp)


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
    why = _mismatch(path, st)
    if why:
        quarantine(path, why)
        return False
    return True


def _mismatch(path: Path, st: os.stat_result) -> str:
    """Why ``path`` (stat ``st``) does not match its record, or ``""`` when it does."""
    if _VERIFIED.get(str(path)) == (st.st_ino, st.st_size, st.st_mtime_ns):
        return ""
    record = path.with_name(path.name + RECORD)
    try:
        size_text, digest = record.read_text().split()
        want = (int(size_text), digest)
    except (OSError, ValueError):
        return "no valid record"
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
        return f"{got[0]} bytes, expected {want[0]} with sha256 {want[1][:12]}"
    if ident is not None:
        _VERIFIED[str(path)] = ident  # the file hashed (a rename since then: hashed again)
    return ""


def quarantine(path: Path, why: str) -> None:
    """Move a bad entry (and its record) out of the way, into ``quarantine/`` for inspection.

    Renaming, not rewriting: a process that already mapped the old file keeps its pages.
    """
    forget(path)
    _set_aside(path, why, lambda: path.unlink(missing_ok=True))
    try:
        path.with_name(path.name + RECORD).unlink()
    except OSError:
        pass


# -- folder entries: a build folder renamed into place whole (cortex-m's firmware, fpga's
# simulators), the files it runs recorded inside it -------------------------------------------
def build_dir(root: Path) -> Path:
    """A fresh build folder in ``root`` (``build-*``: ``clean_stale`` deletes it once a killed
    build left it untouched for ``STALE_TMP_SECONDS``); typed error when it cannot be made."""
    try:
        return Path(tempfile.mkdtemp(prefix=BUILD_PREFIX, dir=root))
    except OSError as err:
        raise write_error(root / BUILD_PREFIX, err) from None


def publish_folder(tmp: Path, final: Path, names: tuple[str, ...]) -> None:
    """Record the files ``names`` (paths inside ``tmp``) beside them, then rename the finished
    build folder ``tmp`` to ``final``: a reader sees the folder whole, records included, or not
    at all. When another process published ``final`` first, ``tmp`` is deleted and its entry
    kept; any other failure is a ``CacheWriteError`` (RLX-R014).

    The folder gets the mode a new folder of this user gets (``0777`` less the umask; the build
    folder starts private, ``mkdtemp``'s ``0700``), as ``publish`` does for a file.
    """
    idents = {}
    try:
        for name in names:
            size, digest, idents[name] = _digest(tmp / name)
            _write_record(tmp / name, size, digest)
        _user_mode(tmp, 0o777)
        os.replace(tmp, final)
    except OSError as err:
        shutil.rmtree(tmp, ignore_errors=True)
        if not final.is_dir():
            raise write_error(final, err) from None
        return  # another process built it first (a folder does not replace a full one)
    except CacheWriteError:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    for name, ident in idents.items():  # the files hashed (a folder's rename keeps them)
        _VERIFIED[str(final / name)] = ident


def lookup_folder(folder: Path, names: tuple[str, ...]) -> bool:
    """True when ``folder`` is in the cache and each of ``names`` (paths inside it) matches its
    record; a folder with one missing, damaged or record-less is quarantined whole, so the
    caller builds it again."""
    if not folder.is_dir():
        return False
    for name in names:
        path = folder / name
        try:
            why = _mismatch(path, path.stat())
        except OSError:
            why = "missing"
        if why:
            quarantine_folder(folder, f"{name}: {why}")
            return False
    return True


def quarantine_folder(folder: Path, why: str) -> None:
    """Move a bad folder entry into ``quarantine/`` beside it, as ``quarantine`` does a file
    (renamed, not rewritten: a process running the old simulator keeps it)."""
    for key in [k for k in _VERIFIED if k.startswith(str(folder) + os.sep)]:
        del _VERIFIED[key]
    _set_aside(folder, why, lambda: shutil.rmtree(folder, ignore_errors=True))


def _set_aside(entry: Path, why: str, remove: Callable[[], object]) -> None:
    """Rename ``entry`` (a file or a folder) into ``quarantine/`` beside it with a ``.why``
    note; where that fails (no room to keep it), ``remove`` it: gone is enough to rebuild."""
    qdir = entry.parent / "quarantine"
    stamp = f"{os.getpid()}-{time.time_ns()}"
    try:
        qdir.mkdir(exist_ok=True)
        os.replace(entry, qdir / f"{entry.name}.{stamp}")
        (qdir / f"{entry.name}.{stamp}.why").write_text(why + "\n")
    except OSError:
        try:
            remove()
        except OSError:
            pass
