"""The prebuilt kernel library (rlx_core/targets/cpu/kernel_library.py): the blocked conv's
rlx_cb_conv2 compiled once per compiler and ISA into a cached object that programs link. A
second program with other shapes reuses the object (no compiler run for it), its results are
bit for bit those of the same program with the kernel compiled inline, a damaged object is
built again, concurrent builds compile once, and the forced AVX2 path has its own object."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest

import rlx_core as rlx
from rlx_core import nn
from rlx_core.targets.cpu import cached_build, kernel_library, toolchain
from rlx_core.targets.cpu.target import CpuTarget
from tests.targets.checks import rel_error
from tests.targets.simd import skip_unless_simd

cpu_ok, cpu_why = CpuTarget().available()
pytestmark = pytest.mark.skipif(not cpu_ok, reason=f"cpu target unavailable: {cpu_why}")

TINY = "__attribute__((visibility(\"hidden\"))) int rlx_kl_probe(int x) { return x + 1; }\n"


def _net(c: int, o: int, stride: int):
    """A 3x3 conv (bias, ReLU) then a strided 3x3 conv and a 1x1 conv, filters as parameters:
    a blocked (or Winograd) conv each, so the program links rlx_cb_conv2."""
    rng = np.random.default_rng(c * 100 + o)
    w1 = (rng.standard_normal((o, c, 3, 3)) * 0.2).astype(np.float32)
    b1 = rng.standard_normal(o).astype(np.float32)
    w2 = (rng.standard_normal((64, o, 3, 3)) * 0.1).astype(np.float32)
    w3 = (rng.standard_normal((32, 64, 1, 1)) * 0.1).astype(np.float32)

    def f(x):
        h = nn.relu(nn.conv2d(x, rlx.param(w1, "w1"), rlx.param(b1, "b1"), padding=(1, 1)))
        h = nn.conv2d(h, rlx.param(w2, "w2"), None, padding=(1, 1), stride=(stride, stride))
        return nn.conv2d(h, rlx.param(w3, "w3"), None)

    x = rng.standard_normal((2, c, 14, 14)).astype(np.float32)
    x[0, 0, 3, 4], x[1, 1, 5, 5] = np.nan, np.inf
    return f, x


def _objects(cache: Path) -> list[Path]:
    return sorted(cache.glob("*.o"))


def _fresh_cache(monkeypatch: pytest.MonkeyPatch, path: Path) -> Path:
    monkeypatch.setenv("RLX_CACHE_DIR", str(path))
    return path


@pytest.mark.slow
def test_built_once_reused_bit_identical_and_per_isa(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Two programs of other shapes: the first compiles the object, the second only links it,
    as does a specialization cache module (@rlx.jit); they give the bits of the kernel
    compiled inline (RLX_CPU_KERNEL_LIBRARY=0), NaN and inf included, and their own C only declares rlx_cb_conv2. Forced to AVX2 (on an AVX-512
    host), the ISA path is in the object's key: a second object, linked, right results."""
    skip_unless_simd()
    monkeypatch.setenv("RLX_CONV_BLOCKED", "all")
    cache = _fresh_cache(monkeypatch, tmp_path / "cache")
    before = cached_build.RUN_COUNTS["compile"]
    got = {}
    for c, o, s in ((16, 32, 1), (24, 40, 2)):
        f, x = _net(c, o, s)
        exe = rlx.compile(f, x, target="cpu", record=False)
        info = exe.program.info
        assert kernel_library.EXTERN_DEFINE in info["source"]
        assert "rlx-conv-blocked" in {k["impl"] for k in info["kernels"].values()}
        got[c] = np.asarray(exe(x))
        assert cached_build.RUN_COUNTS["compile"] == before + 1  # the object, once
        assert len(_objects(cache)) == 1
        want = np.asarray(rlx.compile(f, x, target="numpy", record=False)(x))
        np.testing.assert_array_equal(np.isnan(got[c]), np.isnan(want))
        keep = np.isfinite(want)
        assert np.isnan(want).any() and keep.mean() > 0.2
        assert rel_error(got[c][keep], want[keep]) < 1e-5
    f, x = _net(24, 40, 2)
    # the specialization cache's module links the same object (once per module)
    jf = rlx.jit(f, target="cpu")
    np.testing.assert_array_equal(np.asarray(jf(x)).view(np.uint32), got[24].view(np.uint32))
    assert jf.cache is not None
    assert jf.cache.specializations[0].program.kernel_libraries == (kernel_library.CONV_BLOCKED,)
    assert kernel_library.build(kernel_library.CONV_BLOCKED, toolchain.find_compiler()).cache_hit
    before = cached_build.RUN_COUNTS["compile"] - 1  # (the module's own units counted)
    monkeypatch.setenv("RLX_CPU_KERNEL_LIBRARY", "0")
    exe = rlx.compile(f, x, target="cpu", record=False)
    assert kernel_library.EXTERN_DEFINE not in exe.program.info["source"]
    np.testing.assert_array_equal(got[24].view(np.uint32), np.asarray(exe(x)).view(np.uint32))
    assert cached_build.RUN_COUNTS["compile"] == before + 1  # inline: no object compiled
    if not toolchain.find_compiler().avx512:
        return
    monkeypatch.delenv("RLX_CPU_KERNEL_LIBRARY")
    objects = len(_objects(cache))  # (the module's units are objects too)
    monkeypatch.setenv("RLX_CPU_ISA", "avx2")
    exe = rlx.compile(f, x, target="cpu", record=False)
    assert "-mno-avx512f" in exe.program.info["flags"]
    assert len(_objects(cache)) == objects + 1
    assert cached_build.RUN_COUNTS["compile"] == before + 2
    avx2 = np.asarray(exe(x))
    keep = np.isfinite(got[24])
    np.testing.assert_array_equal(np.isnan(avx2), np.isnan(got[24]))
    assert rel_error(avx2[keep], got[24][keep]) < 1e-5


def test_a_damaged_object_is_built_again(tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Overwritten bytes (same size) or a truncated object fail the record: quarantined and
    compiled again, never linked."""
    _fresh_cache(monkeypatch, tmp_path / "cache")
    monkeypatch.setattr(kernel_library, "source", lambda name: TINY)
    comp = toolchain.find_compiler()
    first = kernel_library.build(kernel_library.CONV_BLOCKED, comp)
    assert not first.cache_hit
    assert kernel_library.build(kernel_library.CONV_BLOCKED, comp).cache_hit
    good = first.path.read_bytes()
    for damage in (b"\0" * len(good), good[: len(good) // 2]):
        first.path.write_bytes(damage)
        again = kernel_library.build(kernel_library.CONV_BLOCKED, comp)
        assert not again.cache_hit and again.path == first.path
        assert again.path.read_bytes() == good
    assert len(list((first.path.parent / "quarantine").glob("*.o.*.why"))) == 2


def test_concurrent_builds_compile_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Threads that miss together: one compiles under the lock, the others find its object."""
    _fresh_cache(monkeypatch, tmp_path / "cache")
    monkeypatch.setattr(kernel_library, "source", lambda name: TINY.replace("+ 1", "+ 2"))
    comp = toolchain.find_compiler()
    before = cached_build.RUN_COUNTS["compile"]
    results: list[cached_build.BuildResult] = []
    threads = [threading.Thread(target=lambda: results.append(
        kernel_library.build(kernel_library.CONV_BLOCKED, comp))) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 4 and len({r.path for r in results}) == 1
    assert sum(not r.cache_hit for r in results) == 1
    assert cached_build.RUN_COUNTS["compile"] == before + 1


def test_unknown_library_and_the_switch(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(KeyError, match="no kernel library"):
        kernel_library.source("nope")
    monkeypatch.setenv("RLX_CPU_KERNEL_LIBRARY", "0")
    assert not kernel_library.enabled()
    monkeypatch.delenv("RLX_CPU_KERNEL_LIBRARY")
    assert kernel_library.enabled()


PROGRAM = ("__attribute__((visibility(\"hidden\"))) int rlx_kl_probe(int x);\n"
           "int rlx_kl_use(int x) { return 2 * rlx_kl_probe(x); }\n")


def _leftovers(cache: Path) -> list[str]:
    """What a build left in the cache besides its records and sources: objects, shared
    objects, temporaries."""
    return sorted(p.name for p in cache.iterdir() if p.suffix in (".o", ".so", ".tmp"))


def _lock_free(cache: Path) -> bool:
    import fcntl

    for path in cache.glob("lib-*.lock"):
        with open(path, "a+b") as f:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return False
    return True


def test_the_library_compiles_while_the_program_does(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """On a miss the library's compiler is started before the program's and still running when
    the program's compiler runs (-c, then one link); the program calls it. Found in the cache,
    the library is linked in the program's one command, as before the overlap."""
    import ctypes

    cache = _fresh_cache(monkeypatch, tmp_path / "cache")
    monkeypatch.setattr(kernel_library, "source", lambda name: TINY.replace("+ 1", "+ 3"))
    comp = toolchain.find_compiler()
    lib = kernel_library.pending(kernel_library.CONV_BLOCKED, comp)
    seen: list[tuple[bool, tuple[str, ...]]] = []
    real = cached_build.run_group

    def spy(cmd, **kw):
        seen.append((lib.running, tuple(cmd)))
        return real(cmd, **kw)

    monkeypatch.setattr(cached_build, "run_group", spy)
    before = cached_build.RUN_COUNTS["compile"]
    built = cached_build.build_shared(PROGRAM, compiler=comp, objects=(lib,))
    assert not built.cache_hit and cached_build.RUN_COUNTS["compile"] == before + 1
    assert [(running, "-c" in cmd) for running, cmd in seen] == [(True, True), (False, False)]
    assert str(lib.result().path) in built.command  # the link
    assert ctypes.CDLL(str(built.path)).rlx_kl_use(4) == 14
    assert _lock_free(cache) and not [n for n in _leftovers(cache) if n.endswith(".tmp")]
    # cached library, another program: one compiler command with the object on it
    seen.clear()
    again = cached_build.build_shared(PROGRAM.replace("2 *", "3 *"), compiler=comp,
                                      objects=(kernel_library.pending(
                                          kernel_library.CONV_BLOCKED, comp),))
    assert len(seen) == 1 and "-c" not in seen[0][1] and str(lib.result().path) in seen[0][1]
    assert ctypes.CDLL(str(again.path)).rlx_kl_use(4) == 21
    assert cached_build.RUN_COUNTS["compile"] == before + 1


def test_a_failing_library_compile_is_a_typed_error_and_leaves_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A library the compiler rejects while the program compiles: CCompileError (RLX-X003) with
    the compiler's message; no object, program or temporary in the cache, the lock released.
    A rejected program stops the library's compile the same way, its own error raised."""
    cache = _fresh_cache(monkeypatch, tmp_path / "cache")
    comp = toolchain.find_compiler()
    monkeypatch.setattr(kernel_library, "source",
                        lambda name: "int rlx_kl_broken(void) { return rlx_no_such_name; }\n")
    with pytest.raises(cached_build.CCompileError) as err:
        cached_build.build_shared(PROGRAM, compiler=comp,
                                  objects=(kernel_library.pending(kernel_library.CONV_BLOCKED,
                                                                  comp),))
    assert err.value.code == "RLX-X003" and "rlx_no_such_name" in err.value.message
    assert _leftovers(cache) == [] and _lock_free(cache)
    # the program rejected while the (good) library compiles: the library is stopped
    monkeypatch.setattr(kernel_library, "source", lambda name: TINY)
    lib = kernel_library.pending(kernel_library.CONV_BLOCKED, comp)
    with pytest.raises(cached_build.CCompileError) as err:
        cached_build.build_shared(
            PROGRAM + "int rlx_kl_bad(void) { return rlx_undeclared; }\n", compiler=comp,
            objects=(lib,))
    assert "rlx_undeclared" in err.value.message and not lib.running
    assert _leftovers(cache) == [] and _lock_free(cache)


def test_an_interrupted_build_stops_the_library_compile(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C while the program compiles: the library's compiler (its process group) is stopped
    and nothing half-written stays; a later build compiles and links it."""
    import ctypes

    cache = _fresh_cache(monkeypatch, tmp_path / "cache")
    monkeypatch.setattr(kernel_library, "source", lambda name: TINY.replace("+ 1", "+ 5"))
    comp = toolchain.find_compiler()
    lib = kernel_library.pending(kernel_library.CONV_BLOCKED, comp)
    pids: list[int] = []

    def interrupted(cmd, **kw):
        assert lib.running and lib.pid is not None
        pids.append(lib.pid)
        raise KeyboardInterrupt

    monkeypatch.setattr(cached_build, "run_group", interrupted)
    with pytest.raises(KeyboardInterrupt):
        cached_build.build_shared(PROGRAM, compiler=comp, objects=(lib,))
    assert not lib.running and lib.pid is None and len(pids) == 1
    import os

    with pytest.raises(ProcessLookupError):  # the compiler was killed and reaped
        os.kill(pids[0], 0)
    assert _leftovers(cache) == [] and _lock_free(cache)
    monkeypatch.undo()
    _fresh_cache(monkeypatch, cache)
    monkeypatch.setattr(kernel_library, "source", lambda name: TINY.replace("+ 1", "+ 5"))
    built = cached_build.build_shared(PROGRAM, compiler=comp, objects=(
        kernel_library.pending(kernel_library.CONV_BLOCKED, comp),))
    assert ctypes.CDLL(str(built.path)).rlx_kl_use(1) == 12


def test_a_held_lock_defers_the_compile_to_the_wait(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Another build holds the library's lock: start() runs no compiler; result() waits for the
    lock, then finds the holder's object (no second compile)."""
    import fcntl

    cache = _fresh_cache(monkeypatch, tmp_path / "cache")
    monkeypatch.setattr(kernel_library, "source", lambda name: TINY.replace("+ 1", "+ 7"))
    comp = toolchain.find_compiler()
    holder = kernel_library.pending(kernel_library.CONV_BLOCKED, comp)
    holder.start()
    assert holder.running
    (lock,) = cache.glob("lib-*.lock")
    before = cached_build.RUN_COUNTS["compile"]
    waiter = kernel_library.pending(kernel_library.CONV_BLOCKED, comp)
    waiter.start()
    assert not waiter.running and not waiter.done
    assert cached_build.RUN_COUNTS["compile"] == before
    got: list[cached_build.BuildResult] = []
    t = threading.Thread(target=lambda: got.append(waiter.result()))
    t.start()
    t.join(0.2)
    assert t.is_alive()  # waiting on the lock
    first = holder.result()
    t.join(60)
    assert got and got[0].cache_hit and got[0].path == first.path and not first.cache_hit
    assert cached_build.RUN_COUNTS["compile"] == before
    with open(lock, "a+b") as f:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
