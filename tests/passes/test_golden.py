"""Golden IR tests (xDSL filecheck style), driven through the text form.

Each ``golden/<pass>/<case>.rlx`` holds::

    # any comment lines saying what the case shows
    # RUN: constant_fold | dce          (passes by name, applied left to right)
    <input IR text>
    # CHECK:
    <the exact expected output text>

or, instead of ``# CHECK:``, ``# CHECK-ERROR: RLX-T001`` (the pass must raise that code).
``# PARSE: unverified`` before the input reads IR the verifier would reject (a declared type
the op's rule disagrees with), which is what ``infer_types`` exists to repair.

The input is parsed, the passes run, the result printed and compared, then verified.
Set RLX_UPDATE_GOLDEN=1 to rewrite the CHECK sections from the current output (review the diff!).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pytest

from rlx_core.errors import RlxError
from rlx_core.ir.graph import Graph
from rlx_core.ir.printer import print_graph
from rlx_core.ir.verifier import verify
from rlx_core.passes.algebraic_simplify import AlgebraicSimplify
from rlx_core.passes.base import PassContext
from rlx_core.passes.constant_fold import ConstantFold
from rlx_core.passes.cse import CSE
from rlx_core.passes.dce import DCE
from rlx_core.passes.infer_types import InferTypes

GOLDEN = Path(__file__).parent / "golden"
PASSES = {p.name: p for p in (InferTypes(), ConstantFold(), AlgebraicSimplify(), CSE(), DCE())}
CASES = sorted(GOLDEN.glob("*/*.rlx"))


@dataclass(frozen=True)
class Case:
    passes: tuple[str, ...]
    unverified: bool
    source: str
    expect: str  # the expected text, or the expected error code
    expect_error: bool
    check_line: int  # index of the CHECK line in the file (for updating)


def read_case(path: Path) -> Case:
    lines = path.read_text().splitlines(keepends=True)
    passes: tuple[str, ...] = ()
    unverified = False
    body: list[str] = []
    for i, line in enumerate(lines):
        stripped = line.strip()
        if stripped.startswith("# RUN:"):
            passes = tuple(p.strip() for p in stripped[len("# RUN:") :].split("|"))
        elif stripped == "# PARSE: unverified":
            unverified = True
        elif stripped.startswith("# CHECK-ERROR:"):
            code = stripped[len("# CHECK-ERROR:") :].strip()
            return Case(passes, unverified, "".join(body), code, True, i)
        elif stripped == "# CHECK:":
            return Case(passes, unverified, "".join(body), "".join(lines[i + 1 :]), False, i)
        elif not stripped.startswith("#"):
            body.append(line)
    raise AssertionError(f"{path}: no '# CHECK:' or '# CHECK-ERROR:' line")


def parse_input(text: str, unverified: bool) -> Graph:
    from rlx_core.ir import parser

    if not unverified:
        return parser.parse(text)
    # the parser's public entry always verifies; its inner recursive-descent parser does not
    inner = getattr(parser, "_Parser", None)
    if inner is None:
        pytest.skip("rlx_core.ir.parser has no unverified entry point")
    return inner(text).graph()


def run_passes(g: Graph, names: tuple[str, ...]) -> Graph:
    ctx = PassContext()
    for name in names:
        g = PASSES[name].run(g, ctx)
    return g


@pytest.mark.parametrize("path", CASES, ids=[f"{p.parent.name}/{p.stem}" for p in CASES])
def test_golden(path: Path) -> None:
    case = read_case(path)
    assert case.passes and all(p in PASSES for p in case.passes), f"bad RUN line in {path}"
    g = parse_input(case.source, case.unverified)
    if case.expect_error:
        with pytest.raises(RlxError) as info:
            run_passes(g, case.passes)
        assert info.value.code == case.expect, str(info.value)
        return
    out = run_passes(g, case.passes)
    got = print_graph(out)
    if os.environ.get("RLX_UPDATE_GOLDEN") == "1" and got != case.expect:
        head = path.read_text().splitlines(keepends=True)[: case.check_line + 1]
        path.write_text("".join(head) + got)
        pytest.skip("golden file rewritten")
    assert got == case.expect
    verify(out, native_composites=frozenset(n.op for n in out.nodes))
    # the expected text is itself valid IR that round-trips
    from rlx_core.ir.parser import parse

    assert print_graph(parse(case.expect)) == case.expect


def test_every_pass_has_three_golden_cases() -> None:
    for name in PASSES:
        cases = [p for p in CASES if p.parent.name == name]
        assert len(cases) >= 3, f"pass {name} has {len(cases)} golden cases"
