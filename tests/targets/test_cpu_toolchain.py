"""CPU toolchain: disk cache across processes, the no-compiler path, OpenMP, probe timeouts."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import rlx_core as rlx
from rlx_core.errors import TargetUnavailableError
from rlx_core.targets.cpu import team, toolchain
from rlx_core.targets.cpu.target import CpuTarget
from tests.targets.hanging_compiler import assert_stopped, hanging_compiler

ROOT = Path(__file__).resolve().parents[2]
_HAS_CC = CpuTarget().available()[0]
needs_cc = pytest.mark.skipif(not _HAS_CC, reason=f"no C compiler: {CpuTarget().available()[1]}")

_SCRIPT = textwrap.dedent("""
    import json, numpy as np, rlx_core as rlx
    def f(x, y):
        return rlx.tanh(x * 2.0 + y).sum(axis=-1)
    x = np.arange(12, dtype=np.float32).reshape(3, 4) / 10
    exe = rlx.compile(f, x, x, target="cpu", record=False)
    print(json.dumps({"cache": exe.program.info["cache"], "so": exe.program.info["so_path"],
                      "out": np.asarray(exe(x, x)).tolist()}))
""")


def _wrapper(tmp: Path, log: Path, reject_openmp: bool = False) -> Path:
    """A compiler wrapper that logs every invocation (and can pretend to lack OpenMP)."""
    cc = tmp / "logcc"
    refuse = 'case " $* " in *" -fopenmp "*) exit 1;; esac\n' if reject_openmp else ""
    cc.write_text(f'#!/bin/sh\necho "$*" >> "{log}"\n{refuse}exec cc "$@"\n')
    cc.chmod(cc.stat().st_mode | stat.S_IEXEC)
    return cc


def _run(env: dict[str, str]) -> dict:
    import json

    res = subprocess.run([sys.executable, "-c", _SCRIPT], env=env, cwd=ROOT, capture_output=True,
                         text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout.strip().splitlines()[-1])


@needs_cc
def test_second_process_compiles_nothing(tmp_path: Path) -> None:
    log = tmp_path / "cc.log"
    env = {**os.environ, "RLX_CACHE_DIR": str(tmp_path / "cache"),
           "RLX_CC": str(_wrapper(tmp_path, log))}
    first = _run(env)
    assert first["cache"] == "miss"
    compiles = [ln for ln in log.read_text().splitlines() if "--version" not in ln]
    assert any(first["so"].rsplit("/", 1)[-1].split(".")[0] in ln for ln in compiles)
    log.write_text("")
    second = _run(env)
    assert second["cache"] == "hit" and second["so"] == first["so"]
    # only `cc --version` ran (it is part of the cache key); no probe, no compile
    assert all("--version" in ln for ln in log.read_text().splitlines())
    assert second["out"] == first["out"]
    x = np.arange(12, dtype=np.float32).reshape(3, 4) / 10
    np.testing.assert_allclose(second["out"], np.tanh(x * 3).sum(-1), rtol=1e-5)


def test_no_compiler_is_a_typed_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RLX_CC", "/nonexistent/cc")
    ok, why = CpuTarget().available()
    assert not ok and "/nonexistent/cc" in why
    with pytest.raises(TargetUnavailableError) as info:
        toolchain.find_compiler()
    assert info.value.code == "RLX-X001" and info.value.hint
    with pytest.raises(TargetUnavailableError, match="not available"):
        rlx.compile(lambda x: x + 1.0, np.zeros(3, np.float32), target="cpu")


def test_pyodide_reports_unavailable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "platform", "emscripten")
    ok, why = CpuTarget().available()
    assert not ok and "Pyodide" in why


@needs_cc
def test_openmp_flag_and_its_absence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RLX_CACHE_DIR", str(tmp_path / "cache"))
    toolchain._COMPILERS.clear()
    comp = toolchain.find_compiler()
    if comp.openmp:
        assert "-fopenmp" in comp.flags
    x = np.ones((256, 256), np.float32)
    exe = rlx.compile(lambda a: rlx.exp(a) * 2.0, x, target="cpu", record=False)
    assert exe.program.info["openmp"] is comp.openmp
    if comp.openmp:  # the kernel is big enough to be spread over the call's thread team
        src = "".join(exe.sources.values())  # its chunks claimed from the call's counter
        assert "rlx_team_take(rlx_work, " in src and "rlx_team_done_last(" in src
        assert any(m in exe.program.info["source"] for m in team.REGION_MARKS)
    # a compiler without OpenMP: still builds, serial, and says so
    monkeypatch.setenv("RLX_CC", str(_wrapper(tmp_path, tmp_path / "log", reject_openmp=True)))
    toolchain._COMPILERS.clear()
    exe2 = rlx.compile(lambda a: rlx.exp(a) * 2.0 + 1.0, x, target="cpu", record=False)
    info = exe2.program.info
    assert info["openmp"] is False and "-fopenmp" not in info["flags"]
    assert any("OpenMP" in n for n in info["notes"])
    np.testing.assert_allclose(exe2(x), np.exp(x) * 2 + 1, rtol=1e-6)
    toolchain._COMPILERS.clear()


@pytest.mark.parametrize("probe", ["version", "flags", "defines"])
def test_probe_timeout_is_typed_and_stops_every_compiler_process(
        probe: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A probe past PROBE_TIMEOUT_S stops the compiler's whole group, as a build does, and is an
    error: a test build that timed out said nothing about the flag, and a 'rejected' answer
    would be cached in the probe record (no -march=native, no OpenMP, for good)."""
    monkeypatch.setattr(toolchain, "PROBE_TIMEOUT_S", 1.0)
    comp, pidfile = hanging_compiler(tmp_path)
    run = {"version": lambda: toolchain._version(comp.path),
           "flags": lambda: toolchain._try(comp.path, ("-O2",), "int x;\n"),
           "defines": lambda: toolchain._defines(comp.path, ())}[probe]
    with pytest.raises(toolchain.CCompileTimeoutError) as info:
        run()
    assert info.value.code == "RLX-X005" and "1 s probing" in str(info.value)
    assert_stopped(pidfile)


def test_probe_timeout_caches_no_probe_record(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """find_compiler on a compiler whose test builds hang: the error, and no record in the
    cache."""
    comp, pidfile = hanging_compiler(tmp_path, version=True)
    monkeypatch.setattr(toolchain, "PROBE_TIMEOUT_S", 1.0)
    monkeypatch.setenv("RLX_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("RLX_CC", comp.path)
    with pytest.raises(toolchain.CCompileTimeoutError):
        toolchain.find_compiler()
    assert_stopped(pidfile)
    assert not list((tmp_path / "cache").rglob("probe-*")), "a timed-out probe was cached"
