"""threads.attach registers a loaded program's thread setter once: a second compile of the
same build loads the same library, and must not be counted again by readers of the programs'
team counters (benchmarks/bench_contention.team_stats) or set twice per set_num_threads."""

from __future__ import annotations

import numpy as np
import pytest

import rlx_core as rlx
from rlx_core.targets.cpu import threads
from rlx_core.targets.cpu.runtime import load_library
from rlx_core.targets.cpu.target import CpuTarget

cpu_ok, cpu_why = CpuTarget().available()
pytestmark = pytest.mark.skipif(not cpu_ok, reason=f"cpu target unavailable: {cpu_why}")


def _affine(v):
    return v * 3 + 1


def test_the_same_build_compiled_twice_is_attached_once() -> None:
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    first = rlx.compile(_affine, x, target="cpu", record=False)
    second = rlx.compile(_affine, x, target="cpu", record=False)
    a, b = first.program.info["so_path"], second.program.info["so_path"]
    assert a == b  # the same build (content hash), so the same library
    lib = load_library(a)  # the one dlopen of that path
    prefix = first.program.info["entry"].removesuffix("_run")
    assert [sym for have, sym in threads._LOADED if have is lib] == [f"{prefix}_threads"]
    np.testing.assert_array_equal(second(x), x * 3 + 1)
