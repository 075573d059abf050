"""The CPU build cache under damage and resource errors: a truncated, garbage or empty shared
object is rebuilt (never a SIGBUS or a raw OSError), a verified file that does not load is
rebuilt too, stale temporaries are cleaned, and an unusable folder or a full disk is a typed
error."""

from __future__ import annotations

import ctypes
import dataclasses
import errno
import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

import rlx_core as rlx
from rlx_core.errors import RlxError
from rlx_core.targets import verified_files
from rlx_core.targets.cpu import cache, cached_build, toolchain
from rlx_core.targets.cpu.target import CpuTarget

ROOT = Path(__file__).resolve().parents[2]
_OK, _WHY = CpuTarget().available()
pytestmark = [pytest.mark.skipif(not _OK, reason=f"no C compiler: {_WHY}"),
              pytest.mark.usefixtures("fresh_cache_state")]

# a compiled executable and a jitted function (the specialization cache's module), one process
_SCRIPT = textwrap.dedent("""
    import json, numpy as np, rlx_core as rlx
    def f(x, y):
        return rlx.tanh(x * 3.0 + y).sum(axis=-1)
    x = np.arange(12, dtype=np.float32).reshape(3, 4) / 10
    exe = rlx.compile(f, x, x, target="cpu", record=False)
    g = rlx.jit(f, target="cpu")
    print(json.dumps({"cache": exe.program.info["cache"], "exe": np.asarray(exe(x, x)).tolist(),
                      "jit": np.asarray(g(x, x)).tolist(), "module": g.cache.module_path}))
""")


def _run(cache_dir: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "RLX_CACHE_DIR": str(cache_dir), "RLX_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-c", _SCRIPT], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=300)


def _damage(path: Path, how: str) -> None:
    data = path.read_bytes()
    path.write_bytes({"half": data[:len(data) // 2], "garbage": os.urandom(len(data)),
                      "empty": b""}[how])


@pytest.fixture(scope="module")
def warm_cache(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    root = tmp_path_factory.mktemp("warm") / "cache"
    res = _run(root)
    assert res.returncode == 0, res.stderr
    return root, json.loads(res.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("how", ["half", "garbage", "empty"])
def test_a_damaged_shared_object_is_rebuilt(how: str, warm_cache, tmp_path: Path) -> None:
    """Every .so and .o in the cache damaged: the next process rebuilds them and answers right
    (before the fix: SIGBUS for a truncated file, a raw OSError for the others)."""
    warm, first = warm_cache
    root = tmp_path / "cache"
    shutil.copytree(warm, root)
    # truncated: the objects too (each layer verifies); otherwise the shared objects only
    kinds = (".so", ".o") if how == "half" else (".so",)
    damaged = sorted(p for p in root.iterdir() if p.suffix in kinds)
    assert len(damaged) >= 2  # the program and the module (and their objects)
    for p in damaged:
        _damage(p, how)
    res = _run(root)
    assert res.returncode == 0, f"rc={res.returncode}\n{res.stderr[-3000:]}"
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert out["cache"] == "miss"  # the damaged program was not trusted
    np.testing.assert_allclose(out["exe"], first["exe"], rtol=1e-6)
    np.testing.assert_allclose(out["jit"], first["jit"], rtol=1e-6)
    assert len(list((root / "quarantine").glob("*.why"))) == len(damaged)
    for p in damaged:  # rebuilt, and matching its record again
        assert verified_files.lookup(p)


def test_a_verified_file_that_does_not_load_is_rebuilt(tmp_path: Path, monkeypatch) -> None:
    """A foreign file with a matching record (dlopen fails): quarantined and built again."""
    monkeypatch.setenv("RLX_CACHE_DIR", str(tmp_path))
    real_build = cached_build.build_shared
    swapped: list[Path] = []

    def build_then_swap(*a, **k):
        built = real_build(*a, **k)
        if not swapped:  # the first build's file is replaced by a foreign one, record and all
            tmp = tmp_path / "foreign.tmp"
            tmp.write_bytes(b"\x7fELF but not really" * 10)
            verified_files.publish(tmp, built.path)
            swapped.append(built.path)
        return built

    monkeypatch.setattr(cached_build, "build_shared", build_then_swap)
    x = np.arange(4, dtype=np.float32)
    exe = rlx.compile(lambda a: a * 5.0 + 0.25, x, target="cpu", record=False)
    np.testing.assert_allclose(exe(x), x * 5 + 0.25)
    assert swapped and verified_files.lookup(swapped[0])
    assert len(list((tmp_path / "quarantine").glob("*.why"))) == 1


def test_a_library_that_does_not_load_is_a_typed_error(tmp_path: Path) -> None:
    from rlx_core.targets.cpu.runtime import LibraryLoadError, load_library

    bad = tmp_path / "foreign.so"
    bad.write_bytes(b"\x7fELF but not really" * 10)
    with pytest.raises(LibraryLoadError) as info:
        load_library(str(bad))
    assert info.value.code == "RLX-R015" and info.value.hint


def test_every_load_failure_of_the_program_is_typed(tmp_path: Path, monkeypatch) -> None:
    """dlopen failing every time (a missing library it links against): RLX-R015 from compile,
    RLX-R012 from @rlx.jit - after one rebuild, never a raw OSError."""
    monkeypatch.setenv("RLX_CACHE_DIR", str(tmp_path))

    real = ctypes.CDLL

    def refuse(path, *a, **k):  # only what was built into the cache (BLAS still loads)
        if str(path).startswith(str(tmp_path)):
            raise OSError(f"{path}: cannot open shared object file")
        return real(path, *a, **k)

    monkeypatch.setattr(ctypes, "CDLL", refuse)
    x = np.arange(6, dtype=np.float32)
    with pytest.raises(RlxError) as info:
        rlx.compile(lambda a: a * 7.0 - 0.5, x, target="cpu", record=False)
    assert info.value.code == "RLX-R015" and info.value.hint
    with pytest.raises(RlxError) as info:
        rlx.jit(lambda a: a * 9.0 - 0.5, target="cpu")(x)
    assert info.value.code == "RLX-R012" and info.value.hint


def test_stale_temporaries_are_cleaned(tmp_path: Path, monkeypatch) -> None:
    """A compile killed mid-way leaves ``<key>.o.XXXX.o.tmp``: deleted once it is older than
    any compile can take; a fresh one (a compile running now elsewhere) is left alone."""
    monkeypatch.setenv("RLX_CACHE_DIR", str(tmp_path))
    stale = tmp_path / "abc.o.1234.o.tmp"
    fresh = tmp_path / "def.so.5678.so.tmp"
    for p in (stale, fresh):
        p.write_bytes(b"half an object")
    old = time.time() - verified_files.STALE_TMP_SECONDS - 60
    os.utime(stale, (old, old))
    assert cache.cache_dir() == tmp_path
    assert not stale.exists() and fresh.exists()


@pytest.mark.parametrize("where", ["file", "proc", "read-only"])
def test_an_unusable_cache_folder_is_a_typed_error(where: str, tmp_path: Path,
                                                   monkeypatch) -> None:
    if where == "file":
        path = tmp_path / "a-file"
        path.write_text("not a folder")
    elif where == "proc":
        path = Path("/proc")
        if not path.is_dir():
            pytest.skip("no /proc on this machine")
    else:  # the process runs as root here, so a chmod would not stop it: inject the errno
        path = tmp_path / "ro"
        path.mkdir()

        def erofs(*a, **k):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS))

        monkeypatch.setattr(cache.tempfile, "mkstemp", erofs)
    monkeypatch.setenv("RLX_CACHE_DIR", str(path))
    with pytest.raises(cache.CacheDirError) as info:
        rlx.compile(lambda a: a + 1.0, np.zeros(3, np.float32), target="cpu", record=False)
    assert info.value.code == "RLX-R013" and "RLX_CACHE_DIR" in info.value.hint
    assert str(path) in info.value.message
    if where == "read-only":
        assert "read-only" in info.value.message


@pytest.mark.parametrize("err", [errno.ENOSPC, errno.EROFS])
def test_a_failed_cache_write_is_a_typed_error(err: int, tmp_path: Path, monkeypatch) -> None:
    """The disk fills (or turns read-only) after the folder was checked: the rename that
    publishes a build fails."""
    monkeypatch.setenv("RLX_CACHE_DIR", str(tmp_path))
    cache.cache_dir()

    def fail(*a, **k):
        raise OSError(err, os.strerror(err))

    monkeypatch.setattr(verified_files.os, "replace", fail)
    with pytest.raises(verified_files.CacheWriteError) as info:
        cached_build.build_shared("int rlx_cache_probe_b(void) { return 3; }\n")
    assert info.value.code == "RLX-R014" and info.value.hint
    assert ("disk is full" if err == errno.ENOSPC else "read-only") in info.value.message
    monkeypatch.undo()
    assert not list(tmp_path.glob("*.tmp"))  # nothing half-written is left behind


def test_a_compiler_that_cannot_write_is_a_typed_error(tmp_path: Path, monkeypatch) -> None:
    """The compiler itself hits the full disk: a cache error, not 'a renderer bug'."""
    cc = tmp_path / "fullcc"
    real = shutil.which(os.environ.get("RLX_CC") or "cc")
    cc.write_text(f'#!/bin/sh\ncase " $* " in *" -o "*) '
                  f'echo "fatal error: error writing to /x: No space left on device" >&2; '
                  f'exit 1;; esac\nexec {real} "$@"\n')
    cc.chmod(0o755)
    monkeypatch.setenv("RLX_CACHE_DIR", str(tmp_path / "cache"))
    comp = toolchain.find_compiler()
    full = dataclasses.replace(comp, path=str(cc))  # the probed flags, the failing compiler
    with pytest.raises(verified_files.CacheWriteError) as info:
        cached_build.build_shared("int rlx_cache_probe_c(void) { return 5; }\n", compiler=full)
    assert info.value.code == "RLX-R014" and "No space left" in info.value.message


@pytest.mark.parametrize("text", ["", "{", "[]", '{"opt_flags": 5}', '"x"'])
def test_a_damaged_probe_record_is_probed_again(text: str, tmp_path: Path, monkeypatch) -> None:
    """The compiler probe's JSON emptied, cut or of the wrong shape: probed again, no raw
    TypeError/KeyError."""
    monkeypatch.setenv("RLX_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(toolchain, "_COMPILERS", {})
    comp = toolchain.find_compiler()
    (probe,) = tmp_path.glob("probe-*.json")
    probe.write_text(text)
    monkeypatch.setattr(toolchain, "_COMPILERS", {})
    monkeypatch.setattr(toolchain, "_probe", lambda path, version: comp)  # (no real re-probe)
    assert toolchain.find_compiler() == comp
    assert json.loads(probe.read_text())["opt_flags"] == list(comp.opt_flags)


def test_a_cache_folder_deleted_mid_process_is_made_again(tmp_path: Path, monkeypatch) -> None:
    root = tmp_path / "cache"
    monkeypatch.setenv("RLX_CACHE_DIR", str(root))
    cached_build.build_shared("int rlx_cache_probe_d(void) { return 1; }\n")
    shutil.rmtree(root)  # `rm -rf ~/.cache/rlx` while a notebook runs
    built = cached_build.build_shared("int rlx_cache_probe_d(void) { return 1; }\n")
    assert not built.cache_hit and verified_files.lookup(built.path)


def _mount_read_only(src: Path, dst: Path) -> str:
    """A read-only bind mount of ``src`` at ``dst`` ("" when done, else why it cannot be)."""
    dst.mkdir()
    for cmd in (["mount", "--bind", str(src), str(dst)],
                ["mount", "-o", "remount,ro,bind", str(dst)]):
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
        except OSError as err:
            return str(err)
        if r.returncode != 0:
            subprocess.run(["umount", str(dst)], capture_output=True, timeout=30)
            return r.stderr.strip() or f"{cmd[0]} exited {r.returncode}"
    return ""


def test_a_filled_read_only_cache_is_used(warm_cache, tmp_path: Path) -> None:
    """A warm cache on a read-only mount (a container image, a cluster share): a new process
    compiles and jits from it without writing there, says so once (RLX-R016), and builds what
    it lacks into a private folder."""
    root, before = warm_cache
    ro = tmp_path / "ro"
    why = _mount_read_only(root, ro)
    if why:
        pytest.skip(f"no read-only bind mount here ({why}); the injected variant below runs")
    try:
        env = {**os.environ, "RLX_CACHE_DIR": str(ro), "RLX_NUM_THREADS": "1",
               "TMPDIR": str(tmp_path)}
        res = subprocess.run([sys.executable, "-c", _SCRIPT], env=env, cwd=ROOT,
                             capture_output=True, text=True, timeout=300)
        assert res.returncode == 0, res.stderr
        after = json.loads(res.stdout.strip().splitlines()[-1])
        assert after["exe"] == before["exe"] and after["jit"] == before["jit"]
        assert after["cache"] == "hit", after  # the read-only entry, not a rebuild
        assert "RLX-R016" in res.stderr and str(ro) in res.stderr
        assert "RLX-R013" not in res.stderr
    finally:
        subprocess.run(["umount", str(ro)], capture_output=True, timeout=30)


def test_a_read_only_cache_serves_hits_and_builds_misses_aside(tmp_path: Path,
                                                                monkeypatch) -> None:
    """The same, with EROFS injected for every write into the folder: hits come from it, a
    miss is built into the private folder, nothing is written into the read-only one."""
    base = tmp_path / "cache"
    monkeypatch.setenv("RLX_CACHE_DIR", str(base))
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(cache.tempfile, "tempdir", None)  # re-read TMPDIR
    old = cached_build.build_shared("int rlx_cache_probe_ro(void) { return 4; }\n")
    cache._READY.clear()
    verified_files.forget()
    listing = sorted(p.name for p in base.iterdir())
    real_mkstemp = cache.tempfile.mkstemp

    def erofs(*a, **k):
        if Path(k.get("dir") or a[2]).resolve() == base.resolve():
            raise OSError(errno.EROFS, os.strerror(errno.EROFS))
        return real_mkstemp(*a, **k)

    monkeypatch.setattr(cache.tempfile, "mkstemp", erofs)
    with pytest.warns(cache.CacheReadOnlyWarning, match="RLX-R016"):
        hit = cached_build.build_shared("int rlx_cache_probe_ro(void) { return 4; }\n")
    miss = cached_build.build_shared("int rlx_cache_probe_ro2(void) { return 5; }\n")
    assert hit.cache_hit and hit.path == old.path
    assert not miss.cache_hit and miss.path.parent != base and verified_files.lookup(miss.path)
    assert ctypes.CDLL(str(miss.path)).rlx_cache_probe_ro2() == 5
    assert sorted(p.name for p in base.iterdir()) == listing  # nothing written there
    cache._READ_ONLY.clear()


def test_jit_says_when_it_falls_back_to_numpy(tmp_path: Path, monkeypatch) -> None:
    """An unusable cache folder stops the cpu target: @rlx.jit's default falls back to the
    numpy reference with RLX-R017 (and the R013 reason), never silently."""
    from rlx_core import api

    bad = tmp_path / "a-file"
    bad.write_text("not a folder")
    monkeypatch.setenv("RLX_CACHE_DIR", str(bad))
    monkeypatch.setattr(toolchain, "_COMPILERS", {})  # probe again: it needs the folder
    api.default_jit_target.cache_clear()
    try:
        x = np.arange(3, dtype=np.float32)
        with pytest.warns(api.JitFallbackWarning, match="RLX-R017") as got:
            out = rlx.jit(lambda a: a * 2.0)(x)
        assert "RLX-R013" in str(got[0].message) and str(bad) in str(got[0].message)
        np.testing.assert_array_equal(np.asarray(out), x * 2)
    finally:
        api.default_jit_target.cache_clear()
