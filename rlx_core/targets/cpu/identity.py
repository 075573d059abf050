"""Which CPU this is, precisely enough that measurements from different machines never mix.

Cloud VMs often report a bare ``model name`` ("AMD EPYC", "Intel Xeon Processor") for CPUs
that are generations apart: a Zen 1 with 128-bit FMA units and a Zen 4 with AVX-512 both say
"AMD EPYC", and their timings differ four- to eightfold. ``cpu_model`` therefore adds the
microarchitecture (from the CPUID family and model in /proc/cpuinfo) when the name itself
carries no model number. Results files (``benchmarks/common.cpu_slug``), the peaks store
(``peaks.py``) and the fuzz reports all name the machine through this one function.
"""

from __future__ import annotations

import functools
import platform
import re

# AMD family 0x17 / 0x19 / 0x1a models -> Zen generation (AMD's published model ranges)
_AMD: tuple[tuple[int, range, str], ...] = (
    (0x17, range(0x00, 0x30), "Zen 1"),  # Naples, Raven Ridge; Zen+ (0x08, 0x18) alike
    (0x17, range(0x30, 0x100), "Zen 2"),  # Rome, Renoir, Matisse
    (0x19, range(0x00, 0x10), "Zen 3"),  # Milan
    (0x19, range(0x10, 0x20), "Zen 4"),  # Genoa
    (0x19, range(0x20, 0x60), "Zen 3"),  # Vermeer, Cezanne, Rembrandt (Zen 3+)
    (0x19, range(0x60, 0x100), "Zen 4"),  # Raphael, Phoenix, Bergamo, Siena
    (0x1A, range(0x00, 0x100), "Zen 5"),  # Turin, Granite Ridge
)

# Intel family 6 server models (the ones clouds rent with a bare "Intel Xeon Processor") ->
# generation; model 0x55 is told apart by its stepping (Intel's published CPUID tables)
_INTEL: dict[int, str] = {
    0x6A: "Ice Lake-SP", 0x6C: "Ice Lake-SP",
    0x8F: "Sapphire Rapids", 0xCF: "Emerald Rapids",
    0xAD: "Granite Rapids", 0xAE: "Granite Rapids", 0xAF: "Sierra Forest",
}


def _intel_0x55(stepping: int) -> str:
    if stepping >= 10:
        return "Cooper Lake"
    return "Cascade Lake" if stepping >= 5 else "Skylake-SP"


def _fields(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            break  # the first processor's block is enough
        key, _, value = line.partition(":")
        out.setdefault(key.strip(), value.strip())
    return out


def microarchitecture(vendor: str, family: int, model: int, stepping: int = -1) -> str:
    """A short name for the core generation ("Zen 1", "Emerald Rapids"), or
    ``family F model M`` if unknown."""
    if vendor == "AuthenticAMD":
        for fam, models, name in _AMD:
            if family == fam and model in models:
                return name
    if vendor == "GenuineIntel" and family == 6:
        if model == 0x55:
            return _intel_0x55(stepping)
        if model in _INTEL:
            return _INTEL[model]
    return f"family {family} model {model}"


def describe(cpuinfo: str, fallback: str = "") -> str:
    """The CPU's name from a /proc/cpuinfo text, with the microarchitecture appended when the
    name has no digit in it (a VM's generic "AMD EPYC")."""
    f = _fields(cpuinfo)
    name = f.get("model name", "") or fallback
    if re.search(r"\d", name) or "cpu family" not in f:
        return name
    try:
        arch = microarchitecture(f.get("vendor_id", ""), int(f["cpu family"]),
                                 int(f.get("model", "0")), int(f.get("stepping", "-1")))
    except ValueError:
        return name
    return f"{name} ({arch})".strip()


@functools.lru_cache(maxsize=1)
def cpu_model() -> str:
    """This machine's CPU, e.g. ``AMD EPYC 7B13`` or ``AMD EPYC (Zen 1)``."""
    fallback = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            return describe(f.read(), fallback) or fallback
    except OSError:
        return fallback
