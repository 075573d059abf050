"""Cached C builds: compile into a content-addressed cache, or find the build already there.

A shared object is keyed by sha256 of (source, flags, link arguments, compiler version,
host CPU), so a second process with the same graph compiles nothing: it finds
``<cache>/<key>.so`` and loads it. The source has no traced code's file:line in it (the
renderer keeps those for the sources people read), so a function moved to another line is a hit.
The cache folder is ``cache.py``'s; its entries are ``targets/verified_files.py``'s: files are
renamed into place with a size + sha256 record, and a damaged entry is built again.
An object file may compile in the background (``ObjectBuild``: a kernel library's object while
the program that links it compiles). The compiler and its flags are ``toolchain.py``'s;
``RLX_CACHE_DIR`` names the folder (default ``~/.cache/rlx/cpu``).
"""

from __future__ import annotations

import hashlib
import re
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from rlx_core.errors import RlxError
from rlx_core.targets.cpu.cache import cache_dir, find
from rlx_core.targets.cpu.toolchain import (
    CCompileTimeoutError,
    Compiler,
    find_compiler,
    host_key,
)
from rlx_core.targets.tool_process import run_group, start_group, stop_group, wait_group
from rlx_core.targets.verified_files import (
    CacheWriteError,
    discard,
    publish,
    temp_path,
    write_atomic,
)


class CCompileError(RlxError):
    """The C compiler rejected generated source; the message shows its output and the lines."""

    code = "RLX-X003"


# seconds one compiler run may take (the sanitized builds of the largest test programs take
# minutes on a loaded 2-core machine)
CC_TIMEOUT_S = 600.0


@dataclass(frozen=True)
class BuildResult:
    """A built shared object: its path, its cache key, whether the cache had it, and the
    compiler command that built it (empty on a cache hit)."""

    path: Path
    key: str
    cache_hit: bool
    command: tuple[str, ...]


def link_args(library_dirs: tuple[str, ...], libraries: tuple[str, ...]) -> tuple[str, ...]:
    out: list[str] = []
    for d in library_dirs:
        out += [f"-L{d}", f"-Wl,-rpath,{d}"]
    out += [f"-l{lib}" for lib in libraries]
    return tuple(out) + ("-lm",)


def build_shared(source: str, *, include_dirs: tuple[str, ...] = (),
                 library_dirs: tuple[str, ...] = (), libraries: tuple[str, ...] = (),
                 compiler: Compiler | None = None,
                 objects: tuple[BuildResult | ObjectBuild, ...] = ()) -> BuildResult:
    """Compile ``source`` into a shared object in the cache (or find it there), linked with
    the cached ``objects`` (kernel_library.py's prebuilt kernels; their keys join the key).

    An ``ObjectBuild`` among them is compiled only on a miss, and then while ``source`` is:
    its compiler starts first, ``source`` is compiled to an object of its own (``-c``), and the
    link waits for both. Found in the cache, it is linked in the one command as before. A
    failure or an interrupt of either compile stops the other and leaves neither's output."""
    comp = compiler or find_compiler()
    incs = tuple(f"-I{d}" for d in include_dirs)
    links = link_args(library_dirs, libraries)
    flags = comp.flags_for(source)
    key = hashlib.sha256("\0".join(
        [source, " ".join(flags + incs + links), comp.version, host_key(),
         *(o.key for o in objects)]).encode()
    ).hexdigest()

    def run(src: Path, tmp: Path, out: Path) -> tuple[str, ...]:
        later = [o for o in objects if isinstance(o, ObjectBuild)]
        for o in later:
            o.start()  # (a cached object is found here, and the build is one command)
        if all(o.done for o in later):
            done = [o.result() if isinstance(o, ObjectBuild) else o for o in objects]
            cmd = (comp.path, *flags, *incs, str(src), *(str(o.path) for o in done), "-o",
                   str(tmp), *links)
            _run_cc(cmd, source, src, out)
            return cmd
        obj = temp_path(out, ".o.tmp")
        try:
            _run_cc((comp.path, *(f for f in flags if f != "-shared"), *incs, "-c", str(src),
                     "-o", str(obj)), source, src, out)
            done = [o.result() if isinstance(o, ObjectBuild) else o for o in objects]
            cmd = (comp.path, *flags, str(obj), *(str(o.path) for o in done), "-o", str(tmp),
                   *links)
            _run_cc(cmd, "", src, out)
        except BaseException:  # a failed or interrupted compile: stop the library's too
            for o in later:
                o.cancel()
            raise
        finally:
            discard(obj)
        return cmd

    return _cached_build(key, ".so", source, run)


def _cached_build(key: str, suffix: str, source: str,
                  run: Callable[[Path, Path, Path], tuple[str, ...]]) -> BuildResult:
    """The cache's ``<key><suffix>`` (out), found there or built by ``run(src, tmp, out)``
    (the compiler runs writing ``tmp``; returns the command recorded) and published.
    ``source`` (C, or "" for a link) is first kept as ``<key>.c`` (src) for the compiler and
    for its error messages."""
    root = cache_dir()
    out = root / f"{key}{suffix}"
    hit = find(out.name)  # (also in a read-only cache folder this one stands in for)
    if hit is not None:
        return BuildResult(hit, key, True, ())
    src = out
    if source:
        src = root / f"{key}.c"
        write_atomic(src, source.encode())
    tmp = temp_path(out, ".o.tmp" if suffix == ".o" else ".so.tmp")
    try:
        cmd = run(src, tmp, out)
        publish(tmp, out)
    finally:
        discard(tmp)
    return BuildResult(out, key, False, cmd)


_WHERE = re.compile(r":(\d+):(?:\d+:)? (?:fatal )?error")


def _explain(output: str, source: str) -> str:
    """The compiler output, then the source lines each error points at (with context)."""
    lines = source.splitlines()
    shown: list[str] = []
    for m in list(_WHERE.finditer(output))[:5]:
        n = int(m.group(1))
        lo, hi = max(1, n - 2), min(len(lines), n + 2)
        shown.append("\n".join(f"{'>' if i == n else ' '}{i:>6} | {lines[i - 1]}"
                               for i in range(lo, hi + 1)))
    text = "the C compiler rejected the generated source:\n" + output.strip()[:4000]
    if shown:
        text += "\n\noffending source lines:\n" + "\n...\n".join(shown)
    return text


# ---- multi-unit builds (used by the specialization cache module, rlx_core/runtime) --------------
# Counts of real compiler runs in this process by compile_object / link_shared (cache hits do
# not count): a second process with a warm RLX_CACHE_DIR must leave both at zero.
RUN_COUNTS: dict[str, int] = {"compile": 0, "link": 0}


# what a compiler prints when it cannot write its output: the cache's fault, not the source's
_WRITE_FAILURES = ("No space left on device", "Read-only file system", "Disk quota exceeded")


def _run_cc(cmd: tuple[str, ...], source: str, kept: Path, out: Path) -> None:
    try:
        done = run_group(cmd, timeout=CC_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise _timed_out(kept, out) from None
    if done.returncode != 0:
        raise _rejected(done.stderr or done.stdout, source, kept, out)


def _timed_out(kept: Path, out: Path) -> CCompileTimeoutError:
    return CCompileTimeoutError(
        f"the C compiler ran past {CC_TIMEOUT_S:g} s building {out.name}; it and every "
        "process it started were stopped",
        hint="the machine may be oversubscribed (check the load) or the program very "
             f"large: retry when it is quieter; the source is kept at {kept}")


def _rejected(text: str, source: str, kept: Path, out: Path) -> RlxError:
    """The typed error for a compiler run that failed with output ``text``."""
    for why in _WRITE_FAILURES:
        if why in text:
            return CacheWriteError(f"the C compiler cannot write {out.name} into the cache "
                                   f"folder {out.parent}: {why}",
                                   hint="free disk space, or set RLX_CACHE_DIR to a writable "
                                        "folder with room")
    return CCompileError(_explain(text, source),
                         hint="this is a renderer bug: report it with the LIR text "
                              f"(the source is kept at {kept})")


class ObjectBuild:
    """One object file for the cache that may compile while the caller does other work.

    ``key`` is known at once; ``start()`` finds the object in the cache or starts its compiler
    without waiting for it; ``result()`` waits for it (starting it first if need be) and
    publishes the object with its record; ``cancel()`` stops the compiler and deletes what it
    wrote. ``lock`` names a file held from the compile's start to the object's publication
    (``<cache>/<lock>-<the key's first 24 hex digits>.lock``, so each object has its own), so
    two processes (or threads) that miss together compile it once: one that finds the lock
    held compiles nothing in ``start()`` and waits on the lock in ``result()``, then finds the
    object (or builds it, if the holder failed). The compiler's output goes to a temporary file
    (read for the typed error when it fails); an interrupt, a timeout or a failure leaves no
    temporary and no entry behind.
    """

    def __init__(self, source: str, flags: tuple[str, ...], compiler: Compiler,
                 lock: str | None = None) -> None:
        self.source = source
        self._compiler, self._flags = compiler, flags
        self.key = hashlib.sha256("\0".join(["object", source, " ".join(flags),
                                              compiler.version, host_key()]).encode()).hexdigest()
        self._lock_path = None if lock is None else cache_dir() / f"{lock}-{self.key[:24]}.lock"
        self._done: BuildResult | None = None
        self._lock_file: IO[bytes] | None = None
        self._proc: subprocess.Popen | None = None
        self._log: IO[bytes] | None = None
        self._files: tuple[Path, Path, Path] | None = None  # (src, tmp, out) of a started compile
        self._cmd: tuple[str, ...] = ()
        self._deadline = 0.0

    @property
    def done(self) -> bool:
        """Whether ``result()`` returns without a compiler run (the object was found)."""
        return self._done is not None

    @property
    def running(self) -> bool:
        """Whether its compiler was started and is not yet waited for."""
        return self._proc is not None

    @property
    def pid(self) -> int | None:
        """The process id of its running compiler (the leader of the process group that
        ``cancel()``, a timeout or an interrupt stops), None while none runs."""
        return None if self._proc is None else self._proc.pid

    def start(self) -> None:
        """Find the object, or start its compiler (unless another build holds the lock)."""
        if self._done is not None or self._proc is not None:
            return
        hit = find(f"{self.key}.o")
        if hit is not None:
            self._done = BuildResult(hit, self.key, True, ())
        elif self._take_lock(blocking=False):
            try:
                self._begin()
            except BaseException:
                self.cancel()
                raise

    def result(self) -> BuildResult:
        """The object in the cache: found, or compiled (waiting for a started compile)."""
        if self._done is not None:
            return self._done
        try:
            if self._proc is None:
                self._take_lock(blocking=True)
                self._begin()
                if self._done is not None:
                    return self._done
            assert self._proc is not None and self._files is not None and self._log is not None
            src, tmp, out = self._files
            try:
                code = wait_group(self._proc, timeout=max(0.0, self._deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                raise _timed_out(src, out) from None
            self._proc = None
            if code != 0:
                self._log.seek(0)
                text = self._log.read().decode(errors="replace")
                raise _rejected(text, self.source, src, out)
            publish(tmp, out)
            self._done = BuildResult(out, self.key, False, self._cmd)
            return self._done
        finally:
            self._proc = None  # (wait_group killed it if it was interrupted)
            self._clean()

    def cancel(self) -> None:
        """Stop a started compile (its whole process group) and delete its output."""
        if self._proc is not None:
            stop_group(self._proc)
            self._proc = None
        self._clean()

    def _take_lock(self, *, blocking: bool) -> bool:
        """Hold the lock (True), or find it held by another build (False, when not
        ``blocking``). Without a lock where the folder refuses one: then two processes may
        both build, and the atomic rename keeps either's object whole."""
        if self._lock_path is None or self._lock_file is not None:
            return True
        try:
            import fcntl  # (POSIX only)

            f = open(self._lock_path, "a+b")  # noqa: SIM115 (held until _clean)
        except (ImportError, OSError):
            return True
        try:
            fcntl.flock(f, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
        except BlockingIOError:
            f.close()
            return False
        except BaseException:
            f.close()
            raise
        self._lock_file = f
        return True

    def _begin(self) -> None:
        """With the lock held: find the object (built meanwhile), or start its compiler."""
        hit = find(f"{self.key}.o")
        if hit is not None:
            self._done = BuildResult(hit, self.key, True, ())
            self._clean()
            return
        root = cache_dir()
        out = root / f"{self.key}.o"
        src = root / f"{self.key}.c"
        write_atomic(src, self.source.encode())
        tmp = temp_path(out, ".o.tmp")
        self._files = (src, tmp, out)
        self._cmd = (self._compiler.path, *self._flags, "-c", str(src), "-o", str(tmp))
        self._log = tempfile.TemporaryFile()  # noqa: SIM115 (closed by _clean)
        RUN_COUNTS["compile"] += 1
        self._deadline = time.monotonic() + CC_TIMEOUT_S
        self._proc = start_group(self._cmd, output=self._log)

    def _clean(self) -> None:
        """Delete the compile's temporary and log, and release the lock."""
        if self._files is not None:
            discard(self._files[1])
            self._files = None
        for f in (self._log, self._lock_file):
            if f is not None:
                f.close()
        self._log = self._lock_file = None


def compile_object(source: str, *, include_dirs: tuple[str, ...] = (),
                   compiler: Compiler | None = None) -> BuildResult:
    """Compile one translation unit to a position-independent object file in the cache.

    Keyed like build_shared (source, flags, compiler version, host), so relinking a module
    after one of its units changed recompiles only that unit.
    """
    return object_build(source, include_dirs=include_dirs, compiler=compiler).result()


def object_build(source: str, *, include_dirs: tuple[str, ...] = (),
                 compiler: Compiler | None = None, lock: str | None = None) -> ObjectBuild:
    """``compile_object``'s unit, not yet built: ``.start()`` starts its compiler in the
    background, ``.result()`` waits for it (ObjectBuild; ``lock``: the name of the file
    that makes concurrent builds of it compile once)."""
    comp = compiler or find_compiler()
    flags = tuple(f for f in comp.flags_for(source) if f != "-shared") + tuple(
        f"-I{d}" for d in include_dirs)
    return ObjectBuild(source, flags, comp, lock)


def link_shared(objects: tuple[BuildResult, ...], *, library_dirs: tuple[str, ...] = (),
                libraries: tuple[str, ...] = (), suffix: str = ".so",
                compiler: Compiler | None = None) -> BuildResult:
    """Link cached objects into one shared object (``suffix``: e.g. a Python EXT_SUFFIX)."""
    comp = compiler or find_compiler()
    links = link_args(library_dirs, libraries)
    flags = comp.opt_flags + comp.isa_flags + ("-shared",) + (("-fopenmp",) if comp.openmp else ())
    key = hashlib.sha256("\0".join(["link", *(o.key for o in objects), " ".join(flags + links),
                                    comp.version, suffix]).encode()).hexdigest()
    def run(_src: Path, tmp: Path, out: Path) -> tuple[str, ...]:
        cmd = (comp.path, *flags, *(str(o.path) for o in objects), "-o", str(tmp), *links)
        RUN_COUNTS["link"] += 1
        _run_cc(cmd, "", out, out)
        return cmd

    return _cached_build(key, suffix, "", run)
