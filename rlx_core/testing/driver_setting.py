"""The drivers' fast setting of a fuzz run (``--driver-fast-compile``) and the failures found
only under it.

Under ``--driver-fast-compile`` a driver's own LLVM skips its optimisation passes; our code, the
front ends and the executed semantics are the same. Mesa's gallivm (llvmpipe under opengl,
lavapipe under webgpu, vulkan and directx): not NIR's passes, nor LLVM's code generation. PoCL
(opencl): ``-cl-opt-disable`` on every program build, which also drops the -O3 pipeline its
kernel compiler runs on each work-group function at the first launch (2x less CPU per pack).

rlx never builds with that setting, so a failure seen only under it is the driver's, not rlx's
(PoCL 3.1 segfaults on an empty-batch ``dot_general`` only at ``-cl-opt-disable``). Every crash,
mismatch and timeout found under a fast setting is therefore run again with the driver's
defaults, in a worker of its own: one that passes there is counted apart (``*-fast-only``, the
report's "driver fast-setting only", listed with its case and saved with the triage status
``driver-fast-only``); one that fails there too stays what it was. The fuzzer does it as it
finds them; the merger (``shards.py``) re-checks a shard's findings the same way, running each
saved case under both settings with the current code (one that passes under both is left for
triage), or, without re-running, by the saved case's triage record.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from rlx_core.errors import RlxError
from rlx_core.testing.generator import Case
from rlx_core.testing.report import FAST_ONLY, TargetStats, commit
from rlx_core.testing.runner import AMBIGUOUS, CRASH, KNOWN, MISMATCH, OK, TIMEOUT, Outcome
from rlx_core.testing.watchdog import GuardedRunner

FAST_DRIVER_ENV = {"GALLIVM_PERF": "nopt", "POCL_EXTRA_BUILD_FLAGS": "-cl-opt-disable"}
FAST_DRIVER_TARGETS = {"GALLIVM_PERF": ("opengl", "webgpu", "vulkan", "directx"),
                       "POCL_EXTRA_BUILD_FLAGS": ("opencl",)}
# a finding's status -> the status it is counted under once it passes with the defaults
FAST_ONLY_OF = {MISMATCH: "mismatch-fast-only", CRASH: "crash-fast-only",
                TIMEOUT: "timeout-fast-only"}
PASSES = (OK, KNOWN, AMBIGUOUS)  # outcomes that are not a failure of the target
RunOne = Callable[[str, Case], Outcome]


def fast_driver_env(targets: list[str]) -> dict[str, str]:
    """The ``--driver-fast-compile`` settings that reach a driver of ``targets``."""
    return {k: v for k, v in FAST_DRIVER_ENV.items()
            if set(FAST_DRIVER_TARGETS[k]) & set(targets)}


def driver_text(env: dict[str, str]) -> str:
    """A report's driver line: ``KEY=VALUE`` pairs."""
    return " ".join(f"{k}={v}" for k, v in env.items())


def relevant(driver: str, targets: list[str]) -> str:
    """A report's driver line without the settings no driver of ``targets`` reads (older runs
    recorded GALLIVM_PERF for every target)."""
    keep = [kv for kv in driver.split() if "=" not in kv
            or set(FAST_DRIVER_TARGETS.get(kv.split("=")[0], targets)) & set(targets)]
    return " ".join(keep)


def fast_env_of(header: dict[str, Any], target: str) -> dict[str, str]:
    """The fast settings that reached ``target`` in some session of the run of ``header`` (its
    driver line, and each session's: a resumed run may mix settings)."""
    lines = [header.get("driver", "")] + [s.get("driver", "") for s in
                                          header.get("sessions", [])]
    out: dict[str, str] = {}
    for line in lines:
        for kv in (line or "").split():
            key, _, value = kv.partition("=")
            if value and target in FAST_DRIVER_TARGETS.get(key, ()):
                out[key] = value
    return out


def default_env(fast: dict[str, str]) -> dict[str, str | None]:
    """A worker environment without the fast settings ``fast``: the drivers' defaults."""
    return dict.fromkeys(fast)


def with_defaults(target: str, case: Case, default_one: RunOne) -> str:
    """How ``case``, which failed under a fast setting, runs with the driver's defaults when it
    passes there; '' when it fails there too."""
    o = default_one(target, case)
    if o.status not in PASSES:
        return ""
    return f"{o.status}{' (' + o.known + ')' if o.known else ''} with the driver's defaults"


def count_fast_only(stats: TargetStats, status: str) -> None:
    """Move one ``status`` (crash, mismatch, timeout) of ``stats`` to its fast-only count."""
    if stats.status[status] > 0:
        stats.status[status] -= 1
    stats.status[FAST_ONLY_OF[status]] += 1


def recheck(target: str, stats: TargetStats, fast: dict[str, str], rerun: bool = True,
            case_timeout: float = 60.0) -> int:
    """The merger's re-check of a run that used the fast settings ``fast`` on ``target``: each
    crash, mismatch and timeout of ``stats`` whose saved case fails now under ``fast`` and
    passes with the driver's defaults (or, without ``rerun`` or where the target does not
    execute here, whose triage record says ``driver-fast-only``) is counted apart. Returns how
    many moved; every finding looked at gets a ``fast_only`` or ``triaged`` note."""
    todo = [f for f in stats.findings if f.get("status") in FAST_ONLY_OF
            and f.get("target", target) == target and not f.get("reclassified")]
    if not todo or not fast:
        return 0
    from rlx_core.testing.triage import executes  # (imports every registry target)

    live = rerun and executes(target)
    runners = (GuardedRunner(case_timeout, env=dict(fast)),
               GuardedRunner(case_timeout, env=default_env(fast))) if live else None
    moved = 0
    try:
        for f in todo:
            try:
                how = _recheck_one(target, f, fast, runners)
            except RlxError as err:  # an unreadable case stays what it was, and says why
                f["triaged"], how = f"cannot re-check under the driver's defaults: {err}", ""
            if how:
                count_fast_only(stats, f["status"])
                f["reclassified"], f["fast_only"] = FAST_ONLY, how
                moved += 1
    finally:
        for r in runners or ():
            r.close()
    return moved


def _recheck_one(target: str, f: dict[str, Any], fast: dict[str, str],
                 runners: tuple[GuardedRunner, GuardedRunner] | None) -> str:
    from rlx_core.testing.cases import load
    from rlx_core.testing.triage import saved_case

    path = saved_case(f)
    if path is None:
        f["triaged"] = "no saved case found: not re-checked under the driver's defaults"
        return ""
    case, meta = load(path)
    if runners is None:
        if meta.get("status") == FAST_ONLY:
            return (f"triage record {path.name} ({FAST_ONLY}); not re-run ({target} does not "
                    "execute here, or the merger ran with --no-rerun)")
        f["triaged"] = (f"triage record {path.name}: {meta.get('status') or 'no status'}; not "
                        "re-checked under the driver's defaults")
        return ""
    under_fast, under_default = (r.one(target, case) for r in runners)
    when = f"re-run {time.strftime('%Y-%m-%d', time.gmtime())} at {commit() or '-'}"
    if under_fast.status in PASSES and under_default.status in PASSES:
        f["triaged"] = (f"{when}: passes now under {driver_text(fast)} and with the driver's "
                        "defaults: not re-classified (triage it)")
        return ""
    if under_default.status not in PASSES:
        f["triaged"] = (f"{when}: still {under_default.status} with the driver's defaults "
                        f"({under_default.detail})")
        return ""
    return (f"{when}: {under_fast.status} under {driver_text(fast)} ({under_fast.detail}), "
            f"{under_default.status} with the driver's defaults")
