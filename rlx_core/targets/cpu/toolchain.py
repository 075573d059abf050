"""The C compiler: find it (``RLX_CC``), probe its flags, and the flags each source needs.

``find_compiler`` probes once per compiler, version and host CPU (does ``-march=native`` work,
is there OpenMP, which vector ISA the flags emit) and keeps the record in the cache folder
(``cache.py``), so a second process probes nothing; a damaged record is probed again.
``Compiler.flags_for`` adds the workarounds of known miscompiles (GCC_AVX512_WORKAROUND).
Compiling into the content-addressed cache is ``cached_build.py``.

Environment: ``RLX_CC`` (compiler, default ``cc``), ``RLX_CPU_SANITIZE=1`` (every program also
built with AddressSanitizer and UndefinedBehaviorSanitizer, stopping at the first report: a
process must preload the ASan runtime to load such a program; tests/targets/test_cpu_sanitize.py
does).
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
from dataclasses import dataclass
from pathlib import Path

from rlx_core.errors import RlxError, TargetUnavailableError
from rlx_core.targets.cpu.cache import cache_dir, search_path
from rlx_core.targets.cpu.env import env_flag
from rlx_core.targets.tool_process import run_group
from rlx_core.targets.verified_files import write_atomic

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


class CCompileTimeoutError(RlxError):
    """The C compiler ran past its deadline (cached_build.CC_TIMEOUT_S for a build,
    PROBE_TIMEOUT_S for a probe); it and every process it started were stopped."""

    code = "RLX-X005"


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


def host_key() -> str:
    """Identifies the CPU (part of every probe and build key), since -march=native code is
    only valid on the machine it targets, and the ISA path compiled for (isa.detect: the
    family, forced lower by RLX_CPU_ISA, and the extensions it keeps)."""
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
    key = hashlib.sha256(f"{path}\n{version}\n{host_key()}".encode()).hexdigest()[:24]
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
