"""What the CPU can run, found once per process: the vector ISA family and the cache sizes.

Generated code and rlx's own GEMM follow one *family* per ISA generation, never one path per
machine model:

* ``avx512``: AVX-512 F/BW/VL (Skylake-SP and later, Zen 4); the sgemm tile is 8 x 32.
* ``avx2``: AVX2 + FMA (Haswell and later, Zen 1-3); the sgemm tile is 6 x 16.
* ``sse``: the x86-64 baseline (no AVX); the sgemm falls back to its plain-C form.
* ``generic``: any other machine (aarch64 ...): whatever ``-march=native`` gives.

``RLX_CPU_ISA`` and ``RLX_SGEMM_BLOCKING`` errors are RLX-J001.

The optional extensions (AVX512-BF16, AVX512-VNNI / AVX-VNNI, AMX) are reported beside the
family; they belong to it only where the family keeps them (a forced ``avx2`` path drops every
AVX-512 extension). ``RLX_CPU_ISA=avx2`` (or ``sse``, ``avx512``, ``native``) forces a path no
higher than the CPU's own, so that each lower path can be tested on one machine; the family is
part of every compile's content-hash key (toolchain.host_key), so objects of different paths never
mix in the cache.

Cache sizes come from what the OS reports (``/sys/devices/system/cpu/cpu0/cache``, else
``sysconf``), and size the GEMM's KC/MC/NC blocking (``gemm_blocking``).
"""

from __future__ import annotations

import functools
import os
import platform
from dataclasses import dataclass, field
from pathlib import Path

from rlx_core.errors import RlxError

# highest first: a forced family must not be above the detected one
FAMILIES: tuple[str, ...] = ("avx512", "avx2", "sse")
_AVX512_CORE = ("avx512f", "avx512bw", "avx512vl")
_EXTENSIONS = ("avx512_bf16", "avx512_vnni", "avx_vnni", "amx_tile", "amx_bf16", "amx_int8")
# what the compiler is told beyond -march=native for a forced lower family (GCC and clang:
# -mno-avx512f turns off every AVX-512 extension, -mno-avx every AVX/AVX2/FMA/AVX-512 one)
_LOWER_FLAGS: dict[str, tuple[str, ...]] = {
    "avx512": (),
    "avx2": ("-mno-avx512f", "-mno-avxvnni", "-mno-amx-tile"),
    "sse": ("-mno-avx", "-mno-fma", "-mno-avx2", "-mno-avx512f", "-mno-avxvnni",
            "-mno-amx-tile"),
}


class CpuIsaError(RlxError):
    """``RLX_CPU_ISA`` names an unknown family, or one above what this CPU can run."""

    code = "RLX-J001"


@dataclass(frozen=True)
class Caches:
    """Per-core data cache sizes in bytes (0: not reported)."""

    l1d: int = 0
    l2: int = 0
    l3: int = 0


@dataclass(frozen=True)
class Isa:
    """The path this process compiles for: family, extensions kept, caches, and why."""

    family: str  # one of FAMILIES, or "generic"
    native: str  # what the CPU itself offers
    extensions: tuple[str, ...] = ()
    caches: Caches = field(default_factory=Caches)
    forced: bool = False

    @property
    def flags(self) -> tuple[str, ...]:
        """Compiler flags that keep -march=native code within the family."""
        if self.family == self.native:
            return ()
        return _LOWER_FLAGS.get(self.family, ())

    def key(self) -> str:
        """What the content-hash cache key includes (the family and the extensions kept)."""
        return self.family + ("+" + "+".join(self.extensions) if self.extensions else "")

    def describe(self) -> str:
        ext = ", ".join(self.extensions) or "no BF16/VNNI/AMX"
        how = f" (forced by RLX_CPU_ISA; the CPU has {self.native})" if self.forced else ""
        return f"{self.family}{how}; {ext}"


def cpu_flags() -> set[str]:
    """The CPU's feature flags as /proc/cpuinfo spells them (empty where there is none)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


# the vector-ISA flags a results file or a test report names: the AVX-512 subsets the
# generated C uses, its dot-product extensions (VNNI, BF16, FP16), the AMX tiles, then AVX-VNNI
# and the AVX2 / SSE / Arm baselines
VECTOR_FLAGS = ("avx512f", "avx512dq", "avx512bw", "avx512vl", "avx512_vnni", "avx512_bf16",
                "avx512_fp16", "amx_tile", "amx_int8", "amx_bf16", "avx_vnni", "avx2", "fma",
                "sse4_2", "neon", "asimd")


def vector_isa(flags: set[str] | list[str] | None = None) -> str:
    """The VECTOR_FLAGS among ``flags`` (default: this CPU's), in VECTOR_FLAGS order, as one
    line; "unknown" where the CPU's flags cannot be read."""
    have = set(cpu_flags() if flags is None else flags)
    if flags is None and not have:
        return "unknown"
    return " ".join(f for f in VECTOR_FLAGS if f in have) or "none of avx2/avx512"


def native_family(flags: set[str], machine: str | None = None) -> str:
    """The highest family ``flags`` (from /proc/cpuinfo) allow."""
    machine = (machine or platform.machine()).lower()
    if machine not in ("x86_64", "amd64", "i686", "i386"):
        return "generic"
    if all(f in flags for f in _AVX512_CORE) and "fma" in flags:
        return "avx512"
    if "avx2" in flags and "fma" in flags:
        return "avx2"
    return "sse"


def _size(text: str) -> int:
    text = text.strip().upper()
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
    try:
        return int(text.rstrip("KMG")) * scale
    except ValueError:
        return 0


def read_caches(root: Path = Path("/sys/devices/system/cpu/cpu0/cache")) -> Caches:
    """Data cache sizes the OS reports for CPU 0 (sysfs), else sysconf, else zeros."""
    found: dict[int, int] = {}
    try:
        for index in sorted(root.glob("index*")):
            kind = (index / "type").read_text().strip()
            if kind in ("Data", "Unified"):
                found[int((index / "level").read_text())] = _size((index / "size").read_text())
    except (OSError, ValueError):
        found = {}
    if not found:
        for level, name in ((1, "SC_LEVEL1_DCACHE_SIZE"), (2, "SC_LEVEL2_CACHE_SIZE"),
                            (3, "SC_LEVEL3_CACHE_SIZE")):
            try:
                found[level] = max(0, int(os.sysconf(name)))
            except (ValueError, OSError, AttributeError):
                pass
    return Caches(found.get(1, 0), found.get(2, 0), found.get(3, 0))


def choose(native: str, wanted: str) -> tuple[str, bool]:
    """(family, forced) for ``RLX_CPU_ISA=wanted`` on a CPU whose highest family is ``native``."""
    wanted = wanted.strip().lower()
    if wanted in ("", "native", "auto"):
        return native, False
    if wanted not in FAMILIES:
        raise CpuIsaError(f"RLX_CPU_ISA={wanted!r} is not a CPU ISA family rlx knows",
                          hint=f"use one of {', '.join(FAMILIES)} or native")
    if native == "generic" or FAMILIES.index(wanted) < FAMILIES.index(native):
        raise CpuIsaError(f"RLX_CPU_ISA={wanted} is above what this CPU runs ({native})",
                          hint="only lower paths can be forced: "
                               + ", ".join(FAMILIES[FAMILIES.index(native):]
                                           if native in FAMILIES else ["native"]))
    return wanted, wanted != native


def make(cpu_flags: set[str], wanted: str = "", machine: str | None = None,
         caches: Caches | None = None) -> Isa:
    """The Isa for ``cpu_flags`` with ``RLX_CPU_ISA=wanted`` applied (pure: tests call it)."""
    native = native_family(cpu_flags, machine)
    family, forced = choose(native, wanted)
    keep = {"avx512": _EXTENSIONS, "avx2": ("avx_vnni",)}.get(family, ())
    ext = tuple(e for e in keep if e in cpu_flags)
    return Isa(family, native, ext, caches or Caches(), forced)


@functools.cache
def _detect(wanted: str) -> Isa:
    return make(cpu_flags(), wanted, caches=read_caches())


def detect() -> Isa:
    """This process's ISA path: read once (cpuinfo, caches), per value of ``RLX_CPU_ISA``."""
    return _detect(os.environ.get("RLX_CPU_ISA", ""))


@dataclass(frozen=True)
class Blocking:
    """rlx's own sgemm for one family: register tile MR x NR, cache blocks KC, MC, NC."""

    mr: int
    nr: int
    kc: int
    mc: int
    nc: int

    def defines(self) -> str:
        """C macros the sgemm source reads (sgemm.SOURCE keeps its tile from the compiler's
        macros; these set the blocking)."""
        return (f"#define RLX_SG_KC {self.kc}\n#define RLX_SG_MC {self.mc}\n"
                f"#define RLX_SG_NC {self.nc}\n")


# the tuned blocking (sgemm.py: a 2-core Zen 4 VM with 32 KB L1d and 1 MB L2, and its AVX2
# tile on a Zen 3 VM with 512 KB L2) is each bound's ceiling: the formulas below give exactly
# it on both, and smaller blocks only on smaller caches (256 KB L2: Haswell..Skylake client)
_KC_MAX, _MC_MAX, _NC_MAX = 384, 64, 256


def gemm_blocking(family: str, caches: Caches) -> Blocking:
    """The own sgemm's tile and blocking for ``family`` on ``caches``.

    KC: a KC-deep slice of one packed B panel (KC x NR floats) within 1.5x L1d (the row
    tiles of an MC block reuse it from L1/L2); MC: A's MC x KC block within a fifth of L2;
    NC: the KC x NC block of packed B within 3/4 of L2. Each is capped at the tuned value
    and floored at a useful minimum; a cache the OS does not report leaves the tuned value.
    ``RLX_SGEMM_BLOCKING=kc,mc,nc`` overrides them (tuning runs).
    """
    mr, nr = {"avx512": (8, 32), "avx2": (6, 16)}.get(family, (8, 32))
    kc = _KC_MAX
    if caches.l1d:
        kc = max(128, min(_KC_MAX, int(1.5 * caches.l1d) // (nr * 4) // 64 * 64))
    mc, nc = _MC_MAX // mr * mr, _NC_MAX
    if caches.l2:
        mc = max(2 * mr, min(mc, caches.l2 // 5 // (kc * 4) // mr * mr))
        nc = max(2 * nr, min(_NC_MAX, caches.l2 * 3 // 4 // (kc * 4) // nr * nr))
    env = os.environ.get("RLX_SGEMM_BLOCKING", "").strip()
    if env:
        try:
            kc, mc, nc = (int(v) for v in env.split(","))
        except ValueError:
            raise CpuIsaError(f"RLX_SGEMM_BLOCKING={env!r} is not three integers kc,mc,nc",
                              hint="e.g. RLX_SGEMM_BLOCKING=384,60,256, or unset it") from None
        if kc < 1 or mc < mr or mc % mr or nc < nr or nc % nr:
            raise CpuIsaError(f"RLX_SGEMM_BLOCKING={env}: kc must be positive, mc a multiple "
                              f"of {mr} and nc of {nr} (the {family} tile)",
                              hint="e.g. RLX_SGEMM_BLOCKING=384,60,256, or unset it")
    return Blocking(mr, nr, kc, mc, nc)


def blocking() -> Blocking:
    """This process's sgemm blocking (its ISA path, the caches the OS reports)."""
    isa = detect()
    return gemm_blocking(isa.family, isa.caches)


def forced_paths() -> tuple[str, ...]:
    """Every family this machine can run, its own first (what the conformance suite covers)."""
    native = _detect("").native
    if native not in FAMILIES:
        return (native,)
    return FAMILIES[FAMILIES.index(native):]
