"""The hanging 'compiler' the cpu toolchain's and cached builds' timeout tests share, and the
check that a timeout stopped every process it started."""

from __future__ import annotations

import time
from pathlib import Path

from rlx_core.targets.cpu import toolchain


def hanging_compiler(tmp_path: Path, version: bool = False) -> tuple[toolchain.Compiler, Path]:
    """A 'compiler' whose driver starts a child that outlives it, like gcc's cc1, and hangs
    (``version``: except for ``--version``); with the file its child's pid is written to."""
    pidfile = tmp_path / "child.pid"
    script = tmp_path / "slowcc"
    answer = 'if [ "$1" = --version ]; then echo "slowcc 1"; exit 0; fi\n' if version else ""
    script.write_text(f"#!/bin/sh\n{answer}sleep 60 &\necho $! > {pidfile}\nwait\n")
    script.chmod(0o755)
    return toolchain.Compiler(str(script), "slowcc 1", (), False), pidfile


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except OSError:
        return False
    return state != "Z"  # a zombie waiting for its reaper runs nothing


def assert_stopped(pidfile: Path) -> None:
    """The hanging compiler's child (its pid in ``pidfile``) is gone."""
    child = int(pidfile.read_text())
    for _ in range(50):  # the kill is synchronous; the reaper may take a moment
        if not _alive(child):
            break
        time.sleep(0.05)
    assert not _alive(child), "the compiler's child process outlived the timeout"
