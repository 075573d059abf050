"""glslang in one long-lived process: GLSL/HLSL compute shaders to SPIR-V without a process
start per shader.

``glslangValidator`` rebuilds its built-in symbol tables on every start (~0.2 s here), which
made compiling a model for vulkan or directx cost a fifth of a second per kernel. The server
(``csrc/glslang_server.cpp``) links the same libraries from Debian's ``glslang-dev`` and runs the
same front end and SPIR-V generator with the same options (its output is byte-identical, which
``tests/vulkan/test_glslang_server.py`` checks), so a kernel costs ~10 ms.

It is an optimisation only: without a C++ compiler or ``glslang-dev``, with
``RLX_GLSLANG_SERVER=0``, or if the server dies twice, :func:`compile_shader` returns ``None``
and the caller runs ``glslangValidator`` as before. The executable is built once into the vulkan
target's build cache (``build_cache``: ``<RLX_CACHE_DIR>/vulkan``, else ``~/.cache/rlx/vulkan``),
with the same integrity record and quarantine as the cpu target's libraries.
"""

from __future__ import annotations

import atexit
import hashlib
import os
import shutil
import struct
import subprocess
import threading
from pathlib import Path

from rlx_core.errors import RlxError
from rlx_core.targets import verified_files
from rlx_core.targets.tool_process import run_tool

SOURCE = Path(__file__).with_name("csrc") / "glslang_server.cpp"
HEADER = Path("/usr/include/glslang/SPIRV/GlslangToSpv.h")
LIBS = ("-lglslang", "-lSPIRV", "-lglslang-default-resource-limits", "-lMachineIndependent",
        "-lGenericCodeGen", "-lOSDependent", "-lOGLCompiler", "-lHLSL", "-lSPIRV-Tools-opt",
        "-lSPIRV-Tools", "-lpthread")
_HEAD = struct.Struct("<3I")
_REPLY = struct.Struct("<2I")

_lock = threading.Lock()


class _Server:
    """This process's server: the running process and the pid that started it (a forked child
    starts its own), how often it died, and the built executable or why there is none."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen[bytes] | None = None
        self.pid: int | None = None
        self.deaths = 0
        self.exe: Path | None = None
        self.why: str | None = None


_SERVER = _Server()


def _cxx() -> str | None:
    return os.environ.get("RLX_CXX") or shutil.which("g++") or shutil.which("clang++")


def _library_stamp() -> str:
    """What the build depends on beside the source: the glslang library's size and time."""
    for d in ("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib"):
        lib = Path(d) / "libglslang.a"
        if lib.is_file():
            st = lib.stat()
            return f"{lib}:{st.st_size}:{st.st_mtime_ns}"
    return ""


def executable() -> Path | None:
    """The server executable in the cache (built on first use), or None with the reason kept
    for :func:`status`."""
    if _SERVER.exe is not None or _SERVER.why is not None:
        return _SERVER.exe
    cxx, stamp = _cxx(), _library_stamp()
    if not cxx or not HEADER.is_file() or not stamp or not SOURCE.is_file():
        _SERVER.why = "needs a C++ compiler and Debian's glslang-dev"
        return None
    key = hashlib.sha256("\0".join([SOURCE.read_text(), cxx, stamp]).encode()).hexdigest()[:24]
    try:
        from rlx_core.targets.vulkan.toolchain import cache_dir  # (it imports this module)

        root = cache_dir()
        exe = root / f"glslang-server-{key}"
        if not verified_files.lookup(exe):
            tmp = verified_files.temp_path(exe, ".tmp")
            try:
                r = run_tool([cxx, "-O1", "-std=c++17", str(SOURCE), "-o", str(tmp), *LIBS],
                             timeout=300)
                if r.returncode != 0:
                    _SERVER.why = f"building it failed: {(r.stderr or r.stdout)[-300:]}"
                    return None
                verified_files.publish(tmp, exe)
            finally:
                verified_files.discard(tmp)
        # (no chmod: publish gave it this user's executable mode, and an entry another user
        # published into a shared cache is not this user's to chmod, EPERM)
    except (OSError, RlxError, subprocess.SubprocessError) as err:
        _SERVER.why = f"cannot build it: {err}"
        return None
    _SERVER.exe = exe
    return exe


def status() -> tuple[bool, str]:
    """(usable, reason): whether shaders compile in the server or through glslangValidator."""
    if os.environ.get("RLX_GLSLANG_SERVER", "1") == "0":
        return False, "disabled by RLX_GLSLANG_SERVER=0"
    exe = executable()
    return (exe is not None, "in-process glslang server" if exe else str(_SERVER.why))


def _process() -> subprocess.Popen[bytes] | None:
    proc = _SERVER.proc
    if proc is not None and _SERVER.pid == os.getpid() and proc.poll() is None:
        return proc
    exe = executable()
    if exe is None:
        return None
    # a fresh one in a forked child too: the parent's pipes are not this process's to use
    proc = subprocess.Popen([str(exe)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL)
    _SERVER.proc, _SERVER.pid = proc, os.getpid()
    return proc


@atexit.register
def _close() -> None:
    proc = _SERVER.proc
    if proc is not None and _SERVER.pid == os.getpid():
        try:
            if proc.stdin is not None:
                proc.stdin.close()  # the server exits at end of input
            proc.wait(timeout=5)
        except (OSError, subprocess.SubprocessError):
            proc.kill()


def compile_shader(source: str, hlsl: bool, vulkan11: bool) -> tuple[bool, bytes] | None:
    """(True, SPIR-V) or (False, glslang's error log); None when the server cannot be used."""
    if not status()[0] or _SERVER.deaths >= 2:
        return None
    data = source.encode()
    with _lock:
        proc = _process()
        if proc is None:
            return None
        try:
            assert proc.stdin is not None and proc.stdout is not None
            proc.stdin.write(_HEAD.pack(int(hlsl), int(vulkan11), len(data)) + data)
            proc.stdin.flush()
            head = proc.stdout.read(_REPLY.size)
            status_code, n = _REPLY.unpack(head)
            body = proc.stdout.read(n)
            if len(body) != n:
                raise EOFError("short reply")
        except (OSError, EOFError, struct.error, ValueError):
            # the server died (e.g. a crash in glslang on this shader): the caller falls back to
            # glslangValidator, which reports this shader as it always did
            _SERVER.deaths += 1
            _SERVER.proc = None
            proc.kill()
            return None
    return status_code == 0, body
