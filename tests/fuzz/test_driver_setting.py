"""A failure found under a driver's fast setting (``--driver-fast-compile``) is run again with the
driver's defaults: one that passes there is the driver's, counted apart as "driver fast-setting
only" and listed with its case, by the fuzzer and by the merger's re-check; one that fails there
too stays a crash. The failure is injected (PoCL's own -cl-opt-disable crash need not be
present): a runner that "crashes" on every graph holding a ``dot_general`` under the test's own
fast setting (or under every setting), on numpy, in process."""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from rlx_core.testing import driver_setting, fuzz
from rlx_core.testing.fuzz import main
from rlx_core.testing.generator import Case, generate
from rlx_core.testing.profile import profile_for
from rlx_core.testing.report import case_tag
from rlx_core.testing.runner import CRASH, Outcome, run_one
from rlx_core.testing.shards import main as merge_main
from rlx_core.testing.shards import merge
from rlx_core.testing.watchdog import Worker

KEY = "RLX_TEST_FAST_SETTING"
DIED = "[RLX-Z004] the fuzz worker died running 1 case(s) on numpy (signal SIGSEGV)"
RUN = ["--targets", "numpy", "--seed", "11", "--count", "20", "--pack", "10",
       "--shrink-seconds", "5", "--driver-fast-compile"]
# graphs of the run's 20 holding a dot_general (counted, so a change of the generator's draws
# does not change what the tests mean)
CRASHES = sum("dot_general" in generate(profile_for("numpy"), (11, case_tag("numpy"), i)).ops
              for i in range(20))


class InjectingRunner:
    """``GuardedRunner``'s interface, in process: a graph holding a ``dot_general`` dies (as a
    worker killed by a driver would) under the fast setting, or under every setting while
    ``everywhere``."""

    everywhere = False

    def __init__(self, case_timeout: float = 60.0, env: dict[str, Any] | None = None) -> None:
        self.env = dict(env or {})
        self.compiles = 0
        self.worker = SimpleNamespace(restarts=0)

    def one(self, target: str, case: Case) -> Outcome:
        if "dot_general" in case.ops and (self.everywhere or self.env.get(KEY) == "1"):
            return Outcome(case, CRASH, DIED)
        return run_one(target, case)

    def batch(self, target: str, cases: list[Case]) -> list[Outcome]:
        return [self.one(target, c) for c in cases]

    def close(self) -> None:
        pass

    def __enter__(self) -> InjectingRunner:
        return self

    def __exit__(self, *exc: object) -> None:
        pass


@pytest.fixture
def fast_setting(monkeypatch) -> type[InjectingRunner]:
    """numpy gets a fast setting of its own (``KEY=1``), and both runners inject the crash."""
    monkeypatch.setitem(driver_setting.FAST_DRIVER_ENV, KEY, "1")
    monkeypatch.setitem(driver_setting.FAST_DRIVER_TARGETS, KEY, ("numpy",))
    monkeypatch.setattr(fuzz, "GuardedRunner", InjectingRunner)
    monkeypatch.setattr(driver_setting, "GuardedRunner", InjectingRunner)
    monkeypatch.setattr(InjectingRunner, "everywhere", False)
    return InjectingRunner


def _run(tmp_path: Path, *extra: str) -> tuple[int, dict[str, Any], Path]:
    report = tmp_path / "fuzz.md"
    code = main([*RUN, *extra, "--report", str(report), "--cases-dir", str(tmp_path / "cases")])
    return code, json.loads(report.with_suffix(".json").read_text()), report


def test_the_fuzzer_counts_a_crash_only_under_the_fast_setting_apart(tmp_path,
                                                                     fast_setting) -> None:
    code, state, report = _run(tmp_path, "--max-findings", "1")
    t = state["targets"]["numpy"]
    assert code == 0 and state["header"]["driver"] == f"{KEY}=1"
    assert (t["status"].get("crash", 0), t["status"]["crash-fast-only"]) == (0, CRASHES)
    f = t["findings"][0]  # shrunk (under the fast setting) and saved, as the driver's
    assert f["reclassified"] == "driver-fast-only" and f["shrunk_nodes"] == 1
    assert f["fast_only"].startswith(f"crash under {KEY}=1, ok with the driver's defaults")
    meta = json.loads(Path(f["case"]).with_suffix(".json").read_text())
    assert (meta["status"], meta["driver"], meta["kind"]) == ("driver-fast-only", f"{KEY}=1",
                                                               "crash")
    text = report.read_text()
    assert f"| 0 (+{CRASHES} driver fast-setting only) |" in text
    assert "## Failures under the driver's fast setting only" in text
    assert "Driver fast setting only: crash under" in text


def test_the_fuzzer_keeps_a_crash_that_fails_with_the_defaults_too(tmp_path,
                                                                   fast_setting) -> None:
    fast_setting.everywhere = True
    code, state, report = _run(tmp_path, "--max-findings", "1")
    t = state["targets"]["numpy"]
    assert code == 1
    assert (t["status"]["crash"], t["status"].get("crash-fast-only", 0)) == (CRASHES, 0)
    assert "reclassified" not in t["findings"][0]
    assert json.loads(Path(t["findings"][0]["case"]).with_suffix(".json").read_text())[
        "status"] == "open"
    assert f"| {CRASHES} |" in report.read_text().split("| numpy |")[1]


def test_the_merger_rechecks_a_shards_crashes_under_both_settings(tmp_path,
                                                                  fast_setting) -> None:
    """A shard written before this re-check existed counted the fast-only crashes as crashes:
    the merger runs each saved case under the shard's fast setting and with the defaults. Only
    saved cases are re-checked; one that still fails with the defaults stays a crash, and so
    does one whose triage record alone (``--no-rerun``) does not say ``driver-fast-only``."""
    fast_setting.everywhere = True  # the shard, as an older fuzzer wrote it: 4 crashes
    assert _run(tmp_path, "--max-findings", "8")[0] == 1
    state = tmp_path / "fuzz.json"
    fast_setting.everywhere = False  # the crash happens only under the fast setting now
    _, total = merge([state])["numpy"]
    assert (total.status["crash"], total.status["crash-fast-only"]) == (0, CRASHES)
    assert all(f"crash under {KEY}=1" in f["fast_only"] and "ok with the driver's defaults"
               in f["fast_only"] for f in total.findings)
    assert merge_main([str(state), "--report", str(tmp_path / "m_{target}.md")]) == 0
    assert f"| 0 (+{CRASHES} driver fast-setting only) |" in (tmp_path / "m_numpy.md").read_text()

    fast_setting.everywhere = True  # it crashes with the defaults as well: still a crash
    _, total = merge([state])["numpy"]
    assert (total.status["crash"], total.status["crash-fast-only"]) == (CRASHES, 0)
    assert "still crash with the driver's defaults" in total.findings[0]["triaged"]

    cases = [Path(f["case"]).with_suffix(".json") for f in total.findings]
    meta = json.loads(cases[0].read_text())
    cases[0].write_text(json.dumps({**meta, "status": "driver-fast-only"}))  # one triaged
    _, total = merge([state], rerun=False)["numpy"]
    assert (total.status["crash"], total.status["crash-fast-only"]) == (CRASHES - 1, 1)
    assert "triage record" in total.findings[0]["fast_only"]


@pytest.mark.skipif(not Path("/proc/self/environ").is_file(), reason="needs Linux's /proc")
def test_a_runners_environment_reaches_its_worker_only(monkeypatch) -> None:
    """The fast setting goes to the worker that runs under it; the worker of the drivers'
    defaults runs without it even where the parent process has it, and the parent's own
    environment is left as it was."""
    monkeypatch.setenv(KEY, "parent")
    monkeypatch.delenv("RLX_TEST_OTHER", raising=False)
    w = Worker({KEY: None, "RLX_TEST_OTHER": "1"})
    w._start()
    try:
        env = Path(f"/proc/{w._proc.pid}/environ").read_bytes().split(b"\0")
    finally:
        w.stop()
    assert b"RLX_TEST_OTHER=1" in env
    assert not any(e.startswith(KEY.encode() + b"=") for e in env)
    assert os.environ[KEY] == "parent" and "RLX_TEST_OTHER" not in os.environ


def test_fast_settings_are_read_per_target_from_a_reports_sessions() -> None:
    header = {"driver": "mixed (see sessions)",
              "sessions": [{"driver": "GALLIVM_PERF=nopt"},
                           {"driver": "POCL_EXTRA_BUILD_FLAGS=-cl-opt-disable"}]}
    assert driver_setting.fast_env_of(header, "opencl") == {
        "POCL_EXTRA_BUILD_FLAGS": "-cl-opt-disable"}
    assert driver_setting.fast_env_of(header, "vulkan") == {"GALLIVM_PERF": "nopt"}
    assert driver_setting.fast_env_of(header, "hexagon") == {}
    assert driver_setting.fast_env_of({"driver": ""}, "opencl") == {}
