"""i64 -> i32 narrowing at a graph's boundary: promised input ranges, narrowed outputs and
parameters, the range rules of div/rem/bitwise/reductions, and the RLX-G002 guard.

Legalization-only checks run on the webgpu capability table (no device needed); the run checks
use opencl (PoCL) and skip without it.
"""

from __future__ import annotations

import numpy as np
import pytest

import rlx_core as rlx
from rlx_core.dispatch.errors import LegalizationError
from rlx_core.dispatch.narrow import analyse, node_range
from rlx_core.ir import dtypes as dt
from rlx_core.runtime.narrowed_io import NarrowedInputRangeError
from rlx_core.targets.registry import get_target
from tests.dispatch.graphs import GraphMaker


def _ids() -> np.ndarray:
    return np.array([3, -2, 7, 0], dtype=np.int64)


def test_without_a_promise_an_i64_input_is_still_refused() -> None:
    with pytest.raises(LegalizationError) as err:
        rlx.lower(lambda a: a * 3 + 1, _ids(), target="webgpu")
    assert "RLX-L004" in err.value.codes and "input_ranges" in str(err.value)


def test_a_promised_range_narrows_the_input_and_the_output() -> None:
    hir, mir, lir, _ = rlx.lower(lambda a: a * 3 + 1, _ids(), target="webgpu",
                                 input_ranges={"a": (-8, 7)})
    assert hir.inputs[0].type.dtype == dt.i64 and lir.inputs[0].type.dtype == dt.i32
    assert hir.output_types()[0].dtype == dt.i64 and lir.output_types()[0].dtype == dt.i32


def test_a_range_whose_arithmetic_overflows_i32_stays_refused() -> None:
    # (2^30)^2 does not fit i32: narrowing would wrap, so the node stays i64 and is refused
    with pytest.raises(LegalizationError) as err:
        rlx.lower(lambda a: a * a, _ids(), target="webgpu", input_ranges={"a": (0, 2 ** 30)})
    assert "does not fit i32" in str(err.value)


def test_range_rules_of_div_rem_bitwise_and_reductions() -> None:
    m = GraphMaker()
    x = m.input("x", "i64", (4, 5))
    y = m.input("y", "i64", (4, 5))
    nodes = {op: m.op(op, [x, y]) for op in ("div", "rem", "and", "xor")}
    nodes["reduce_sum"] = m.op("reduce_sum", [x], axes=(1,))
    g = m.graph(*nodes.values())
    ranges, _ = analyse(g, {"x": (-100, 50), "y": (1, 7)})
    assert ranges[nodes["div"].name] == (-100, 100)
    assert ranges[nodes["rem"].name] == (-7, 7)
    assert ranges[nodes["and"].name] == (-128, 127)
    assert ranges[nodes["reduce_sum"].name] == (-500, 250)
    assert node_range(g.nodes[0], [None, (1, 2)], []) is None  # unknown stays unknown


def _opencl() -> None:
    ok, why = get_target("opencl").available()
    if not ok:
        pytest.skip(f"no OpenCL device: {why}")


def test_narrowed_program_runs_and_returns_int64() -> None:
    _opencl()
    exe = rlx.compile(lambda a: a * 3 + 1, _ids(), target="opencl", input_ranges={"a": (-8, 7)})
    out = np.asarray(exe(_ids()))
    assert out.dtype == np.int64
    np.testing.assert_array_equal(out, _ids() * 3 + 1)


def test_values_outside_the_promise_raise_g002_not_a_wrapped_answer() -> None:
    _opencl()
    exe = rlx.compile(lambda a: a * 3 + 1, _ids(), target="opencl", input_ranges={"a": (-8, 7)})
    with pytest.raises(NarrowedInputRangeError) as err:
        exe(np.array([3, 2 ** 40, 0, 1], dtype=np.int64))
    assert err.value.code == "RLX-G002"
