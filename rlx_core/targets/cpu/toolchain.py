"""The C toolchain: find the compiler, probe its flags, compile into a content-addressed cache.

A shared object is keyed by sha256 of (source, flags, link arguments, compiler version,
host CPU), so a second process with the same graph compiles nothing: it finds
``<cache>/<key>.so`` and loads it. The cache folder and its verified entries are ``cache.py``:
files are renamed into place with a size + sha256 record, and a damaged entry is built again.
Probe results (does ``-march=native`` work, is there OpenMP) are cached the same way.

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
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

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
from rlx_core.targets.tool_process import run_group

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
                 objects: tuple[BuildResult, ...] = ()) -> BuildResult:
    """Compile ``source`` into a shared object in the cache (or find it there), linked with
    the cached ``objects`` (kernel_library.py's prebuilt kernels; their keys join the key)."""
    comp = compiler or find_compiler()
    incs = tuple(f"-I{d}" for d in include_dirs)
    links = link_args(library_dirs, libraries)
    flags = comp.flags_for(source)
    key = hashlib.sha256("\0".join(
        [source, " ".join(flags + incs + links), comp.version, _host(),
         *(o.key for o in objects)]).encode()
    ).hexdigest()
    return _cached_build(key, ".so", source, lambda src, tmp: (
        comp.path, *flags, *incs, str(src), *(str(o.path) for o in objects), "-o", str(tmp),
        *links))


def _cached_build(key: str, suffix: str, source: str,
                  command: Callable[[Path, Path], tuple[str, ...]],
                  counter: str | None = None) -> BuildResult:
    """The cache's ``<key><suffix>``, found there or built by the compiler run
    ``command(src, tmp)`` into a temporary and published. ``source`` (C, or "" for a link) is
    first kept as ``<key>.c`` (src) for the compiler and for its error messages; ``counter``
    names the RUN_COUNTS entry a real run adds to."""
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
    cmd = command(src, tmp)
    try:
        if counter:
            RUN_COUNTS[counter] += 1
        _run_cc(cmd, source, src, out)
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
        raise CCompileTimeoutError(
            f"the C compiler ran past {CC_TIMEOUT_S:g} s building {out.name}; it and every "
            "process it started were stopped",
            hint="the machine may be oversubscribed (check the load) or the program very "
                 f"large: retry when it is quieter; the source is kept at {kept}") from None
    if done.returncode != 0:
        text = done.stderr or done.stdout
        for why in _WRITE_FAILURES:
            if why in text:
                raise CacheWriteError(f"the C compiler cannot write {out.name} into the cache "
                                      f"folder {out.parent}: {why}",
                                      hint="free disk space, or set RLX_CACHE_DIR to a writable "
                                           "folder with room")
        raise CCompileError(_explain(text, source),
                            hint="this is a renderer bug: report it with the LIR text "
                                 f"(the source is kept at {kept})")


def compile_object(source: str, *, include_dirs: tuple[str, ...] = (),
                   compiler: Compiler | None = None) -> BuildResult:
    """Compile one translation unit to a position-independent object file in the cache.

    Keyed like build_shared (source, flags, compiler version, host), so relinking a module
    after one of its units changed recompiles only that unit.
    """
    comp = compiler or find_compiler()
    flags = tuple(f for f in comp.flags_for(source) if f != "-shared") + tuple(
        f"-I{d}" for d in include_dirs)
    key = hashlib.sha256("\0".join(["object", source, " ".join(flags), comp.version,
                                    _host()]).encode()).hexdigest()
    return _cached_build(key, ".o", source, lambda src, tmp: (
        comp.path, *flags, "-c", str(src), "-o", str(tmp)), counter="compile")


def link_shared(objects: tuple[BuildResult, ...], *, library_dirs: tuple[str, ...] = (),
                libraries: tuple[str, ...] = (), suffix: str = ".so",
                compiler: Compiler | None = None) -> BuildResult:
    """Link cached objects into one shared object (``suffix``: e.g. a Python EXT_SUFFIX)."""
    comp = compiler or find_compiler()
    links = link_args(library_dirs, libraries)
    flags = comp.opt_flags + comp.isa_flags + ("-shared",) + (("-fopenmp",) if comp.openmp else ())
    key = hashlib.sha256("\0".join(["link", *(o.key for o in objects), " ".join(flags + links),
                                    comp.version, suffix]).encode()).hexdigest()
    return _cached_build(key, suffix, "", lambda _src, tmp: (
        comp.path, *flags, *(str(o.path) for o in objects), "-o", str(tmp), *links),
        counter="link")
