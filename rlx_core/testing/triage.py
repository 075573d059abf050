"""Re-classify a report's unexplained mismatches against the current known-deviations table.

A long run's shards are written over sessions; a mismatch found in one is triaged later (a new
entry in ``deviations.py``, the shrunk case saved under ``tests/fuzz/cases`` as
``known:<id>``), so a shard written before its triage still counts it as unexplained. The
merger (``shards.py``) calls ``reclassify`` on every target's totals: each unexplained mismatch
that has a saved case is run again on its target with the current code and moved to ``known``
when an entry now explains it; where the target does not execute here, the saved case's triage
record is used instead, provided its entry still covers the target (``tests/fuzz/test_cases.py``
checks that record wherever the target runs). A mismatch whose case passes now and is triaged
``fixed`` is counted as ``fixed-since`` (found, then fixed), not as unexplained; one the current
reference calls overflow-ambiguous (evaluation order decides: the reference learnt to flag it
after the run), or triaged ``ambiguous`` where the target does not run, is counted as
``overflow-ambiguous``. The finding keeps its text, with a line saying how it was
re-classified. Mismatches past ``--max-findings`` were not shrunk or saved: they stay
unexplained. (Findings made under a driver's fast setting are re-checked first, by
``driver_setting.recheck``.)
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from rlx_core.errors import RlxError
from rlx_core.testing.report import TargetStats, commit

# triaged cases live in the repository, beside the tests that replay them
FIXED = "fixed-since"  # the status of a mismatch whose saved case is fixed and passes now
AMBIGUOUS = "overflow-ambiguous"  # the runner's status for a result evaluation order decides
CASES = Path(__file__).resolve().parents[2] / "tests" / "fuzz" / "cases"


def saved_case(finding: dict[str, Any]) -> Path | None:
    """The finding's saved ``.rlx``: where the run wrote it, or moved into ``tests/fuzz/cases``
    by its triage."""
    where = finding.get("case")
    if not where:
        return None
    for path in (Path(where), CASES / Path(where).name):
        if path.is_file():
            return path
    return None


def executes(target: str) -> bool:
    """True where ``target`` executes here (its saved cases can be re-run)."""
    from rlx_core.testing.fuzz import executing_targets  # (imports every registry target)

    return target in executing_targets()


def _verdict(target: str, path: Path, rerun: bool) -> tuple[str, str]:
    """(deviation id or '', how it was decided) for the saved case at ``path``."""
    from rlx_core.testing.cases import load
    from rlx_core.testing.deviations import entries_for
    from rlx_core.testing.runner import AMBIGUOUS as AMBIGUOUS_NOW
    from rlx_core.testing.runner import KNOWN, OK, run_one

    case, meta = load(path)
    if rerun and executes(target):
        o = run_one(target, case)
        when = f"re-run {time.strftime('%Y-%m-%d', time.gmtime())} at {commit() or '-'}"
        if o.status == KNOWN:
            return o.known, f"{when}: explained by {o.known}"
        if o.status == AMBIGUOUS_NOW:
            return AMBIGUOUS, f"{when}: overflow-ambiguous (the reference flags it now)"
        if o.status == OK and meta.get("status") == "fixed":  # and its triage says so
            return FIXED, f"{when}: passes now, fixed since ({path.name}: fixed)"
        if o.status == OK:
            return "", f"{when}: passes now, but its case is not triaged as fixed"
        return "", f"{when}: still {o.status} ({o.detail})"
    status = str(meta.get("status", ""))
    entry = status.split(":", 1)[1] if status.startswith("known:") else ""
    why = f"{target} does not execute here" if rerun else "the merger ran with --no-rerun"
    if status == "ambiguous":
        return AMBIGUOUS, f"triage record {path.name} (ambiguous); not re-run: {why}"
    if entry and entry in {k.id for k in entries_for(target)}:
        return entry, f"triage record {path.name} ({status}); not re-run: {why}"
    return "", f"triage record {path.name}: {status or 'no status'}; not re-run"


def reclassify(target: str, stats: TargetStats, rerun: bool = True) -> int:
    """Move ``stats``' unexplained mismatches that the current table explains to ``known``
    (per entry), that were fixed since to ``fixed-since``, or that evaluation order decides to
    ``overflow-ambiguous``; returns how many moved. Each finding gets a ``triaged`` note either
    way."""
    moved = 0
    for f in stats.findings:
        if f.get("status") != "mismatch" or f.get("target", target) != target \
                or f.get("reclassified"):
            continue
        path = saved_case(f)
        if path is None:
            f["triaged"] = "no saved case found: not re-classified"
            continue
        try:
            entry, how = _verdict(target, path, rerun)
        except RlxError as err:  # an unreadable case stays unexplained, and says why
            entry, how = "", f"cannot re-check: {err}"
        f["triaged"] = how
        if entry and stats.status["mismatch"] > 0:
            stats.status["mismatch"] -= 1
            if entry in (FIXED, AMBIGUOUS):  # fixed since, or order decides: counted apart
                stats.status[entry] += 1
                f["reclassified"] = entry
            else:
                stats.status["known"] += 1
                stats.known[entry] += 1
                f["reclassified"] = f"known:{entry}"
            moved += 1
    return moved
