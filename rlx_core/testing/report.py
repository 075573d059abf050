"""A fuzz run's figures per target, their JSON form (which is also the run's state) and the
Markdown report.

The JSON twin of a report holds, per target, the range of case indices run so far (case ``k`` of
a run with seed ``S`` on target ``t`` is ``generate(profile, (S, tag(t), k))``), the (op, dtype)
pairs the run stopped generating after the target refused them, and the generator's fingerprint.
It is rewritten (atomically) after every pack, so a run can be resumed where it stopped
(``--resume``) and the reports of several runs merged into one per target without counting a
case twice (shards.py).
"""

from __future__ import annotations

import collections
import hashlib
import json
import os
import subprocess
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlx_core.testing.deviations import KNOWN, input_policy

# a finding re-classified as failing only under a driver's fast setting (driver_setting.py)
FAST_ONLY = "driver-fast-only"


@dataclass
class TargetStats:
    """One target's figures in a run: cases ``start`` .. ``next - 1`` (``graphs`` of them)."""

    graphs: int = 0
    compiles: int = 0
    seconds: float = 0.0
    status: collections.Counter = field(default_factory=collections.Counter)
    known: collections.Counter = field(default_factory=collections.Counter)
    ops: collections.Counter = field(default_factory=collections.Counter)
    dtypes: collections.Counter = field(default_factory=collections.Counter)
    # parameters (bound weights, generator.py) by dtype, and the graphs holding any
    params: collections.Counter = field(default_factory=collections.Counter)
    findings: list[dict[str, Any]] = field(default_factory=list)
    rejections: dict[str, dict[str, Any]] = field(default_factory=dict)  # by message, shrunk
    rejected_seen: int = 0
    examples: list[dict[str, Any]] = field(default_factory=list)  # known/ambiguous samples
    start: int = 0  # first case index of the run
    next: int = 0  # the case index the next pack starts at
    excluded: list[tuple[str, str]] = field(default_factory=list)  # refused (op, dtype) pairs
    generator: str = ""  # fingerprint of the generator and the target's profile
    covered: list[list[int]] = field(default_factory=list)  # merged reports: [seed, a, b) ranges


def case_tag(target: str) -> int:
    """The target's part of a case seed: one seed gives each target different graphs."""
    return zlib.crc32(target.encode()) & 0xFFFF


def generator_fingerprint(profile: Any) -> str:
    """What decides which graph a case index is: the generator's source and the target's
    profile (its capability table). Runs with equal fingerprints generate the same cases."""
    here = Path(__file__).parent
    h = hashlib.sha256()
    for name in ("generator.py", "values.py", "profile.py"):
        h.update((here / name).read_bytes())
    h.update(repr((profile.dtypes, sorted(profile.ops), profile.hir, profile.specials,
                   profile.index_dtype)).encode())
    return h.hexdigest()[:16]


def stats_to_json(s: TargetStats) -> dict[str, Any]:
    return {"graphs": s.graphs, "compiles": s.compiles, "seconds": round(s.seconds, 1),
            "status": dict(s.status), "known": dict(s.known), "ops": dict(s.ops),
            "dtypes": dict(s.dtypes), "params": dict(s.params), "findings": s.findings,
            "examples": s.examples,
            "rejections": list(s.rejections.values()), "rejected_seen": s.rejected_seen,
            "start": s.start, "next": s.next, "excluded": [list(p) for p in s.excluded],
            "generator": s.generator, "covered": s.covered}


def stats_from_json(d: dict[str, Any]) -> TargetStats:
    C = collections.Counter
    rej = {f"{r['detail']} | {r.get('refused')}": r for r in d.get("rejections", [])}
    return TargetStats(
        graphs=d["graphs"], compiles=d.get("compiles", 0), seconds=d.get("seconds", 0.0),
        status=C(d.get("status", {})), known=C(d.get("known", {})), ops=C(d.get("ops", {})),
        dtypes=C(d.get("dtypes", {})), params=C(d.get("params", {})),
        findings=list(d.get("findings", [])),
        rejections=rej, rejected_seen=d.get("rejected_seen", len(rej)),
        examples=list(d.get("examples", [])), start=d.get("start", 0),
        next=d.get("next", d.get("start", 0) + d["graphs"]),
        excluded=[(a, b) for a, b in d.get("excluded", [])],
        generator=d.get("generator", ""), covered=[list(c) for c in d.get("covered", [])])


def isa() -> str:
    """The CPU's vector ISA flags, as the benchmarks' results files name them."""
    from rlx_core.targets.cpu.isa import vector_isa

    return vector_isa()


def commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, timeout=10, cwd=Path(__file__).parent).stdout.strip()
    except OSError:
        return "unknown"


def session_commits(session: dict[str, Any]) -> str:
    """A run's commit, or ``start..end`` when main moved while it ran (``end_commit``: the
    commit checked out at its last report)."""
    end = session.get("end_commit")
    return f"{session['commit']}..{end}" if end and end != session["commit"] else \
        session["commit"]


def _write_atomic(path: Path, text: str) -> None:
    # a run killed while writing must leave the previous state, not half a file
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def load_report(path: Path) -> tuple[dict[str, Any], dict[str, TargetStats]]:
    """(header, stats per target) of a report's JSON twin."""
    data = json.loads(path.with_suffix(".json").read_text())
    return data["header"], {t: stats_from_json(d) for t, d in data["targets"].items()}


def _range_text(s: TargetStats, seed: Any) -> str:
    if s.covered:
        return "; ".join(f"seed {a}: {b:,}-{c - 1:,}" for a, b, c in s.covered)
    return f"seed {seed}: {s.start:,}-{s.next - 1:,}" if s.next > s.start else "none"


def write_report(path: Path, stats: dict[str, TargetStats], header: dict[str, Any]) -> None:
    data = {"header": header, "targets": {t: stats_to_json(s) for t, s in stats.items()}}
    path.parent.mkdir(parents=True, exist_ok=True)
    _write_atomic(path.with_suffix(".json"), json.dumps(data, indent=1, sort_keys=True) + "\n")
    lines = [f"# Differential fuzzing report ({header['date']})", "",
             f"Command: `{header['command']}`  ", f"Commit: {header['commit']}  ",
             f"CPU: {header['cpu']} ({header['isa']}), {header['cores']} cores  ",
             f"Wall time: {header['elapsed_min']:.1f} min of {header['minutes']} (seed "
             f"{header['seed']}, {header['pack']} cases per pack, goal "
             f"{header.get('count') or '-'} graphs per target, case deadline "
             f"{header.get('case_timeout', '-')} s, worker restarts "
             f"{header.get('restarts', 0)})  ",
             f"Driver compilers: {header.get('driver') or 'default settings (full optimisation)'}",
             ""]
    lines += ["Cases covered (case indices per seed; each case is run and counted once): "
              + "; ".join(f"{t} {_range_text(s, header['seed'])}" for t, s in stats.items()),
              ""]
    if header.get("sessions"):
        lines += ["| session | commit | case indices | graphs | minutes | load average at start "
                  "| driver compilers |", "|---|---|---|---|---|---|---|"]
        lines += [f"| {x['date']} | {session_commits(x)} | {x.get('range', '-')} | "
                  f"{x['graphs']:,} | "
                  f"{x['minutes']:.1f} | {x.get('load', '-')} | {x.get('driver') or 'default'} |"
                  for x in header["sessions"]]
        lines.append("")
    if header.get("shards"):
        lines += ["Merged from:", "",
                  "| shard | target | seed | case indices | graphs | commits | driver |",
                  "|---|---|---|---|---|---|---|"]
        lines += [f"| `{x['file']}` | {x['target']} | {x['seed']} | {x['range']} | "
                  f"{x['graphs']:,} | {x['commits']} | {x.get('driver') or 'default'} |"
                  for x in header["shards"]]
        lines.append("")
        runs = dict.fromkeys(f"`{x['command']}` ({x.get('date') or '-'})"
                             for x in header["shards"] if x.get("command"))
        if runs:
            lines += ["Runs merged (each shard's latest command, and the date it started):", ""]
            lines += [f"- {r}" for r in runs] + [""]
    lines += ["| target | graphs | compiles | graphs/s | ok | unexplained mismatches | crashes "
              "| timeouts | rejected (typed) | known deviations | overflow-ambiguous "
              "| reference refused |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for t, s in stats.items():
        st = s.status
        rate = s.graphs / s.seconds if s.seconds else 0.0
        known = ", ".join(f"{k}: {v}" for k, v in sorted(s.known.items())) or "0"
        lines.append(f"| {t} | {s.graphs} | {s.compiles} | {rate:.1f} | {st['ok']} | "
                     f"{_count(s, 'mismatch')} | {_count(s, 'crash')} | "
                     f"{_count(s, 'timeout')} | {st['rejected']} | "
                     f"{known} | "
                     f"{st['overflow-ambiguous']} | {st['reference-error']} |")
    lines += ["", "## Known deviations (explained, owned, counted above)", "",
              "| id | targets | owner | fed special values | why |", "|---|---|---|---|---|"]
    for k in KNOWN:
        lines.append(f"| {k.id} | {', '.join(k.targets)} | {k.owner} | "
                     f"{'yes' if k.feeds_specials else 'no'} | {k.why} |")
    lines += ["", "Special input values (NaN, +-inf, subnormals, dtype extremes) per target: "
              + ", ".join(f"{t}: {'yes' if input_policy(t) else 'no'}" for t in stats), ""]
    lines += ["## Coverage", ""]
    for t, s in stats.items():
        lines.append(f"- **{t}** ops: " + ", ".join(f"{k} {v}" for k, v in sorted(s.ops.items())))
        lines.append("  dtypes (graph inputs): "
                     + ", ".join(f"{k} {v}" for k, v in sorted(s.dtypes.items())))
        if s.params:
            lines.append(f"  parameters (bound weights) in {s.params['graphs']:,} graphs: "
                         + ", ".join(f"{k} {v}" for k, v in sorted(s.params.items())
                                     if k != "graphs"))
    found = [f for s in stats.values() for f in s.findings]
    for title, group in (
            ("Unexplained mismatches, crashes and timeouts (shrunk)",
             [f for f in found if not f.get("reclassified")]),
            ("Mismatches explained or fixed since the run (re-classified by the merger, "
             "counted as known, overflow-ambiguous or fixed above)",
             [f for f in found if f.get("reclassified") not in (None, FAST_ONLY)]),
            ("Failures under the driver's fast setting only (they pass with the driver's "
             "default settings, which rlx builds with: counted apart above, as driver "
             "fast-setting only, not as failures of rlx)",
             [f for f in found if f.get("reclassified") == FAST_ONLY])):
        if not group and not title.startswith("Unexplained"):
            continue
        lines += ["", f"## {title}", ""]
        if not group:
            lines.append("None.")
        for f in group:
            lines += [f"### {f['target']}: {f['status']} (seed {f['seed']})", "",
                      f"{f['detail']}  ", f"{f.get('alone', '')}  ",
                      f"shrunk {f['nodes']} -> {f['shrunk_nodes']} nodes; saved: "
                      f"`{f.get('case', '-')}`  "]
            if f.get("fast_only"):
                lines.append(f"Driver fast setting only: {f['fast_only']}  ")
            if f.get("triaged"):
                lines.append(f"Re-checked by the merger: {f['triaged']}")
            lines += ["", "```", f["ir"].rstrip(), "```", ""]
    lines += ["## Typed rejections of well-typed graphs (shrunk, one per message)", "",
              "A well-typed graph refused with a typed error. `RLX-L` codes are the dispatch "
              "contract refusing honestly at legalization (no route to the target's "
              "primitives: not a defect); any other code (render, shader, C build) is a claim "
              "of the capability table the target could not honour.", ""]
    for t, s in stats.items():
        if s.excluded:
            lines += [f"Not generated for {t} after its refusals ({len(s.excluded)} pairs, "
                      "HIR ops whose lowering holds a refused pair included): "
                      + ", ".join(f"`{a}` {b}" for a, b in s.excluded), ""]
        over = [p for p in _overlearned(list(s.rejections.values())) if p in s.excluded]
        if over:
            lines += [f"Over-refused by the run ({len(over)} of them): "
                      + ", ".join(f"`{a}` {b}" for a, b in over) + ". The merger re-checked "
                      "their rejections: the firmware refuses those graphs now only as fused "
                      "kernels (RLX-U015), and runs each op alone; the run did not draw them "
                      "after the refusal, so its graphs cover them less.", ""]
        for r in s.rejections.values():
            lines += [f"### {t}: {r['detail']} ({r.get('count', 1)} graphs)", ""]
            named = r.get("named") or ([r["refused"]] if r.get("refused") else [])
            if named:
                how = ("read from the typed error; the graph as drawn" if r.get("named")
                       else "shrunk to it")
                lines += [f"Not generated for {t} after this: "
                          + ", ".join(f"`{a}` on `{b}`" for a, b in named)
                          + f" (the claim the target refused; {how}).", ""]
            if r.get("fused_now"):
                lines += ["Re-checked by the merger: refused now only as a fused kernel "
                          "(RLX-U015): no op of it is refused alone.", ""]
            elif r.get("fused"):
                lines += ["A refusal of ops fused into one kernel (each runs alone): nothing "
                          "stopped (the graph as drawn).", ""]
            lines += ["```", r["ir"].rstrip(), "```", ""]
    lines += ["## Samples of known / overflow-ambiguous outputs", ""]
    for t, s in stats.items():
        for k, e in enumerate(s.examples[:4]):
            lines.append(f"- {t} {e['status']} {e['known']} seed {e['seed']}: {e['detail']}")
            if k < 2:
                lines += ["", "  ```", *("  " + x for x in e["ir"].rstrip().splitlines()),
                          "  ```"]
    _write_atomic(path, "\n".join(lines) + "\n")


def _count(s: TargetStats, status: str) -> str:
    """A report cell: the unexplained ``status`` count, then what was counted apart."""
    notes = []
    if status == "mismatch":
        moved = [str(f.get("reclassified")) for f in s.findings]
        explained = sum(m.startswith("known:") or m == "overflow-ambiguous" for m in moved)
        if explained:
            notes.append(f"+{explained} explained since the run")
        if s.status["fixed-since"]:
            notes.append(f"+{s.status['fixed-since']} fixed since the run")
    if s.status[f"{status}-fast-only"]:
        notes.append(f"+{s.status[f'{status}-fast-only']} driver fast-setting only")
    return f"{s.status[status]}" + (f" ({', '.join(notes)})" if notes else "")


def _overlearned(rejections: list[dict[str, Any]]) -> list[tuple[str, str]]:
    from rlx_core.testing.refusals import overlearned  # refusals imports the generator

    return overlearned(rejections)


