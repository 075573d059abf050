"""Where a team call's threads wait and what they do meanwhile: a claimed kernel's wait for the
other threads' chunks moved past the kernels that do not conflict with it (Footprint, phases),
and the next streamed weight a waiting thread prefetches (Stream, prefetch_hints).

team.team_calls writes both into the team's body: ``rlx_team_defer`` / ``rlx_team_finish`` at
the places ``phases`` picks, and ``rlx_team_hint`` lines from ``prefetch_hints``; the C they
call is team_runtime.BARRIER_C's.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Stream:
    """A kernel's prepacked weight, read from memory once per call: its C pointer expression
    (in the body: ``arena`` in scope) and its bytes."""

    pointer: str
    nbytes: int


# the most lines a spin may prefetch (RLX_WAIT_PREFETCH): a whole hint's share (RLX_TEAM_PF_MAX,
# 256 KB) in one spin
WAIT_PREFETCH_MAX = 262144 // 64


def wait_prefetch_lines() -> int:
    """Cache lines a waiting thread prefetches per spin of the next streamed weight (the
    ``RLX_WAIT_PREFETCH`` environment variable at compile time, 16 by default; 0: no hints;
    not a whole number from 0 to WAIT_PREFETCH_MAX: ArgumentError)."""
    from rlx_core.targets.cpu.env import env_count

    lines = env_count("RLX_WAIT_PREFETCH", "cache lines per spin such as 16, or 0 for none",
                      WAIT_PREFETCH_MAX)
    return 16 if lines is None else lines


def prefetch_hints(
    live: list[int], team: list[bool], streams: list[Stream | None]
) -> dict[int, str]:
    """The hint line before each kernel (or run of serial kernels, which is one chunk) whose
    next streamed weight differs from the previous hint's: the first weight of a kernel after
    it, or none (``rlx_team_hint(0, 0)``)."""
    out: dict[int, str] = {}
    last: Stream | None = None
    pos = 0
    while pos < len(live):
        first = live[pos]
        if not team[first]:  # a serial run: hinted once, before its first kernel
            while pos + 1 < len(live) and not team[live[pos + 1]]:
                pos += 1
        nxt = next((streams[j] for j in live[pos + 1 :] if streams[j]), None)
        if nxt != last and (nxt or last):
            out[first] = (
                f"        rlx_team_hint({nxt.pointer}, {nxt.nbytes});"
                if nxt
                else "        rlx_team_hint(0, 0);"
            )
            last = nxt
        pos += 1
    return out


Region = tuple[str, int, int, int]  # (space: arena, input, param, output; index; bytes [lo, hi))


@dataclass(frozen=True)
class Footprint:
    """The memory a kernel call reads and writes, as regions (a kernel's scratch is a write)."""

    reads: tuple[Region, ...]
    writes: tuple[Region, ...]

    def conflicts(self, other: Footprint) -> bool:
        """Must one of the two wait for the other: does either write what the other touches?"""

        def meet(a: Region, b: Region) -> bool:
            return a[:2] == b[:2] and a[2] < b[3] and b[2] < a[3]

        return any(meet(w, x) for w in self.writes for x in (*other.reads, *other.writes)) or any(
            meet(w, x) for w in other.writes for x in self.reads
        )


def union(feet: list[Footprint | None]) -> Footprint | None:
    """The footprint of kernels run as one unit (None if any is unknown)."""
    if any(f is None for f in feet):
        return None
    return Footprint(
        tuple(r for f in feet for r in f.reads), tuple(r for f in feet for r in f.writes)
    )


def phases(
    live: list[int],
    team: list[bool],
    claims: list[bool],
    feet: list[Footprint | None],
    ends: list[int | None],
) -> tuple[set[int], dict[int, list[int]]]:
    """Which claimed kernels end without waiting for the other threads' chunks, and where
    each such wait goes: {first kernel of the unit before which to wait (-1: the body's end):
    the kernels to wait for}. A unit is a claimed kernel, a run of serial kernels (one chunk)
    or a kernel of static shares (it waits for everything before it: its barrier counts
    threads, not chunks). A kernel's wait is left out when the next unit neither reads nor
    overwrites what it touches (the MLP step's input gradient, weight gradient of the head
    and bias gradient read the same operands and write different buffers), and comes before
    the first unit that does; an unknown footprint (None) conflicts with everything."""
    units: list[list[int]] = []
    for i in live:
        if units and not team[i] and not team[units[-1][0]]:
            units[-1].append(i)  # serial kernels run together (one chunk)
        else:
            units.append([i])
    unit_feet = [union([feet[i] for i in u]) for u in units]

    def clash(a: Footprint | None, b: Footprint | None) -> bool:
        return a is None or b is None or a.conflicts(b)

    defer: set[int] = set()
    finish: dict[int, list[int]] = {}
    pending: list[int] = []
    deferred: dict[int, Footprint | None] = {}  # a deferred unit's footprint, by first kernel
    for pos, unit in enumerate(units):
        first, here = unit[0], unit_feet[pos]
        static = team[first] and not claims[first]
        need = [p for p in pending if static or clash(deferred[p], here)]
        if need:
            finish[first] = need
            pending = [p for p in pending if p not in need]
        nxt = pos + 1 < len(units) and units[pos + 1]
        # a claimed kernel, or a run of serial kernels (one chunk: the first thread there
        # runs it while the others go on to the next unit)
        if (
            (not team[first] or claims[first] and ends[first] is not None)
            and nxt
            and (claims[nxt[0]] or not team[nxt[0]])
            and not clash(here, unit_feet[pos + 1])
        ):
            defer.add(first)
            pending.append(first)
            deferred[first] = here
    if pending:
        finish[-1] = pending
    return defer, finish
