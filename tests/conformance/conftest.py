"""Check-only runs (harness.CHECK_ONLY): a case that calls a compile-check program itself
(instead of through ``run_on``) reaches its ``run``, which says nothing runs here; after the
build's checker passed, that is the case's outcome: skipped with the reason, not failed."""

from __future__ import annotations

import pytest

from tests.conformance.harness import CHECK_ONLY, CHECKED


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):  # noqa: ANN001, ANN201 (pytest's hook signature)
    outcome = yield
    report = outcome.get_result()
    if not CHECK_ONLY or call.excinfo is None or call.when != "call":
        return
    from rlx_core.errors import TargetUnavailableError

    err, chain = call.excinfo.value, []
    while err is not None and len(chain) < 4:  # pytest.raises(match=...) wraps it
        chain.append(err)
        err = err.__cause__ or err.__context__
    if any(isinstance(e, TargetUnavailableError) and "nothing runs them on this machine"
           in str(e) for e in chain):
        report.outcome = "skipped"
        report.longrepr = (str(item.path), item.location[1] or 0, f"Skipped: {CHECKED}")
