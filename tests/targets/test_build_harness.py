"""tests/targets/own_sgemm.build_harness: a C harness that does not compile fails its test
(a broken harness must never pass as a skip); a working one loads and runs."""

from __future__ import annotations

import shutil

import pytest

from tests.targets.own_sgemm import build_harness


def _need_cc() -> None:
    if (shutil.which("cc") or shutil.which("gcc")) is None:
        pytest.skip("no C compiler")


def test_a_compile_error_fails_instead_of_skipping(tmp_path) -> None:
    _need_cc()
    broken = "int64_t twice(int64_t x) { return 2 * x; }\n"  # no stdint.h: int64_t is unknown
    with pytest.raises(pytest.fail.Exception, match="does not compile"):
        build_harness(tmp_path, "c", broken)


def test_a_good_harness_builds_and_runs(tmp_path) -> None:
    _need_cc()
    lib = build_harness(tmp_path, "c", "#include <stdint.h>\n"
                        "int64_t twice(int64_t x) { return 2 * x; }\n")
    assert lib.twice(21) == 42
