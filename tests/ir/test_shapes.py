"""Shape helpers of ir/graph: row-major strides against numpy's."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from rlx_core.ir.graph import row_strides


@given(st.lists(st.integers(1, 6), max_size=5).map(tuple))
def test_row_strides_are_numpys_element_strides(shape: tuple[int, ...]) -> None:
    a = np.empty(shape, dtype=np.int8)  # one-byte elements: byte strides are element strides
    assert row_strides(shape) == a.strides


def test_row_strides_of_a_scalar_and_of_an_empty_axis() -> None:
    assert row_strides(()) == ()
    assert row_strides((0, 5)) == (5, 1)  # an empty axis still steps by the rows after it
