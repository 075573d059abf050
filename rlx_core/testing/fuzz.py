"""The long-run command: ``python -m rlx_core.testing.fuzz --minutes N --targets all`` (or
``--count N``: graphs per target).

Targets take turns (the one with the least time used goes next), one pack of cases per turn,
until the time is up or every target has run ``--count`` graphs. Cases run in a worker process
under a deadline (``watchdog.py``, ``--case-timeout``): a case that hangs a target is a
``timeout`` finding (RLX-Z003) and one that kills it a ``crash`` (RLX-Z004), and the run goes
on. Every unexplained mismatch, crash and timeout is confirmed on its own, shrunk (timeouts are
saved as they are: each try would cost a deadline) and saved (``--cases-dir``); under
``--driver-fast-compile`` each is also run with the drivers' defaults, and one that passes there
is counted apart as the driver's fast setting's (``driver_setting.py``); the report
(``--report``, Markdown, with a ``.json`` twin) is rewritten after every pack, so a run killed
half way still leaves its figures.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rlx_core.errors import RlxError
from rlx_core.ir.printer import print_graph
from rlx_core.targets.cpu.identity import cpu_model
from rlx_core.targets.registry import get_target, target_names
from rlx_core.testing import cases as saved
from rlx_core.testing.driver_setting import (
    FAST_ONLY,
    FAST_ONLY_OF,
    GuardedRunner,
    default_env,
    driver_text,
    fast_driver_env,
    relevant,
    with_defaults,
)
from rlx_core.testing.generator import Case, generate
from rlx_core.testing.profile import profile_for
from rlx_core.testing.refusals import learn
from rlx_core.testing.report import (
    TargetStats,
    case_tag,
    commit,
    generator_fingerprint,
    isa,
    load_report,
    write_report,
)
from rlx_core.testing.runner import CRASH, MISMATCH, REJECTED, TIMEOUT, Outcome
from rlx_core.testing.shrink import shrink

RunOne = Callable[[str, Case], Outcome]
FINDINGS = (MISMATCH, CRASH, TIMEOUT)
__all__ = ["TargetStats", "executing_targets", "main", "write_report"]


class FuzzOptionError(RlxError):
    """A fuzz run asked for something it cannot do (an unknown or non-executing target, no time)."""

    code = "RLX-Z002"


class FuzzResumeError(RlxError):
    """``--resume`` found a state written by a run with other settings (seed, start, count,
    targets or generator size): continuing it would mix two runs in one range."""

    code = "RLX-Z005"


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
                run_one: RunOne, meta: dict[str, Any] | None = None) -> dict[str, Any]:
    """Confirm ``o`` on its own, shrink it, save it (``meta``: more of its triage record); a
    dict for the report. ``run_one`` runs one case (in the fuzz worker, under its deadline)."""
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
                                                  "kind": o.status, **(meta or {})})
        info["case"] = str(path)
    return info


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m rlx_core.testing.fuzz", description=__doc__)
    ap.add_argument("--minutes", type=float, default=None,
                    help="wall-clock limit of this session (default 1, or none with --count)")
    ap.add_argument("--count", type=int, default=0,
                    help="graphs per target: case indices --start .. --start + N - 1")
    ap.add_argument("--start", type=int, default=0,
                    help="first case index (a shard of a long run: other shards take other "
                         "ranges of the same seed)")
    ap.add_argument("--resume", action="store_true",
                    help="continue the run whose state is the --report's .json twin (same "
                         "seed, start, count and targets), if it exists")
    ap.add_argument("--driver-fast-compile", action="store_true",
                    help="the drivers' LLVM skips its optimisation passes (Mesa's gallivm: "
                         "GALLIVM_PERF=nopt; PoCL: -cl-opt-disable): about 2x faster on the "
                         "Mesa GPU targets and opencl; recorded in the report")
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
    if (args.minutes <= 0 or args.pack < 1 or args.count < 0 or args.case_timeout <= 0
            or args.start < 0):
        raise FuzzOptionError("--minutes, --pack and --case-timeout must be positive, --start "
                              "and --count not negative",
                              hint="e.g. --minutes 20 --pack 40 --case-timeout 60")
    targets = resolve_targets(args.targets)
    # the fast settings reach the fuzz worker only; a second worker, with the drivers'
    # defaults, re-runs what fails under them
    fast = fast_driver_env(targets) if args.driver_fast_compile else {}
    profiles = {t: profile_for(t) for t in targets}
    command = "python -m rlx_core.testing.fuzz " + " ".join(argv or sys.argv[1:])
    header, stats = _fresh_or_resumed(args, targets, command)
    for t in targets:  # pairs a resumed run had stopped generating stay stopped
        profiles[t] = learn(profiles[t], list(dict.fromkeys(stats[t].excluded)))[0]
        stats[t].generator = stats[t].generator or generator_fingerprint(profiles[t])
    session = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "commit": commit(),
               "command": command, "graphs": 0, "minutes": 0.0,
               "driver": driver_text(fast),
               "load": _load(),
               # a resumed range may continue with a newer generator: its cases are still
               # distinct, but say which generator drew which session's cases
               "generator": {t: generator_fingerprint(profile_for(t)) for t in targets}}
    header["sessions"].append(session)
    first = {t: stats[t].next for t in targets}
    with GuardedRunner(args.case_timeout, env=dict(fast)) as guard, \
            GuardedRunner(args.case_timeout, env=default_env(fast)) as defaults:
        _loop(args, targets, profiles, stats, header, (guard, defaults, fast), session, first)
    bad = sum(s.status[MISMATCH] + s.status[CRASH] + s.status[TIMEOUT] for s in stats.values())
    print(f"[fuzz] report: {args.report}; unexplained mismatches + crashes + timeouts: {bad}")
    return 1 if bad else 0


def _load() -> str:
    try:
        return " ".join(f"{x:.1f}" for x in os.getloadavg())
    except OSError:
        return "-"


def _fresh_or_resumed(args: argparse.Namespace, targets: list[str], command: str,
                      ) -> tuple[dict[str, Any], dict[str, TargetStats]]:
    """The header and stats to start from: the report's state under ``--resume`` (when the
    report exists), else new ones at case index ``--start``."""
    driver = driver_text(fast_driver_env(targets) if args.driver_fast_compile else {})
    state = args.report.with_suffix(".json")
    if args.resume and state.is_file():
        try:
            header, stats = load_report(args.report)
        except (OSError, ValueError, KeyError, TypeError) as err:
            raise FuzzResumeError(f"cannot read the fuzz state {state}: {err}",
                                  hint="start the run again without --resume") from None
        want = {"seed": args.seed, "start": args.start, "count": args.count,
                "max_ops": args.max_ops, "targets": targets}
        have = {k: header.get(k) for k in want}
        if have != want:
            diff = ", ".join(f"{k} {have[k]} (asked {want[k]})" for k in want
                             if have[k] != want[k])
            raise FuzzResumeError(f"{state} is the state of another run: {diff}",
                                  hint="resume with the run's own options, or give this run "
                                       "its own --report (a new shard: another --start)")
        before = relevant(header.get("driver", ""), targets)
        # the sessions table says which ran how
        header["driver"] = driver if before == driver else "mixed (see sessions)"
        header["command"], header["minutes"], header["pack"] = command, args.minutes, args.pack
        header.setdefault("sessions", [])
        return header, stats
    header = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "command": command,
              "commit": commit(), "cpu": cpu_model(), "isa": isa(), "cores": os.cpu_count(),
              "minutes": args.minutes, "seed": args.seed, "pack": args.pack,
              "count": args.count, "start": args.start, "max_ops": args.max_ops,
              "targets": targets, "case_timeout": args.case_timeout, "elapsed_min": 0.0,
              "driver": driver, "sessions": []}
    return header, {t: TargetStats(start=args.start, next=args.start) for t in targets}


def _loop(args: argparse.Namespace, targets: list[str], profiles: dict[str, Any],
          stats: dict[str, TargetStats], header: dict[str, Any],
          runners: tuple[GuardedRunner, GuardedRunner, dict[str, str]],
          session: dict[str, Any], first: dict[str, int]) -> None:
    guard, defaults, fast = runners
    t_start = time.monotonic()
    end = t_start + args.minutes * 60
    elapsed0, restarts0 = header.get("elapsed_min", 0.0), header.get("restarts", 0)
    seconds = dict.fromkeys(targets, 0.0)  # this session's: targets take turns by it
    while time.monotonic() < end:
        todo = [n for n in targets if not args.count or stats[n].graphs < args.count]
        if not todo:
            return
        t = min(todo, key=lambda name: seconds[name])
        s = stats[t]
        n = args.pack if not args.count else min(args.pack, args.count - s.graphs)
        tag = case_tag(t)
        cases = [generate(profiles[t], (args.seed, tag, s.next + i), args.max_ops)
                 for i in range(n)]
        t0 = time.monotonic()
        compiles = guard.compiles
        outcomes = guard.batch(t, cases)
        s.compiles += guard.compiles - compiles
        for o in outcomes:
            s.graphs += 1
            s.status[o.status] += 1
            s.ops.update(o.case.ops)
            s.dtypes.update(v.type.dtype.name for v in o.case.graph.inputs)
            s.params.update(v.type.dtype.name for v in o.case.graph.params)
            s.params["graphs"] += bool(o.case.graph.params)
            if o.known:
                s.known[o.known] += 1
            if o.status in FINDINGS:
                mine = {k: v for k, v in fast.items() if k in fast_driver_env([t])}
                _finding(args, t, s, o, guard, defaults, mine)
            elif o.status == REJECTED:
                s.rejected_seen += 1
                named = [tuple(x) for x in o.extra.get("refused", ())]
                # the typed error named what it refused: every rejection teaches (a refusal of
                # a fused kernel only, nothing: each of its ops runs alone)
                if named or o.extra.get("fused"):
                    info = {"target": t, "status": o.status, "seed": list(o.case.seed),
                            "detail": o.detail, "nodes": len(o.case.graph.nodes),
                            "shrunk_nodes": len(o.case.graph.nodes),
                            "refused": list(named[0]) if named else None,
                            "named": [list(x) for x in named], "fused": not named,
                            "ir": print_graph(o.case.graph)[:3000]}
                elif s.rejected_seen <= 3 * args.max_findings:  # shrink it: which (op, dtype)?
                    info = investigate(t, o, None, args.shrink_seconds / 3, guard.one)
                    named = [tuple(info["refused"])] if info.get("refused") else []
                else:
                    continue
                key = re.sub(r"\d+", "N", info["detail"])[:160] + f" | {named[:1]}"
                prev = s.rejections.setdefault(key, {**info, "count": 0})
                prev["count"] += 1
                # stop generating them, and the HIR ops lowering to them: listed, not silent
                profiles[t], added = learn(profiles[t], named)
                s.excluded += [p for p in added if p not in s.excluded]
            elif o.status not in ("ok", *FINDINGS) and len(s.examples) < 12:
                s.examples.append({"status": o.status, "known": o.known, "detail": o.detail,
                                   "seed": list(o.case.seed),
                                   "ir": print_graph(o.case.graph)[:3000]})
        s.next += n
        spent = time.monotonic() - t0
        s.seconds += spent
        seconds[t] += spent
        header["elapsed_min"] = elapsed0 + (time.monotonic() - t_start) / 60
        header["restarts"] = restarts0 + guard.worker.restarts
        # main may move under a long run (a restarted worker imports the new code): the
        # commit checked out when the report was last written, beside the one it started on
        session["end_commit"] = commit()
        session["graphs"] = sum(stats[x].next - first[x] for x in targets)
        session["minutes"] = (time.monotonic() - t_start) / 60
        session["range"] = ", ".join(f"{x} {first[x]:,}-{stats[x].next - 1:,}" for x in targets
                                     if stats[x].next > first[x])
        write_report(args.report, stats, header)
        print(f"[fuzz] {t}: {s.graphs} graphs, {dict(s.status)}", flush=True)


def _finding(args: argparse.Namespace, t: str, s: TargetStats, o: Outcome,
             guard: GuardedRunner, defaults: GuardedRunner, fast: dict[str, str]) -> None:
    """Count, and within ``--max-findings`` shrink and save, a crash, mismatch or timeout;
    under a fast setting of ``t``'s driver (``fast``), one that passes with the driver's
    defaults is counted apart (and saved as ``driver-fast-only``)."""
    how = with_defaults(t, o.case, defaults.one) if fast else ""
    if how:
        s.status[o.status] -= 1
        s.status[FAST_ONLY_OF[o.status]] += 1
    if len(s.findings) >= args.max_findings:
        return
    meta = {"status": FAST_ONLY, "driver": driver_text(fast)} if how else {}
    info = investigate(t, o, args.cases_dir, args.shrink_seconds, guard.one, meta)
    if how:
        info["reclassified"] = FAST_ONLY
        info["fast_only"] = f"{o.status} under {driver_text(fast)}, {how}"
    s.findings.append(info)


if __name__ == "__main__":
    sys.exit(main())
