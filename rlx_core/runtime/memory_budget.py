"""The memory budget: what a compiled program will allocate per call (its arena, its outputs),
checked against a configurable limit before it runs, so that an oversized graph ends in a
typed error naming the tensor instead of a raw MemoryError (or the OOM killer).

The limit, first match wins: the ``memory_limit=`` compile option, the ``RLX_MEMORY_LIMIT``
environment variable, else ``DEFAULT_FRACTION`` of the machine's memory (physical RAM, or the
cgroup limit when that is lower). Both accept bytes (``1000000``), a size with a binary unit
(``512M``, ``8GiB``), a percentage of the machine's memory (``50%``), or ``off``.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any

from rlx_core.errors import RlxError
from rlx_core.ir.graph import Graph

ENV = "RLX_MEMORY_LIMIT"
DEFAULT_FRACTION = 0.8  # leave room for Python, the inputs and whatever else the process holds
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d*)?)\s*([kmgt]?)(?:i?b)?\s*$", re.I)
_PERCENT = re.compile(r"^\s*(\d+(?:\.\d*)?)\s*%\s*$")
_OFF = ("off", "none", "unlimited", "inf")


class MemoryBudgetError(RlxError):
    """A run would allocate more than the memory budget allows (checked before it runs)."""

    code = "RLX-R030"


class MemoryLimitSyntaxError(RlxError):
    """``RLX_MEMORY_LIMIT`` or ``memory_limit=`` is not a size rlx can read."""

    code = "RLX-R031"


def machine_memory() -> int:
    """Bytes of memory this process may use: physical RAM, or a lower cgroup v2/v1 limit."""
    total = 0
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # not POSIX (Windows, Pyodide)
        total = 0
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            with open(path) as f:
                text = f.read().strip()
        except OSError:
            continue
        if text.isdigit() and (total == 0 or 0 < int(text) < total):
            total = int(text)
    return total


def parse_limit(value: Any, source: str) -> int | None:
    """A limit in bytes (None: no limit) from an int or a text such as ``8G`` or ``50%``."""
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        if value < 0:
            raise MemoryLimitSyntaxError(f"{source} is negative ({value})",
                                         hint="give a size in bytes >= 0, or 'off'")
        return value or None
    text = str(value).strip()
    if text.lower() in _OFF or text == "0":
        return None
    m = _SIZE.match(text)
    if m:
        return int(float(m.group(1)) * _UNITS[m.group(2).lower()]) or None
    m = _PERCENT.match(text)
    if m and machine_memory():
        return int(machine_memory() * float(m.group(1)) / 100) or None
    raise MemoryLimitSyntaxError(
        f"{source}={text!r} is not a memory size",
        hint="use bytes (1000000), a size with a unit (512M, 8GiB), a percentage of the "
             "machine's memory (50%), or 'off'")


def resolve_limit(option: Any = None) -> int | None:
    """The budget in bytes for one compile: the option, else the environment, else a default."""
    if option is not None:
        return parse_limit(option, "memory_limit")
    env = os.environ.get(ENV, "").strip()
    if env:
        return parse_limit(env, ENV)
    total = machine_memory()
    return int(total * DEFAULT_FRACTION) if total else None


@dataclass(frozen=True)
class Allocation:
    """One buffer a run allocates: what it is (``arena``, ``output %y``) and its bytes."""

    what: str
    type: str
    nbytes: int


def allocations(lir: Graph, materializes_nodes: bool = False) -> tuple[Allocation, ...]:
    """What one run of ``lir`` allocates besides its inputs and weights: the arena, every
    output, and (for targets that hold every node's result as an array, the numpy reference)
    the largest node value that lives outside the arena."""
    out: list[Allocation] = []
    plan = lir.plan
    if plan is not None and plan.peak_bytes:
        biggest = max(plan.slots, key=lambda s: s.size, default=None)
        detail = f"largest slot %{biggest.value}" if biggest is not None else ""
        out.append(Allocation("arena", detail, int(plan.peak_bytes)))
    types = lir.values()
    for name in dict.fromkeys(lir.outputs):
        t = types[name].type
        out.append(Allocation(f"output %{name}", str(t), t.nbytes))
    if materializes_nodes:
        slotted = {s.value for s in plan.slots} if plan is not None else set()
        loose = [n for n in lir.nodes if n.out.name not in slotted]
        if loose:
            n = max(loose, key=lambda n: n.out.type.nbytes)
            out.append(Allocation(f"intermediate %{n.out.name} ({n.op})", str(n.out.type),
                                  n.out.type.nbytes))
    return tuple(out)


def check_budget(lir: Graph, limit: int | None, *, target: str = "",
                 materializes_nodes: bool = False) -> None:
    """Raise MemoryBudgetError (RLX-R030) if one buffer, or all of them together, exceed
    ``limit`` bytes; nothing is checked when ``limit`` is None."""
    if limit is None:
        return
    allocs = allocations(lir, materializes_nodes)
    where = f"@{lir.name}" + (f" on {target}" if target else "")
    how = (f"raise the budget ({ENV}=32G, or memory_limit= when compiling; 'off' disables it), "
           "or make the tensor smaller (a smaller batch, or split the computation)")
    for a in sorted(allocs, key=lambda a: -a.nbytes):
        if a.nbytes > limit:
            raise MemoryBudgetError(
                f"{where}: {a.what} {a.type} needs {fmt_bytes(a.nbytes)}, over the memory "
                f"budget of {fmt_bytes(limit)}", hint=how)
    total = sum(a.nbytes for a in allocs)
    if total > limit:
        parts = ", ".join(f"{a.what} {fmt_bytes(a.nbytes)}" for a in allocs[:6])
        raise MemoryBudgetError(
            f"{where}: one run allocates {fmt_bytes(total)} ({parts}), over the memory budget "
            f"of {fmt_bytes(limit)}", hint=how)


def fmt_bytes(n: int) -> str:
    """``n`` bytes for people: ``37.3 GiB (40000000000 bytes)``."""
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if size < 1024 or unit == "PiB":
            text = f"{int(size)} B" if unit == "B" else f"{size:.1f} {unit}"
            return text if unit == "B" else f"{text} ({n} bytes)"
        size /= 1024
    return f"{n} B"
