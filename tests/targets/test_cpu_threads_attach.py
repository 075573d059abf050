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


def test_a_rebuilt_specialization_cache_keeps_only_its_live_module_s_setters(threads) -> None:
    """Each miss rebuilds the jitted function's module with every specialization in it: the
    retired module's setters are dropped (they grew as n(n+1)/2 over n specializations), the
    live one's are attached once each, and set_num_threads still reaches them."""
    from rlx_core.targets.cpu import threads as threads_mod

    f = rlx.jit(_affine, target="cpu")
    libs = []
    for n in range(1, 5):
        x = np.arange(n, dtype=np.float32)
        np.testing.assert_array_equal(f(x), x * 3 + 1)
        libs.append(f.cache._lib)
    prefixes = [f"{s.program.prefix}_threads" for s in f.cache.specializations]
    assert len(prefixes) == 4 and len({id(lib) for lib in libs}) == 4  # a module per miss
    assert not any(have is old for have, _ in threads_mod._LOADED for old in libs[:-1])
    assert sorted(sym for have, sym in threads_mod._LOADED if have is libs[-1]) == sorted(prefixes)
    for n in (1, 2):
        threads(n)
        for k in range(1, 5):
            x = np.arange(k, dtype=np.float32)
            np.testing.assert_array_equal(f(x), x * 3 + 1)
