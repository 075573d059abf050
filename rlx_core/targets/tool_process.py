"""Running an external tool (compiler, linker, emulator, simulator) so nothing it starts
outlives it.

``subprocess.run(..., timeout=)`` kills only the process it started: a compiler driver's
``cc1``/``as``, ``make``'s ``g++`` under verilator, or ``nvcc``'s ``cicc`` keep a core busy
after the timeout. Here every tool runs in its own session and, past its deadline or on an
interrupt, its whole process group is killed first.

- ``run_group``: like ``subprocess.run(capture_output=True)``; raises
  ``subprocess.TimeoutExpired`` (after the group is gone) for callers that turn a timeout into
  their own error (an emulator's "did not finish").
- ``run_tool``: the same, with a timeout raised as ``ToolTimeoutError`` (RLX-X006).
- ``start_group`` / ``wait_group``: the tool started now and waited for later (a compile that
  runs while the caller does other work), its output into a file.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Sequence
from typing import IO

from rlx_core.errors import RlxError


class ToolTimeoutError(RlxError):
    """An external tool (compiler, assembler, validator, emulator) ran past its deadline; it
    and every process it started were stopped."""

    code = "RLX-X006"


def stop_group(proc: subprocess.Popen) -> None:
    """Kill the tool's whole process group and reap the tool itself."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.communicate()


def run_group(cmd: Sequence[str], *, timeout: float, input: str | bytes | None = None,
              cwd: str | os.PathLike[str] | None = None, text: bool = True,
              check: bool = False) -> subprocess.CompletedProcess:
    """Run ``cmd`` in its own session with stdout and stderr captured (stdin is ``input`` or
    nothing). Past ``timeout`` seconds (``subprocess.TimeoutExpired``) or on an interrupt
    its whole process group is killed before the exception leaves; ``check`` raises
    ``subprocess.CalledProcessError`` on a non-zero exit, as ``subprocess.run`` does."""
    proc = subprocess.Popen(list(cmd), cwd=cwd, text=text, start_new_session=True,
                            stdin=subprocess.DEVNULL if input is None else subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        stdout, stderr = proc.communicate(input, timeout=timeout)
    except BaseException:  # TimeoutExpired, KeyboardInterrupt: leave no tool behind
        stop_group(proc)
        raise
    done = subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)
    if check:
        done.check_returncode()
    return done


def start_group(cmd: Sequence[str], *, output: IO[bytes]) -> subprocess.Popen:
    """Start ``cmd`` in its own session (stdin closed) without waiting for it; stdout and stderr
    go to ``output``, a file, since a pipe nobody reads while the caller works could fill and
    stall the tool. ``wait_group`` waits for it; ``stop_group`` kills it."""
    return subprocess.Popen(list(cmd), start_new_session=True, stdin=subprocess.DEVNULL,
                            stdout=output, stderr=subprocess.STDOUT)


def wait_group(proc: subprocess.Popen, *, timeout: float) -> int:
    """The exit status of a tool ``start_group`` started. Past ``timeout`` seconds
    (``subprocess.TimeoutExpired``) or on an interrupt its whole process group is killed before
    the exception leaves, as in ``run_group``."""
    try:
        return proc.wait(timeout=timeout)
    except BaseException:
        stop_group(proc)
        raise


def run_tool(cmd: Sequence[str], *, timeout: float, what: str | None = None,
             hint: str | None = None, input: str | bytes | None = None,
             cwd: str | os.PathLike[str] | None = None, text: bool = True,
             check: bool = False) -> subprocess.CompletedProcess:
    """``run_group`` with a timeout raised as ToolTimeoutError naming the tool (``what``,
    else the program's name)."""
    try:
        return run_group(cmd, timeout=timeout, input=input, cwd=cwd, text=text, check=check)
    except subprocess.TimeoutExpired:
        name = what or os.path.basename(str(cmd[0]))
        raise ToolTimeoutError(
            f"{name} ran past {timeout:g} s; it and every process it started were stopped",
            hint=hint or "the machine may be oversubscribed (check the load) or the program "
                         "very large: retry when it is quieter") from None
