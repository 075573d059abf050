"""The long-run command: ``python -m rlx_core.testing.fuzz --minutes N --targets all`` (or
``--count N``: graphs per target).

Targets take turns (the one with the least time used goes next), one pack of cases per turn,
until the time is up or every target has run ``--count`` graphs. Cases run in a worker process
under a deadline (``watchdog.py``, ``--case-timeout``): a case that hangs a target is a
``timeout`` finding (RLX-Z003) and one that kills it a ``crash`` (RLX-Z004), and the run goes
on. Every unexplained mismatch, crash and timeout is confirmed on its own, shrunk (timeouts are
saved as they are: each try would cost a deadline) and saved (``--cases-dir``); the report
(``--report``, Markdown, with a ``.json`` twin) is rewritten after every pack, so a run killed
half way still leaves its figures.
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import subprocess
import sys
import time
import warnings
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from rlx_core.errors import RlxError
from rlx_core.ir.printer import print_graph
from rlx_core.targets.cpu.identity import cpu_model
from rlx_core.targets.registry import get_target, target_names
from rlx_core.testing import cases as saved
from rlx_core.testing.deviations import KNOWN, input_policy
from rlx_core.testing.generator import Case, generate
from rlx_core.testing.profile import profile_for
from rlx_core.testing.runner import CRASH, MISMATCH, REJECTED, TIMEOUT, Outcome
from rlx_core.testing.shrink import shrink
from rlx_core.testing.watchdog import GuardedRunner

RunOne = Callable[[str, Case], Outcome]
FINDINGS = (MISMATCH, CRASH, TIMEOUT)


class FuzzOptionError(RlxError):
    """A fuzz run asked for something it cannot do (an unknown or non-executing target, no time)."""

    code = "RLX-Z002"


def executing_targets() -> list[str]:
    """Registry targets that execute here (``verification == 'executes'`` and available)."""
    out = []
    for name in target_names():
        try:
            tgt = get_target(name)
        except (ImportError, RlxError):
            continue
        if str(getattr(tgt, "verification", "")).startswith("executes") and tgt.available()[0]:
            out.append(name)
    return out


def resolve_targets(spec: str) -> list[str]:
    if spec == "all":
        return executing_targets()
    names = [s.strip() for s in spec.split(",") if s.strip()]
    ok = set(executing_targets())
    bad = [n for n in names if n not in ok]
    if bad:
        raise FuzzOptionError(f"target(s) {', '.join(bad)} do not execute here",
                              hint=f"executing targets: {', '.join(sorted(ok)) or 'none'}")
    return names


@dataclass
class TargetStats:
    graphs: int = 0
    compiles: int = 0
    seconds: float = 0.0
    status: collections.Counter = field(default_factory=collections.Counter)
    known: collections.Counter = field(default_factory=collections.Counter)
    ops: collections.Counter = field(default_factory=collections.Counter)
    dtypes: collections.Counter = field(default_factory=collections.Counter)
    findings: list[dict[str, Any]] = field(default_factory=list)
    rejections: dict[str, dict[str, Any]] = field(default_factory=dict)  # by message, shrunk
    rejected_seen: int = 0
    examples: list[dict[str, Any]] = field(default_factory=list)  # known/ambiguous samples


def _same_failure(first: Outcome, run_one: RunOne) -> Any:
    def fails(case: Case, target: str) -> bool:
        o = run_one(target, case)
        if o.status != first.status:
            return False
        if first.status in (CRASH, REJECTED):  # the same exception (and code, if typed)
            return o.detail.split("]")[0] == first.detail.split("]")[0]
        return True

    return fails


def investigate(target: str, o: Outcome, folder: Path | None, budget_s: float,
                run_one: RunOne) -> dict[str, Any]:
    """Confirm ``o`` on its own, shrink it, save it; a dict for the report. ``run_one`` runs
    one case (in the fuzz worker, under its deadline)."""
    info: dict[str, Any] = {"target": target, "status": o.status, "seed": list(o.case.seed),
                            "detail": o.detail, "nodes": len(o.case.graph.nodes)}
    alone = o if o.status == TIMEOUT else run_one(target, o.case)
    if o.status == TIMEOUT:  # found alone already (the watchdog bisects); no shrinking
        small = o.case
    elif alone.status != o.status:
        info["alone"] = f"{alone.status} when run alone: fails only inside a pack"
        small = o.case
    else:
        check = _same_failure(alone, run_one)
        small, checks = shrink(o.case, lambda c: check(c, target), output=max(alone.output, 0),
                               budget_s=budget_s)
        info["shrink_checks"] = checks
        info["detail"] = run_one(target, small).detail or alone.detail
    info["shrunk_nodes"] = len(small.graph.nodes)
    if o.status == REJECTED and len(small.graph.nodes) == 1:  # one (op, dtype) it refuses
        n = small.graph.nodes[0]
        d = small.graph.type_of(n.inputs[0]).dtype.name if n.inputs else n.type.dtype.name
        info["refused"] = (n.op, d)
    info["ir"] = print_graph(small.graph)
    if folder is not None:
        path = saved.save(small, folder, target, {"detail": info["detail"],
                                                  "kind": o.status})
        info["case"] = str(path)
    return info


def _isa() -> str:
    try:
        flags = next(line for line in Path("/proc/cpuinfo").read_text().splitlines()
                     if line.startswith("flags")).split()
    except (OSError, StopIteration):
        return "unknown"
    return " ".join(f for f in ("avx2", "fma", "avx512f", "avx512bw", "avx512_fp16") if f in flags)


def _commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, timeout=10).stdout.strip()
    except OSError:
        return "unknown"


def write_report(path: Path, stats: dict[str, TargetStats], header: dict[str, Any]) -> None:
    data = {"header": header, "targets": {
        t: {"graphs": s.graphs, "compiles": s.compiles, "seconds": round(s.seconds, 1),
            "status": dict(s.status), "known": dict(s.known), "ops": dict(s.ops),
            "dtypes": dict(s.dtypes), "findings": s.findings, "examples": s.examples,
            "rejections": list(s.rejections.values())}
        for t, s in stats.items()}}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.with_suffix(".json").write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    lines = [f"# Differential fuzzing report ({header['date']})", "",
             f"Command: `{header['command']}`  ", f"Commit: {header['commit']}  ",
             f"CPU: {header['cpu']} ({header['isa']}), {header['cores']} cores  ",
             f"Wall time: {header['elapsed_min']:.1f} min of {header['minutes']} (seed "
             f"{header['seed']}, {header['pack']} cases per pack, goal "
             f"{header.get('count') or '-'} graphs per target, case deadline "
             f"{header.get('case_timeout', '-')} s, worker restarts "
             f"{header.get('restarts', 0)})", "",
             "| target | graphs | compiles | graphs/s | ok | unexplained mismatches | crashes "
             "| timeouts | rejected (typed) | known deviations | overflow-ambiguous "
             "| reference refused |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for t, s in stats.items():
        st = s.status
        rate = s.graphs / s.seconds if s.seconds else 0.0
        known = ", ".join(f"{k}: {v}" for k, v in sorted(s.known.items())) or "0"
        lines.append(f"| {t} | {s.graphs} | {s.compiles} | {rate:.1f} | {st['ok']} | "
                     f"{st['mismatch']} | {st['crash']} | {st['timeout']} | {st['rejected']} | "
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
    lines += ["", "## Unexplained mismatches, crashes and timeouts (shrunk)", ""]
    found = [f for s in stats.values() for f in s.findings]
    if not found:
        lines.append("None.")
    for f in found:
        lines += [f"### {f['target']}: {f['status']} (seed {f['seed']})", "",
                  f"{f['detail']}  ", f"{f.get('alone', '')}  ",
                  f"shrunk {f['nodes']} -> {f['shrunk_nodes']} nodes; saved: "
                  f"`{f.get('case', '-')}`", "", "```", f["ir"].rstrip(), "```", ""]
    lines += ["## Typed rejections of well-typed graphs (shrunk, one per message)", "",
              "A well-typed graph refused with a typed error. `RLX-L` codes are the dispatch "
              "contract refusing honestly at legalization (no route to the target's "
              "primitives: not a defect); any other code (render, shader, C build) is a claim "
              "of the capability table the target could not honour.", ""]
    for t, s in stats.items():
        for r in s.rejections.values():
            lines += [f"### {t}: {r['detail']} ({r.get('count', 1)} graphs)", ""]
            if r.get("refused"):
                lines += [f"Not generated for {t} after this: `{r['refused'][0]}` on "
                          f"`{r['refused'][1]}` (the claim the target refused).", ""]
            lines += ["```", r["ir"].rstrip(), "```", ""]
    lines += ["## Samples of known / overflow-ambiguous outputs", ""]
    for t, s in stats.items():
        for k, e in enumerate(s.examples[:4]):
            lines.append(f"- {t} {e['status']} {e['known']} seed {e['seed']}: {e['detail']}")
            if k < 2:
                lines += ["", "  ```", *("  " + x for x in e["ir"].rstrip().splitlines()),
                          "  ```"]
    path.write_text("\n".join(lines) + "\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m rlx_core.testing.fuzz", description=__doc__)
    ap.add_argument("--minutes", type=float, default=None,
                    help="wall-clock limit (default 1, or none when --count is given)")
    ap.add_argument("--count", type=int, default=0, help="stop a target after N graphs")
    ap.add_argument("--case-timeout", type=float, default=60.0,
                    help="seconds one case may take alone; a pack of n gets (1 + n/10) times it")
    ap.add_argument("--targets", default="all", help="'all' (every executing target) or a,b")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--pack", type=int, default=40, help="cases per compiled graph")
    ap.add_argument("--max-ops", type=int, default=6)
    ap.add_argument("--report", type=Path, default=Path("fuzz-report.md"))
    ap.add_argument("--cases-dir", type=Path, default=Path("tests/fuzz/cases/new"))
    ap.add_argument("--shrink-seconds", type=float, default=90.0)
    ap.add_argument("--max-findings", type=int, default=8, help="shrunk per target")
    args = ap.parse_args(argv)
    # empty means, overflow in the tolerance's bounds: expected with these inputs, not news
    warnings.simplefilter("ignore", RuntimeWarning)
    if args.minutes is None:
        args.minutes = float("inf") if args.count else 1.0
    if args.minutes <= 0 or args.pack < 1 or args.count < 0 or args.case_timeout <= 0:
        raise FuzzOptionError("--minutes, --pack and --case-timeout must be positive",
                              hint="e.g. --minutes 20 --pack 40 --case-timeout 60")
    targets = resolve_targets(args.targets)
    profiles = {t: profile_for(t) for t in targets}
    stats = {t: TargetStats() for t in targets}
    start = time.monotonic()
    end = start + args.minutes * 60
    header = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
              "command": "python -m rlx_core.testing.fuzz " + " ".join(argv or sys.argv[1:]),
              "commit": _commit(), "cpu": cpu_model(), "isa": _isa(),
              "cores": __import__("os").cpu_count(), "minutes": args.minutes, "seed": args.seed,
              "pack": args.pack, "count": args.count, "case_timeout": args.case_timeout,
              "elapsed_min": 0.0}
    with GuardedRunner(args.case_timeout) as guard:
        _loop(args, targets, profiles, stats, header, guard, start, end)
    bad = sum(s.status[MISMATCH] + s.status[CRASH] + s.status[TIMEOUT] for s in stats.values())
    print(f"[fuzz] report: {args.report}; unexplained mismatches + crashes + timeouts: {bad}")
    return 1 if bad else 0


def _loop(args: argparse.Namespace, targets: list[str], profiles: dict[str, Any],
          stats: dict[str, TargetStats], header: dict[str, Any], guard: GuardedRunner,
          start: float, end: float) -> None:
    batch: collections.Counter[str] = collections.Counter()
    while time.monotonic() < end:
        todo = [n for n in targets if not args.count or stats[n].graphs < args.count]
        if not todo:
            return
        t = min(todo, key=lambda name: stats[name].seconds)
        s = stats[t]
        n = args.pack if not args.count else min(args.pack, args.count - s.graphs)
        tag = zlib.crc32(t.encode()) & 0xFFFF
        cases = [generate(profiles[t], (args.seed, tag, batch[t], i), args.max_ops)
                 for i in range(n)]
        batch[t] += 1
        t0 = time.monotonic()
        compiles = guard.compiles
        outcomes = guard.batch(t, cases)
        s.compiles += guard.compiles - compiles
        for o in outcomes:
            s.graphs += 1
            s.status[o.status] += 1
            s.ops.update(o.case.ops)
            s.dtypes.update(v.type.dtype.name for v in o.case.graph.inputs)
            if o.known:
                s.known[o.known] += 1
            if o.status in FINDINGS and len(s.findings) < args.max_findings:
                s.findings.append(investigate(t, o, args.cases_dir, args.shrink_seconds,
                                              guard.one))
            elif o.status == REJECTED:
                s.rejected_seen += 1
                if s.rejected_seen <= 3 * args.max_findings:  # shrink it: which (op, dtype)?
                    info = investigate(t, o, None, args.shrink_seconds / 3, guard.one)
                    refused = info.get("refused")
                    key = re.sub(r"\d+", "N", info["detail"])[:160] + f" | {refused}"
                    prev = s.rejections.setdefault(key, {**info, "count": 0})
                    prev["count"] += 1
                    if refused:  # stop generating it: listed in the report, not silent
                        profiles[t] = replace(profiles[t], ops=profiles[t].ops - {refused})
            elif o.status not in ("ok", *FINDINGS) and len(s.examples) < 12:
                s.examples.append({"status": o.status, "known": o.known, "detail": o.detail,
                                   "seed": list(o.case.seed),
                                   "ir": print_graph(o.case.graph)[:3000]})
        s.seconds += time.monotonic() - t0
        header["elapsed_min"] = (time.monotonic() - start) / 60
        header["restarts"] = guard.worker.restarts
        write_report(args.report, stats, header)
        print(f"[fuzz] {t}: {s.graphs} graphs, {dict(s.status)}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
