"""The C toolchain: find the compiler, probe its flags, compile into a content-addressed cache.

A shared object is keyed by sha256 of (source, flags, link arguments, compiler version,
host CPU), so a second process with the same graph compiles nothing: it finds
``<cache>/<key>.so`` and loads it. The cache folder and its verified entries are ``cache.py``:
files are renamed into place with a size + sha256 record, and a damaged entry is built again.
Probe results (does ``-march=native`` work, is there OpenMP) are cached the same way. An
object file may compile in the background (``ObjectBuild``: a kernel library's object while
the program that links it compiles).

Environment: ``RLX_CC`` (compiler, default ``cc``), ``RLX_CACHE_DIR`` (default
``~/.cache/rlx/cpu``), ``RLX_CPU_SANITIZE=1`` (every program also built with AddressSanitizer
and UndefinedBehaviorSanitizer, stopping at the first report: a process must preload the
ASan runtime to load such a program; tests/targets/test_cpu_sanitize.py does).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from rlx_core.errors import RlxError, TargetUnavailableError
from rlx_core.targets.cpu.cache import (
    CacheWriteError,
    cache_dir,
    find,
    publish,
    search_path,
    temp_path,
    write_atomic,
)
from rlx_core.targets.cpu.env import env_flag
from rlx_core.targets.tool_process import run_group, start_group, stop_group, wait_group

OPT_CHOICES: tuple[tuple[str, ...], ...] = (("-O3", "-march=native"), ("-O3",), ("-O2",))
# no errno and no FP traps: both would keep loops over math calls and float selects scalar
BASE_FLAGS: tuple[str, ...] = ("-std=gnu11", "-fPIC", "-shared", "-fno-math-errno",
                               "-fno-trapping-math")
# GCC 12 (Debian 12's) miscompiles a loop whose branch loads bf16 storage (a masked 16-bit
# load widened to f32) when if-conversion vectorises it with AVX-512BW: a bf16 pad wrote 0 for
# 30 of 100 elements (fuzz seed [20261206, 20526, 17337]; tests/targets/test_cpu_gcc_workaround.py
# has the kernel). -fno-tree-loop-if-convert is the narrowest switch found that avoids it
# (-O2, -mno-avx512bw and clang are right too). It goes only to sources with a conditional
# bf16 load (the shape miscompiled), on AVX-512 code: on every program it cost MiniLM b1
# 7.8 -> 9.3 ms, and on every source that loads bf16 autocast MiniLM 2.8 -> 8.4 ms (the
# prelude's exp and erf loops are vectorised through if-conversion). The shape, as a standalone
# reproducer showed (tests/targets/test_cpu_gcc_workaround.py builds each form): a bf16 load as
# either arm of a ternary, bare or in parentheses (cond ? rlx_bf16_ld(..) : c, cond ? c :
# rlx_bf16_ld(..), cond ? (rlx_bf16_ld(..)) : c) inside nested loops whose condition is on the
# indices (a pad); a bf16 load stored as f32 or a flat loop is right. The renderer emits the
# first form only (pad); elementwise selects load into temporaries first. With AVX512-FP16
# (Emerald Rapids) the f16 form goes wrong too, where _Float16 loads vectorise natively: an
# f16 pad of 4 x 3 x 5 x 2 into 7 x 3 x 8 x 3 wrote 0 for 48 of its 120 input elements in a
# program with a second kernel (fuzz seed [20261221, 20526, 200], found inside a pack; -O2,
# -fno-tree-loop-vectorize, -mno-avx512fp16 and this flag are right), so f16 loads count too
GCC_AVX512_WORKAROUND: tuple[str, ...] = ("-fno-tree-loop-if-convert",)
_HALF_COND_LOAD = re.compile(r"[?:][\s(]*rlx_b?f16_ld\(")  # a bf16/f16 load as a ternary's arm
# RLX_CPU_SANITIZE=1: the optimisation stays (conv7's depthwise edge bug showed at -O3 only)
SANITIZE_FLAGS: tuple[str, ...] = ("-fsanitize=address,undefined", "-fno-sanitize-recover=all",
                                   "-fno-omit-frame-pointer", "-g")
_PROBE_SOURCE = "#include <math.h>\nint rlx_probe(int x) { return (int)sqrt((double)x); }\n"
_OMP_SOURCE = ("#include <omp.h>\nint rlx_probe(void) { int s = 0;\n"
               "#pragma omp parallel for reduction(+:s)\n"
               "for (int i = 0; i < 4; ++i) s += i;\nreturn s + omp_get_max_threads(); }\n")


class CCompileError(RlxError):
    """The C compiler rejected generated source; the message shows its output and the lines."""

    code = "RLX-X003"


class CCompileTimeoutError(RlxError):
    """The C compiler ran past its deadline (CC_TIMEOUT_S for a build, PROBE_TIMEOUT_S for a
    probe); it and every process it started were stopped."""

    code = "RLX-X005"


# seconds one compiler run may take (the sanitized builds of the largest test programs take
# minutes on a loaded 2-core machine)
CC_TIMEOUT_S = 600.0
# seconds one probe may take (``--version``, a test build, the predefined macros): one that
# runs past it is an error, not a rejected flag, so no wrong probe record is cached
PROBE_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class Compiler:
    """A usable compiler and the flags probed for it."""

    path: str
    version: str
    opt_flags: tuple[str, ...]
    openmp: bool
    notes: tuple[str, ...] = ()
    # whether opt_flags make the compiler emit AVX-512, or AVX2 with FMA (the vector ISAs of
    # rlx's own sgemm; see sgemm.py)
    avx512: bool = False
    avx2_fma: bool = False
    # what keeps -march=native code within a forced lower ISA family (isa.py, RLX_CPU_ISA)
    isa_flags: tuple[str, ...] = ()

    def workarounds(self, source: str) -> tuple[str, ...]:
        """Flags that avoid known miscompiles of this compiler on this ISA path for ``source``
        (GCC_AVX512_WORKAROUND: AVX-512 code with a conditional bf16 or f16 load)."""
        avx512_here = self.avx512 and "-mno-avx512f" not in self.isa_flags
        bug = avx512_here and is_gcc(self.version) and _HALF_COND_LOAD.search(source) is not None
        return GCC_AVX512_WORKAROUND if bug else ()

    def flags_for(self, source: str) -> tuple[str, ...]:
        """``flags`` with the workarounds ``source`` needs."""
        return self.flags + self.workarounds(source)

    @property
    def flags(self) -> tuple[str, ...]:
        return (self.opt_flags + self.isa_flags + BASE_FLAGS
                + (("-fopenmp",) if self.openmp else ())
                + (SANITIZE_FLAGS if sanitize() else ()))


def is_gcc(version: str) -> bool:
    """Whether ``--version`` text is GCC's (clang says "clang version")."""
    first = version.splitlines()[0].lower() if version else ""
    return "clang" not in first and ("gcc" in first
                                     or "free software foundation" in version.lower())


def sanitize() -> bool:
    """``RLX_CPU_SANITIZE=1``: build programs with ASan + UBSan (SANITIZE_FLAGS)."""
    return env_flag("RLX_CPU_SANITIZE", False)


def _host() -> str:
    """Identifies the CPU, since -march=native code is only valid on the machine it targets,
    and the ISA path compiled for (isa.detect: the family, forced lower by RLX_CPU_ISA, and
    the extensions it keeps)."""
    from rlx_core.targets.cpu.isa import detect

    model = ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith(("model name", "flags")):
                    model += line.strip()
    except OSError:
        pass
    return (f"{platform.machine()}|{hashlib.sha256(model.encode()).hexdigest()[:16]}"
            f"|{detect().key()}")


def _compiler_path() -> tuple[str | None, str]:
    if sys.platform == "emscripten":
        return None, "there is no C compiler under Pyodide / WebAssembly"
    name = os.environ.get("RLX_CC") or "cc"
    found = shutil.which(name)
    if found is None:
        return None, f"no C compiler: {name!r} was not found" + (
            " (from RLX_CC)" if os.environ.get("RLX_CC") else " on PATH")
    return found, ""


_VERSIONS: dict[tuple[str, float], str] = {}


def _version(path: str) -> str:
    key = (path, os.stat(path).st_mtime)
    if key not in _VERSIONS:
        try:
            code, out, err_text = _probe_run([path, "--version"])
        except OSError as err:
            raise TargetUnavailableError(f"the C compiler {path} does not run: {err}",
                                         hint="set RLX_CC to a working compiler") from err
        if code != 0:
            raise TargetUnavailableError(f"`{path} --version` failed: {err_text.strip()[:200]}",
                                         hint="set RLX_CC to a working compiler")
        _VERSIONS[key] = out.strip() or err_text.strip()
    return _VERSIONS[key]


def _try(path: str, flags: tuple[str, ...], source: str) -> bool:
    with tempfile.TemporaryDirectory(prefix="rlx-probe-") as tmp:
        src = Path(tmp) / "probe.c"
        src.write_text(source)
        cmd = [path, *flags, *BASE_FLAGS, str(src), "-o", str(Path(tmp) / "probe.so")]
        try:
            return _probe_run(cmd)[0] == 0
        except OSError:
            return False


def _probe_run(cmd: list[str], stdin: str | None = None) -> tuple[int, str, str]:
    """``run_group`` for a probe: CCompileTimeoutError past PROBE_TIMEOUT_S (then the probe
    says nothing about the compiler, and find_compiler caches no record)."""
    try:
        done = run_group(cmd, timeout=PROBE_TIMEOUT_S, input=stdin)
    except subprocess.TimeoutExpired:
        raise CCompileTimeoutError(
            f"the C compiler ran past {PROBE_TIMEOUT_S:g} s probing it ({' '.join(cmd[:3])} "
            "...); it and every process it started were stopped",
            hint="the machine may be oversubscribed (check the load): retry when it is "
                 "quieter") from None
    return done.returncode, done.stdout, done.stderr


_COMPILERS: dict[str, Compiler] = {}


def find_compiler() -> Compiler:
    """The compiler with probed flags; TargetUnavailableError (RLX-X001) when there is none."""
    path, why = _compiler_path()
    if path is None:
        raise TargetUnavailableError(why, hint="install a C compiler (apt-get install gcc) or set "
                                     "RLX_CC; use target 'numpy' where none can exist")
    from rlx_core.targets.cpu.isa import detect

    version = _version(path)
    key = hashlib.sha256(f"{path}\n{version}\n{_host()}".encode()).hexdigest()[:24]
    if key in _COMPILERS:
        return _COMPILERS[key]
    probe_file = cache_dir() / f"probe-{key}.json"
    isa_flags = detect().flags
    try:
        comp = _from_record(path, version, json.loads(_read_probe(probe_file.name)), isa_flags)
    except (OSError, ValueError, KeyError, TypeError):  # none yet, or damaged: probe again
        comp = dataclasses.replace(_probe(path, version), isa_flags=isa_flags)
        write_atomic(probe_file, json.dumps({"opt_flags": comp.opt_flags, "openmp": comp.openmp,
                                             "notes": comp.notes,
                                             "avx512": comp.avx512,
                                             "avx2_fma": comp.avx2_fma}).encode())
    _COMPILERS[key] = comp
    return comp


def _read_probe(name: str) -> str:
    """The probe record ``name`` from the first folder of the cache's search path holding it."""
    for folder in search_path():
        try:
            return (folder / name).read_text()
        except OSError:
            continue
    raise FileNotFoundError(name)


def _from_record(path: str, version: str, data: object,
                 isa_flags: tuple[str, ...] = ()) -> Compiler:
    """The Compiler a probe record describes; ValueError unless the record is exactly what
    ``_probe`` writes (a damaged or edited file is probed again, never trusted: its flags go
    on every compile command line)."""
    if not isinstance(data, dict):
        raise ValueError("a probe record is a JSON object")
    flags, notes = data["opt_flags"], data["notes"]
    if not isinstance(flags, list) or tuple(flags) not in OPT_CHOICES:
        raise ValueError(f"opt_flags {flags!r} is not one of the probed choices")
    if not isinstance(notes, list) or not all(isinstance(n, str) for n in notes):
        raise ValueError("notes must be a list of strings")
    switches = [data[k] for k in ("openmp", "avx512", "avx2_fma")]
    if not all(isinstance(b, bool) for b in switches):
        raise ValueError("openmp, avx512 and avx2_fma must be true or false")
    return Compiler(path, version, tuple(flags), switches[0], tuple(notes), switches[1],
                    switches[2], isa_flags)


def _probe(path: str, version: str) -> Compiler:
    notes = []
    for choice in OPT_CHOICES:
        if _try(path, choice, _PROBE_SOURCE):
            opt = choice
            break
        notes.append(f"compiler rejected {' '.join(choice)}")
    else:
        raise TargetUnavailableError(f"the C compiler {path} cannot build a shared object",
                                     hint="check that it is a working C compiler (RLX_CC)")
    openmp = _try(path, opt + ("-fopenmp",), _OMP_SOURCE)
    if not openmp:
        notes.append("no OpenMP: kernels run on one thread")
    from rlx_core.targets.cpu.isa import detect

    isa_flags = detect().flags
    isa = _defines(path, opt + isa_flags)  # what the code compiled for the ISA path uses
    return Compiler(path, version, opt, openmp, tuple(notes), "__AVX512F__" in isa,
                    {"__AVX2__", "__FMA__"} <= isa, isa_flags)


def _defines(path: str, flags: tuple[str, ...]) -> set[str]:
    """The macros the compiler with ``flags`` defines to 1 (``__AVX512F__``: it emits AVX-512
    code here); empty when it cannot say."""
    try:
        code, out, _ = _probe_run([path, *flags, "-dM", "-E", "-x", "c", "-"], stdin="")
    except OSError:
        return set()
    if code != 0:
        return set()
    return {ln.split()[1] for ln in out.splitlines()
            if ln.startswith("#define ") and ln.endswith(" 1") and len(ln.split()) == 3}


def compiler_status() -> tuple[bool, str]:
    """(True, "") when a compiler is usable, else (False, why). Raises only CacheDirError
    (RLX-R013): an unusable cache folder is the user's to fix, not a missing compiler."""
    try:
        find_compiler()
    except TargetUnavailableError as err:
        return False, err.message
    return True, ""


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
        [source, " ".join(flags + incs + links), comp.version, _host(),
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
            obj.unlink(missing_ok=True)
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
        if tmp.exists():
            tmp.unlink()
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
    wrote. ``lock`` names a file held from the compile's start to the object's publication, so
    two processes (or threads) that miss together compile it once: one that finds the lock
    held compiles nothing in ``start()`` and waits on the lock in ``result()``, then finds the
    object (or builds it, if the holder failed). The compiler's output goes to a temporary file
    (read for the typed error when it fails); an interrupt, a timeout or a failure leaves no
    temporary and no entry behind.
    """

    def __init__(self, source: str, flags: tuple[str, ...], compiler: Compiler,
                 lock: Path | None = None) -> None:
        self.source = source
        self._compiler, self._flags, self._lock_path = compiler, flags, lock
        self.key = hashlib.sha256("\0".join(["object", source, " ".join(flags),
                                              compiler.version, _host()]).encode()).hexdigest()
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
            self._files[1].unlink(missing_ok=True)
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
                 compiler: Compiler | None = None, lock: Path | None = None) -> ObjectBuild:
    """``compile_object``'s unit, not yet built: ``.start()`` starts its compiler in the
    background, ``.result()`` waits for it (ObjectBuild; ``lock``: the file that makes
    concurrent builds of it compile once)."""
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
