"""Merge the reports of several fuzz runs (shards) into one report per target.

A long run need not fit one session: each run covers a range of case indices of one seed
(``--start``, ``--count``; ``--resume`` continues a range another session began), and its
report's JSON twin records the range it finished. Merging adds the figures up per target, lists
the shards, and refuses ranges that overlap (the same case counted twice), so a merged report's
graph count is the number of distinct cases run::

    python -m rlx_core.testing.shards --report benchmarks/results/fuzz_long_{target}_CPU.md \\
        benchmarks/results/fuzz_shards/*.json

Merging also re-checks what the runs found, with the current code: findings made under a
driver's fast setting (``driver_setting.recheck``: failures only there are counted apart) and
unexplained mismatches triaged since (``triage.reclassify``). A single report goes through the
same re-check when it is "merged" alone, including one written before shards existed (a run
from case 0; it cannot be merged with others, its case indices are not comparable) and a merged
report itself (its shards are listed again, not the merged file)::

    python -m rlx_core.testing.shards --report benchmarks/results/fuzz_long_tpu_CPU.md \\
        benchmarks/results/fuzz_long_tpu_CPU.json
"""

from __future__ import annotations

import argparse
import collections
import sys
import time
from pathlib import Path
from typing import Any

from rlx_core.errors import RlxError
from rlx_core.testing.driver_setting import fast_env_of, recheck
from rlx_core.testing.refusals import recheck_fused
from rlx_core.testing.report import TargetStats, load_report, session_commits, write_report
from rlx_core.testing.triage import reclassify


class FuzzShardError(RlxError):
    """Fuzz reports that cannot be merged: their case ranges overlap, one has no case range
    (written before shards existed), or their settings differ."""

    code = "RLX-Z006"


def _ranges(s: TargetStats, header: dict[str, Any]) -> list[tuple[int, int, int]]:
    """(seed, first, end) case ranges a report covers for one target."""
    if s.covered:
        return [(a, b, c) for a, b, c in s.covered]
    return [(header["seed"], s.start, s.next)] if s.next > s.start else []


def _coalesce(ranges: list[tuple[int, int, int]]) -> list[list[int]]:
    out: list[list[int]] = []
    for seed, a, b in sorted(ranges):
        if out and out[-1][0] == seed and out[-1][2] == a:
            out[-1][2] = b
        else:
            out.append([seed, a, b])
    return out


def _add(total: TargetStats, s: TargetStats) -> None:
    total.graphs += s.graphs
    total.compiles += s.compiles
    total.seconds += s.seconds
    for mine, theirs in ((total.status, s.status), (total.known, s.known), (total.ops, s.ops),
                         (total.dtypes, s.dtypes), (total.params, s.params)):
        mine.update(theirs)
    total.findings += s.findings
    total.rejected_seen += s.rejected_seen
    for key, r in s.rejections.items():
        prev = total.rejections.get(key)
        if prev is None:
            total.rejections[key] = dict(r)
        else:
            prev["count"] = prev.get("count", 1) + r.get("count", 1)
    total.examples = (total.examples + s.examples)[:12]
    total.excluded += [p for p in s.excluded if p not in total.excluded]


def merge(paths: list[Path], rerun: bool = True,
          ) -> dict[str, tuple[dict[str, Any], TargetStats]]:
    """Per target, the merged (header, stats) of the reports at ``paths``: findings made under
    a driver's fast setting re-checked with the driver's defaults, unexplained mismatches
    re-classified against the current table (``rerun``: by running their saved cases where the
    target executes, else by their triage records)."""
    by_target: dict[str, list[tuple[Path, dict[str, Any], TargetStats]]] = \
        collections.defaultdict(list)
    for p in paths:
        try:
            header, stats = load_report(p)
        except (OSError, ValueError, KeyError, TypeError) as err:
            raise FuzzShardError(f"cannot read the fuzz report {p.with_suffix('.json')}: {err}",
                                 hint="pass the .json twins the fuzz runs wrote") from None
        for t, s in stats.items():
            by_target[t].append((p, header, s))
    out = {}
    for t, parts in by_target.items():
        for p, header, s in parts:  # a run before shards began at case 0: alone, re-checked
            if "start" not in header and not s.covered and len(parts) > 1:
                raise FuzzShardError(f"{p}: no case range for {t} (written before shards)",
                                     hint="merge only reports of runs with --start/--resume; "
                                          "re-check an older report alone")
        seen: list[tuple[int, int, int, Path]] = []
        for p, header, s in parts:
            for seed, a, b in _ranges(s, header):
                for seed2, a2, b2, p2 in seen:
                    if seed == seed2 and a < b2 and a2 < b:
                        raise FuzzShardError(
                            f"{t}: {p} and {p2} both cover cases {max(a, a2):,}-"
                            f"{min(b, b2) - 1:,} of seed {seed}",
                            hint="each shard needs its own range of --start/--count (or its "
                                 "own --seed); merge each report once")
                seen.append((seed, a, b, p))
            if s.graphs != sum(b - a for _, a, b in _ranges(s, header)):
                raise FuzzShardError(f"{p}: {t} counts {s.graphs} graphs but covers "
                                     f"{sum(b - a for _, a, b in _ranges(s, header))} cases",
                                     hint="a damaged or hand-edited report: run it again")
        ops = {h.get("max_ops") for _, h, _ in parts}
        if len(ops) > 1:
            raise FuzzShardError(f"{t}: shards with different --max-ops {sorted(map(str, ops))}",
                                 hint="merge shards of one kind of run")
        fast_moved = 0
        for _, header, s in parts:  # which shard ran under a fast setting decides: before adding
            fast = fast_env_of(header, t)
            if fast:
                fast_moved += recheck(t, s, fast, rerun, float(header.get("case_timeout", 60)))
        total = TargetStats()
        for _, _, s in parts:
            _add(total, s)
        total.covered = _coalesce([(seed, a, b) for seed, a, b, _ in seen])
        gens = sorted({s.generator for _, _, s in parts if s.generator})
        total.generator = ", ".join(gens)
        moved = reclassify(t, total, rerun)
        recheck_fused(t, list(total.rejections.values()))
        out[t] = (_header(t, parts, total), total)
        out[t][0]["reclassified"] = moved + fast_moved
    return out


def _header(target: str, parts: list[tuple[Path, dict[str, Any], TargetStats]],
            total: TargetStats) -> dict[str, Any]:
    heads = [h for _, h, _ in parts]

    def joined(key: str) -> str:
        return ", ".join(sorted({str(h.get(key, "-")) for h in heads}))

    shards = []
    for p, h, s in parts:
        if h.get("shards"):  # a merged report merged again: its shards, not itself
            shards += [x for x in h["shards"] if x.get("target", target) == target]
            continue
        sessions = h.get("sessions") or [{"commit": h.get("commit", "-")}]
        shards.append({"file": str(p.with_suffix(".json")), "target": target,
                       "seed": h.get("seed"),
                       "range": ", ".join(f"{a:,}-{b - 1:,}" for _, a, b in _ranges(s, h))
                       + ("" if "start" in h or s.covered else " (one run, before shards)"),
                       "graphs": s.graphs, "driver": h.get("driver", ""),
                       "commits": ", ".join(dict.fromkeys(session_commits(x)
                                                          for x in sessions)),
                       "command": h.get("command", ""), "date": h.get("date", "")})
    return {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "command": "python -m rlx_core.testing.shards " + " ".join(sys.argv[1:]),
            "commit": joined("commit"), "cpu": joined("cpu"), "isa": joined("isa"),
            "cores": joined("cores"), "minutes": round(sum(h.get("elapsed_min", 0.0)
                                                           for h in heads), 1),
            "elapsed_min": sum(h.get("elapsed_min", 0.0) for h in heads),
            "seed": joined("seed"), "pack": joined("pack"),
            "count": sum(h.get("count") or s.graphs for _, h, s in parts),
            "case_timeout": joined("case_timeout"),
            "restarts": sum(h.get("restarts", 0) for h in heads),
            "driver": " / ".join(sorted({h.get("driver", "") or "default" for h in heads})),
            "shards": shards}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m rlx_core.testing.shards",
                                 description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("reports", nargs="+", type=Path, help="shard reports (.md or .json)")
    ap.add_argument("--report", required=True,
                    help="the merged report; {target} is replaced by each target's name")
    ap.add_argument("--no-rerun", action="store_true",
                    help="re-classify unexplained mismatches by their saved cases' triage "
                         "records only, without running them on their targets")
    args = ap.parse_args(argv)
    merged = merge(args.reports, rerun=not args.no_rerun)
    if len(merged) > 1 and "{target}" not in args.report:
        raise FuzzShardError(f"the shards hold {len(merged)} targets ({', '.join(merged)}) "
                             "and --report has no {target} to tell their reports apart",
                             hint="e.g. --report benchmarks/results/fuzz_long_{target}_CPU.md")
    bad = 0
    for t, (header, total) in merged.items():
        path = Path(args.report.replace("{target}", t))
        write_report(path, {t: total}, header)
        st = total.status
        bad += st["mismatch"] + st["crash"] + st["timeout"]
        print(f"[shards] {t}: {total.graphs:,} graphs from {len(header['shards'])} shard(s), "
              f"{st['mismatch']} unexplained mismatches, {st['crash']} crashes, "
              f"{st['timeout']} timeouts ({header['reclassified']} re-classified as known, "
              f"overflow-ambiguous, fixed since or driver fast-setting only) "
              f"-> {path}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
