"""External tools run so that nothing they start outlives a timeout (targets/tool_process.py)."""

from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path

import pytest

from rlx_core.targets import tool_process
from rlx_core.targets.tool_process import ToolTimeoutError, run_group, run_tool

TARGETS = Path(tool_process.__file__).resolve().parent


def _hanging_tool(tmp_path: Path) -> tuple[Path, Path]:
    """A 'tool' that starts a child which would outlive it (like a driver's cc1) and hangs."""
    pidfile = tmp_path / "child.pid"
    script = tmp_path / "slowtool"
    script.write_text(f"#!/bin/sh\nsleep 60 &\necho $! > {pidfile}\nwait\n")
    script.chmod(0o755)
    return script, pidfile


def _stopped(pidfile: Path) -> bool:
    pid = int(pidfile.read_text())
    for _ in range(50):  # the kill is synchronous; the child's reaper may take a moment
        try:
            state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
        except OSError:
            return True
        if state == "Z":  # a zombie runs nothing
            return True
        time.sleep(0.05)
    return False


def test_run_tool_timeout_is_typed_and_stops_the_whole_group(tmp_path: Path) -> None:
    script, pidfile = _hanging_tool(tmp_path)
    with pytest.raises(ToolTimeoutError) as info:
        run_tool([str(script)], timeout=1.0, what="slowtool")
    assert info.value.code == "RLX-X006" and "slowtool ran past 1 s" in str(info.value)
    assert info.value.hint
    assert _stopped(pidfile), "the tool's child process outlived the timeout"


def test_run_group_timeout_raises_timeout_expired_after_the_group_is_gone(
        tmp_path: Path) -> None:
    """For callers with their own "did not finish" error (emulators, simulators)."""
    script, pidfile = _hanging_tool(tmp_path)
    with pytest.raises(subprocess.TimeoutExpired):
        run_group([str(script)], timeout=1.0)
    assert _stopped(pidfile)


def test_run_group_is_subprocess_run_with_output_captured(tmp_path: Path) -> None:
    done = run_group(["sh", "-c", "cat; echo err >&2; exit 3"], timeout=30, input="in\n",
                     cwd=tmp_path)
    assert (done.returncode, done.stdout, done.stderr) == (3, "in\n", "err\n")
    raw = run_group(["sh", "-c", "cat"], timeout=30, input=b"\x00\xff", text=False)
    assert raw.stdout == b"\x00\xff"
    with pytest.raises(subprocess.CalledProcessError):
        run_group(["sh", "-c", "exit 1"], timeout=30, check=True)


def test_no_target_runs_a_tool_past_the_group_kill() -> None:
    """Every target's compiler, emulator and simulator runs go through tool_process: a bare
    subprocess.run(timeout=) would kill only the driver and leave its children on a core."""
    bare = [f"{p.relative_to(TARGETS)}:{i}" for p in sorted(TARGETS.rglob("*.py"))
            if p.name != "tool_process.py"
            for i, line in enumerate(p.read_text().splitlines(), 1)
            if re.search(r"subprocess\.(run|call|check_call|check_output)\(", line)]
    assert not bare, bare
