"""Fixtures shared by the target tests."""

from __future__ import annotations

import pytest

from rlx_core.targets import verified_files
from rlx_core.targets.cpu import cache
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


@pytest.fixture
def fresh_verified():
    """The test checks its own cache folders: what this process verified before is forgotten
    (``verified_files.forget``), before and after it."""
    verified_files.forget()
    yield
    verified_files.forget()


@pytest.fixture
def fresh_cache_state(fresh_verified):
    """``fresh_verified``, and the cpu cache folders this process found ready forgotten too."""
    cache._READY.clear()
    yield
    cache._READY.clear()
