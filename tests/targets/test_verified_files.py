"""Verified entries of any target's build cache (rlx_core/targets/verified_files.py): published
with a record, trusted only while the bytes match it, quarantined otherwise."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from rlx_core.targets import verified_files as vf

pytestmark = pytest.mark.usefixtures("fresh_verified")


def _publish(path: Path, data: bytes) -> None:
    tmp = vf.temp_path(path, ".tmp")
    tmp.write_bytes(data)
    vf.publish(tmp, path)


def test_a_published_entry_has_its_record_and_is_found(tmp_path: Path) -> None:
    entry = tmp_path / "k.bin"
    _publish(entry, b"payload" * 100)
    assert entry.read_bytes() == b"payload" * 100
    size, digest = (entry.with_name("k.bin" + vf.RECORD)).read_text().split()
    assert int(size) == 700 and len(digest) == 64
    assert vf.lookup(entry)
    assert not list(tmp_path.glob("*.tmp"))  # the temporary was renamed into place


@pytest.mark.parametrize("damage", ["same-size", "truncated", "no-record"])
def test_a_damaged_entry_is_quarantined_once_forgotten(damage: str, tmp_path: Path) -> None:
    """This process remembers what it verified (inode, size, mtime); after forget() the next
    lookup hashes the file again, as another process would, and catches the damage."""
    entry = tmp_path / "k.bin"
    _publish(entry, b"0123456789" * 10)
    assert vf.lookup(entry)
    if damage == "same-size":
        st = entry.stat()
        with open(entry, "r+b") as f:  # same inode, size and mtime: only the hash tells
            f.write(b"X")
        os.utime(entry, ns=(st.st_atime_ns, st.st_mtime_ns))
        assert vf.lookup(entry)  # this process verified it already and trusts its memory
    elif damage == "truncated":
        entry.write_bytes(b"0123")
    else:
        entry.with_name("k.bin" + vf.RECORD).unlink()
    vf.forget(entry)
    assert not vf.lookup(entry)
    assert not entry.exists() and not entry.with_name("k.bin" + vf.RECORD).exists()
    (why,) = (tmp_path / "quarantine").glob("k.bin.*.why")
    assert ("no valid record" in why.read_text()) == (damage == "no-record")


def test_a_missing_entry_is_a_miss_not_a_quarantine(tmp_path: Path) -> None:
    assert not vf.lookup(tmp_path / "absent.bin")
    assert not (tmp_path / "quarantine").exists()


def test_a_failed_write_is_a_typed_error_and_leaves_no_temporary(tmp_path: Path,
                                                                 monkeypatch) -> None:
    def full(*a, **k):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(vf.os, "replace", full)
    with pytest.raises(vf.CacheWriteError) as info:
        vf.write_atomic(tmp_path / "x.c", b"int x;")
    assert info.value.code == "RLX-R014" and "disk is full" in info.value.message
    monkeypatch.undo()
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("executable", [False, True])
def test_a_published_entry_is_readable_by_other_users(executable: bool, tmp_path: Path) -> None:
    """A temporary starts 0600 (mkstemp); the entry and its record get 0666 / 0777 less the
    umask, so a cache one user prepared is readable (a shared object loadable) by others."""
    old = os.umask(0o022)
    try:
        entry = tmp_path / "k.so"
        tmp = vf.temp_path(entry, ".tmp")
        assert tmp.stat().st_mode & 0o777 == 0o600
        tmp.write_bytes(b"\x7fELF" + b"\0" * 60)
        if executable:  # a linker adds execute bits to its output
            os.chmod(tmp, 0o711)
        vf.publish(tmp, entry)
        record = entry.with_name(entry.name + vf.RECORD)
        assert entry.stat().st_mode & 0o777 == (0o755 if executable else 0o644)
        assert record.stat().st_mode & 0o777 == 0o644
        assert vf.lookup(entry)
    finally:
        os.umask(old)


def test_a_file_system_that_refuses_chmod_still_gets_the_entry(tmp_path: Path,
                                                               monkeypatch) -> None:
    """A FAT or SMB mount answers chmod with EPERM: the entry is published with the mode it
    has (usable by this user), not turned into a failed write (RLX-R014)."""
    def refuse(*a, **k):
        raise PermissionError(errno.EPERM, os.strerror(errno.EPERM))

    monkeypatch.setattr(vf.os, "chmod", refuse)
    entry = tmp_path / "k.so"
    _publish(entry, b"\x7fELF" + b"\0" * 60)
    monkeypatch.undo()
    assert entry.stat().st_mode & 0o777 == 0o600  # mkstemp's, left as it was
    vf.forget(entry)
    assert vf.lookup(entry)


def test_a_file_another_process_renames_in_after_a_publish_is_hashed_again(
        tmp_path: Path, monkeypatch) -> None:
    """What a publish remembers as verified is the file it hashed and renamed: a damaged file
    renamed over it a moment later (another process's) is not trusted by its path alone."""
    entry = tmp_path / "k.bin"
    other = tmp_path / "other.bin"
    real_replace = os.replace

    def replace_then_intrude(src, dst):
        real_replace(src, dst)
        if Path(dst) == entry:  # the entry's rename, not its record's
            other.write_bytes(b"X" * 70)  # the right size, other bytes
            real_replace(other, entry)

    monkeypatch.setattr(vf.os, "replace", replace_then_intrude)
    _publish(entry, b"0123456789" * 7)
    monkeypatch.undo()
    assert not vf.lookup(entry)  # hashed, not remembered: quarantined
    assert len(list((tmp_path / "quarantine").glob("k.bin.*.why"))) == 1


def _build_folder(root: Path) -> Path:
    tmp = vf.build_dir(root)
    (tmp / "obj").mkdir()
    (tmp / "obj" / "sim").write_bytes(b"simulator" * 50)
    (tmp / "rom.hex").write_text("01\n")
    return tmp


def test_a_folder_entry_is_published_with_records_inside_and_checked_whole(
    tmp_path: Path,
) -> None:
    """publish_folder records the named files inside the build folder, then renames it; a
    lookup hashes each; one damaged quarantines the folder whole (a missing one too)."""
    names = ("obj/sim", "rom.hex")
    old = os.umask(0o022)
    try:
        tmp = _build_folder(tmp_path)
        assert tmp.name.startswith(vf.BUILD_PREFIX) and tmp.stat().st_mode & 0o777 == 0o700
        vf.publish_folder(tmp, tmp_path / "entry", names)
    finally:
        os.umask(old)
    entry = tmp_path / "entry"
    assert not tmp.exists() and entry.stat().st_mode & 0o777 == 0o755  # others can read it
    assert (entry / "obj" / ("sim" + vf.RECORD)).read_text().split()[0] == "450"
    vf.forget()
    assert vf.lookup_folder(entry, names)
    (entry / "rom.hex").write_text("02\n")
    vf.forget()
    assert not vf.lookup_folder(entry, names) and not entry.exists()
    (kept,) = (p for p in (tmp_path / "quarantine").iterdir() if p.is_dir())
    assert (kept / "obj" / "sim").is_file()  # moved whole, for inspection
    assert (tmp_path / "quarantine" / (kept.name + ".why")).read_text().startswith("rom.hex: ")
    assert not vf.lookup_folder(entry, names)  # absent: a miss
    vf.publish_folder(_build_folder(tmp_path), entry, names)
    (entry / "obj" / "sim").unlink()
    assert not vf.lookup_folder(entry, names)
    assert "obj/sim: missing" in "".join(
        p.read_text() for p in (tmp_path / "quarantine").glob("*.why"))


def test_a_folder_another_process_published_first_is_kept(tmp_path: Path) -> None:
    names = ("obj/sim",)
    vf.publish_folder(_build_folder(tmp_path), tmp_path / "entry", names)
    first = (tmp_path / "entry" / "obj" / "sim").stat().st_ino
    late = _build_folder(tmp_path)
    vf.publish_folder(late, tmp_path / "entry", names)
    assert not late.exists() and (tmp_path / "entry" / "obj" / "sim").stat().st_ino == first
    assert vf.lookup_folder(tmp_path / "entry", names)


def test_a_folder_that_cannot_be_published_is_a_typed_error(tmp_path: Path,
                                                            monkeypatch) -> None:
    real = os.replace

    def read_only(src, dst):
        if Path(src).is_dir():
            raise OSError(errno.EROFS, os.strerror(errno.EROFS))
        real(src, dst)

    tmp = _build_folder(tmp_path)
    monkeypatch.setattr(vf.os, "replace", read_only)
    with pytest.raises(vf.CacheWriteError) as info:
        vf.publish_folder(tmp, tmp_path / "entry", ("obj/sim",))
    assert info.value.code == "RLX-R014" and "read-only" in info.value.message
    assert not tmp.exists() and not (tmp_path / "entry").exists()


def test_a_cleanup_the_file_system_refuses_leaves_the_typed_error(tmp_path: Path,
                                                                  monkeypatch) -> None:
    """The file system turns read-only mid-write: the rename fails and so does deleting the
    temporary. The caller gets RLX-R014, not the cleanup's raw OSError; the temporary is left
    for clean_stale."""
    def read_only(*a, **k):
        raise OSError(errno.EROFS, os.strerror(errno.EROFS))

    monkeypatch.setattr(vf.os, "replace", read_only)
    monkeypatch.setattr(Path, "unlink", read_only)
    with pytest.raises(vf.CacheWriteError) as info:
        vf.write_atomic(tmp_path / "x.c", b"int x;")
    monkeypatch.undo()
    assert info.value.code == "RLX-R014" and "read-only" in info.value.message
    (left,) = tmp_path.glob("x.c.*.tmp")
    assert vf.clean_stale(tmp_path, older_than=-1) == [left] and not left.exists()


# -- publish_bytes / publish_copy: bytes in hand, or a file built elsewhere -----------------
def test_publish_bytes_makes_a_verified_entry_with_the_shared_mode(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        entry = tmp_path / "k.spv"
        vf.publish_bytes(entry, b"\x03\x02\x23\x07" + b"\0" * 60)
        assert entry.read_bytes() == b"\x03\x02\x23\x07" + b"\0" * 60
        assert entry.stat().st_mode & 0o777 == 0o644
        size, _ = entry.with_name(entry.name + vf.RECORD).read_text().split()
        assert int(size) == 64
        vf.forget(entry)  # hashed again, as another process would
        assert vf.lookup(entry)
        assert sorted(p.name for p in tmp_path.iterdir()) == ["k.spv", "k.spv.sha256"]
    finally:
        os.umask(old)


@pytest.mark.parametrize("executable", [False, True])
def test_publish_copy_keeps_the_source_and_its_execute_bits(executable: bool,
                                                            tmp_path: Path) -> None:
    """A linked ELF stays executable (0777 less the umask), an object file does not; the
    source, in a build folder, is left as it was."""
    old = os.umask(0o022)
    try:
        build = tmp_path / "build"
        build.mkdir()
        src = build / "a.elf"
        src.write_bytes(b"\x7fELF" + bytes(range(60)))
        os.chmod(src, 0o700 if executable else 0o600)
        cache = tmp_path / "cache"
        cache.mkdir()
        entry = cache / "prog-1.elf"
        vf.publish_copy(src, entry)
        assert entry.read_bytes() == src.read_bytes()
        assert entry.stat().st_mode & 0o777 == (0o755 if executable else 0o644)
        assert src.stat().st_mode & 0o777 == (0o700 if executable else 0o600)
        vf.forget(entry)
        assert vf.lookup(entry)
        assert sorted(p.name for p in cache.iterdir()) == ["prog-1.elf", "prog-1.elf.sha256"]
    finally:
        os.umask(old)


@pytest.mark.parametrize("how", ["bytes", "copy"])
@pytest.mark.parametrize("where", ["write", "rename"])
def test_a_failed_publish_leaves_no_temporary_and_no_entry(how: str, where: str,
                                                           tmp_path: Path,
                                                           monkeypatch) -> None:
    """The disk fills while the bytes go in, or at the first rename (the record's, which goes
    before the entry's): RLX-R014 naming the entry, and the folder holds neither a temporary
    nor a half-written entry nor a record."""
    src = tmp_path / "built.o"
    src.write_bytes(b"\x7fELF" + b"\0" * 60)
    cache = tmp_path / "cache"
    cache.mkdir()
    entry = cache / "k.o"

    def full(*a, **k):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    if where == "rename":
        monkeypatch.setattr(vf.os, "replace", full)
    elif how == "bytes":
        monkeypatch.setattr(Path, "write_bytes", full)
    else:
        monkeypatch.setattr(vf.shutil, "copyfile", full)
    with pytest.raises(vf.CacheWriteError) as info:
        if how == "bytes":
            vf.publish_bytes(entry, src.read_bytes())
        else:
            vf.publish_copy(src, entry)
    monkeypatch.undo()
    assert info.value.code == "RLX-R014" and "disk is full" in info.value.message
    assert "k.o" in info.value.message
    assert not list(cache.iterdir())
    assert not vf.lookup(entry)


def test_publish_copy_of_a_missing_file_is_a_typed_error(tmp_path: Path) -> None:
    with pytest.raises(vf.CacheWriteError) as info:
        vf.publish_copy(tmp_path / "never-built.elf", tmp_path / "k.elf")
    assert info.value.code == "RLX-R014"
    assert not list(tmp_path.iterdir())
