"""Thread safety: four threads calling one compiled executable, and one ``@rlx.jit`` function,
on every executing target of the registry. Each thread passes its own inputs, so a call that
reads another call's buffers gives a wrong answer here, not only a crash."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import rlx_core as rlx
from rlx_core.dispatch.errors import LegalizationError
from rlx_core.targets.registry import get_target, target_names

THREADS = 4
CALLS = 12  # per thread: enough to interleave uploads, submits and read-backs


def _fn(x: Any, y: Any) -> Any:
    return (x * y + 1.0).sum(axis=1)


def _ref(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return (x * y + 1.0).sum(axis=1)


def _inputs(seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((16, 64)).astype(np.float32),
            rng.standard_normal((16, 64)).astype(np.float32))


def _hammer(call: Callable[..., Any]) -> list[str]:
    """Run ``call`` from THREADS threads at once, each on its own inputs; return the failures."""
    failures: list[str] = []
    start = threading.Barrier(THREADS)

    def work(seed: int) -> None:
        x, y = _inputs(seed)
        want = _ref(x, y)
        try:
            start.wait()
            for _ in range(CALLS):
                got = np.asarray(call(x, y))
                if not np.allclose(got, want, rtol=1e-4, atol=1e-4):
                    failures.append(f"thread {seed}: wrong answer")
                    return
        except Exception as err:  # any exception is a failure: record it for the message
            failures.append(f"thread {seed}: {type(err).__name__}: {err}")

    threads = [threading.Thread(target=work, args=(i,)) for i in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return failures


def _executing(name: str) -> None:
    """Skip unless ``name`` runs kernels on this machine."""
    target = get_target(name)
    if not str(target.verification).startswith("executes"):
        pytest.skip(f"{name} is {target.verification}: nothing executes")
    ok, why = target.available()
    if not ok:
        pytest.skip(f"{name} does not execute here: {why}")


@pytest.mark.parametrize("target", target_names())
def test_one_executable_from_four_threads(target: str) -> None:
    _executing(target)
    try:
        exe = rlx.compile(_fn, *_inputs(0), target=target)
    except LegalizationError as err:  # an int8-only target has no route for this f32 model
        pytest.skip(f"{target}: {err.message[:100]}")
    assert _hammer(exe) == []


@pytest.mark.parametrize("target", target_names())
def test_one_jit_function_from_four_threads(target: str) -> None:
    _executing(target)
    try:
        rlx.lower(_fn, *_inputs(0), target=target, record=False)
    except LegalizationError as err:  # an int8-only target has no route for this f32 model
        pytest.skip(f"{target}: {err.message[:100]}")
    f = rlx.jit(_fn, target=target)
    assert _hammer(f) == []  # the first calls race to compile the one specialization
    assert len(f.specializations) == 1
