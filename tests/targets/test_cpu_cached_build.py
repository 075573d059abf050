"""CPU cached builds: compiler errors with their lines, atomic cache files, build timeouts."""

from __future__ import annotations

import ctypes
from pathlib import Path

import pytest

from rlx_core.targets.cpu import cached_build, toolchain
from rlx_core.targets.cpu.target import CpuTarget
from tests.targets.hanging_compiler import assert_stopped, hanging_compiler

needs_cc = pytest.mark.skipif(not CpuTarget().available()[0],
                              reason=f"no C compiler: {CpuTarget().available()[1]}")


@needs_cc
def test_compiler_error_shows_output_and_lines(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RLX_CACHE_DIR", str(tmp_path))
    bad = "int ok(void) { return 1; }\nint broken(void) { return undefined_name; }\n"
    with pytest.raises(cached_build.CCompileError) as info:
        cached_build.build_shared(bad)
    text = str(info.value)
    assert info.value.code == "RLX-X003"
    assert "undefined_name" in text and ">     2 | int broken" in text


@needs_cc
def test_cache_files_are_written_atomically(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RLX_CACHE_DIR", str(tmp_path))
    res = cached_build.build_shared("int rlx_answer(void) { return 42; }\n")
    again = cached_build.build_shared("int rlx_answer(void) { return 42; }\n")
    assert not res.cache_hit and again.cache_hit and again.path == res.path
    assert not list(tmp_path.glob("*.tmp"))  # nothing half-written is left behind
    assert ctypes.CDLL(str(res.path)).rlx_answer() == 42


def test_compiler_timeout_is_typed_and_stops_every_compiler_process(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RLX_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(cached_build, "CC_TIMEOUT_S", 1.0)
    comp, pidfile = hanging_compiler(tmp_path)
    with pytest.raises(toolchain.CCompileTimeoutError) as info:
        cached_build.build_shared("int rlx_slow(void) { return 1; }\n", compiler=comp)
    assert info.value.code == "RLX-X005" and "1 s" in str(info.value)
    assert_stopped(pidfile)
    assert not list((tmp_path / "cache").rglob("*.so")), "a timed-out build left an object"
