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
from rlx_core.targets.cpu import cache, toolchain
from rlx_core.targets.cpu.target import CpuTarget

ROOT = Path(__file__).resolve().parents[2]
_OK, _WHY = CpuTarget().available()
pytestmark = pytest.mark.skipif(not _OK, reason=f"no C compiler: {_WHY}")

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


@pytest.fixture(autouse=True)
def _fresh_cache_state():
    """Each test checks its own folder: forget what this process verified before."""
    cache._READY.clear()
    cache._VERIFIED.clear()
    yield
    cache._READY.clear()
    cache._VERIFIED.clear()


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
        assert cache.lookup(p)


def test_a_verified_file_that_does_not_load_is_rebuilt(tmp_path: Path, monkeypatch) -> None:
    """A foreign file with a matching record (dlopen fails): quarantined and built again."""
    monkeypatch.setenv("RLX_CACHE_DIR", str(tmp_path))
    real_build = toolchain.build_shared
    swapped: list[Path] = []

    def build_then_swap(*a, **k):
        built = real_build(*a, **k)
        if not swapped:  # the first build's file is replaced by a foreign one, record and all
            tmp = tmp_path / "foreign.tmp"
            tmp.write_bytes(b"\x7fELF but not really" * 10)
            cache.publish(tmp, built.path)
            swapped.append(built.path)
        return built

    monkeypatch.setattr(toolchain, "build_shared", build_then_swap)
    x = np.arange(4, dtype=np.float32)
    exe = rlx.compile(lambda a: a * 5.0 + 0.25, x, target="cpu", record=False)
    np.testing.assert_allclose(exe(x), x * 5 + 0.25)
    assert swapped and cache.lookup(swapped[0])
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
    old = time.time() - cache.STALE_TMP_SECONDS - 60
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

    monkeypatch.setattr(cache.os, "replace", fail)
    with pytest.raises(cache.CacheWriteError) as info:
        toolchain.build_shared("int rlx_cache_probe_b(void) { return 3; }\n")
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
    with pytest.raises(cache.CacheWriteError) as info:
        toolchain.build_shared("int rlx_cache_probe_c(void) { return 5; }\n", compiler=full)
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
    toolchain.build_shared("int rlx_cache_probe_d(void) { return 1; }\n")
    shutil.rmtree(root)  # `rm -rf ~/.cache/rlx` while a notebook runs
    built = toolchain.build_shared("int rlx_cache_probe_d(void) { return 1; }\n")
    assert not built.cache_hit and cache.lookup(built.path)
