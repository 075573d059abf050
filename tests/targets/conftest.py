"""Fixtures shared by the target tests."""

from __future__ import annotations

import pytest

from rlx_core.targets.cpu.threads import num_threads, set_num_threads


@pytest.fixture
def threads():
    """``set_num_threads`` for the cpu target's team, the count before restored after."""
    before = num_threads()
    yield set_num_threads
    set_num_threads(before)


@pytest.fixture
def two_threads():
    """The team at two threads for the test, the count before restored after."""
    before = num_threads()
    set_num_threads(2)
    yield
    set_num_threads(before)
