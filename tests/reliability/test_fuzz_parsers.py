"""The short CI run of the coverage-guided parser fuzzers (atheris): the IR text parser, the
ONNX importer and the safetensors reader, one instrumented process, a few seconds; no input may
raise anything but an RlxError. The long run is ``python -m rlx_core.testing.fuzz_parsers``."""

from __future__ import annotations

import pytest

from rlx_core.testing import fuzz_parsers


def test_seeds_are_valid_inputs() -> None:
    from rlx_core.errors import RlxError

    for target in fuzz_parsers.TARGETS:
        seeds = fuzz_parsers.seeds(target)
        assert seeds, target
        for s in seeds:
            try:
                fuzz_parsers.TARGET_FNS[target](s)
            except RlxError as err:  # a seed must get past the reader (a later stage may refuse)
                assert target == "safetensors" and "safetensors" in err.message, err


@pytest.mark.slow
def test_short_coverage_guided_run(tmp_path) -> None:
    ok, why = fuzz_parsers.atheris_available()
    if not ok:
        pytest.skip(why)
    result = fuzz_parsers.fuzz_target("all", 6, tmp_path)
    # libFuzzer's clock is wall time: on a loaded machine a few seconds may be few inputs
    assert result["executions"] > 0 and result["coverage_edges"] > 50, result
    assert result["untyped_exceptions"] == 0, result["findings"]
