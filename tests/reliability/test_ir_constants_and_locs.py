"""Found item 6 of issue 31: the verifier refuses constants no target can run, and text that
cannot be displayed (NUL, lone surrogates) never reaches a Loc, so the explorer lays out any
graph that verifies."""

from __future__ import annotations

import json

import numpy as np
import pytest

import rlx_core as rlx
from rlx_core.errors import ConstantValueError, VerifyError
from rlx_core.ir.graph import Loc
from rlx_core.ir.parser import parse
from rlx_core.ir.printer import print_graph
from rlx_core.ir.verifier import verify


def _const(value: str, dtype: str = "f32", n: int = 0) -> str:
    shape, ty = (f"({n},)", f"{dtype}[{n}]") if n else ("()", f"{dtype}[]")
    return (f"hir @g {{\n  %0 : {ty} = constant() {{dtype={dtype}, shape={shape}, "
            f"value={value}}}\n  return %0\n}}\n")


@pytest.mark.parametrize("value, dtype, says", [
    ('"x"', "f32", "is a str"), ("none", "f32", "is a NoneType"), ("f32", "f32", "is a DType"),
    ("complex(1, 2)", "f32", "complex but the dtype is not"),
    ("complex(1, 2)", "i32", "complex but the dtype is not"),
    ("1.5", "i32", "not a whole number"), ("inf", "i64", "not finite"), ("nan", "u8", "not finite"),
    ("300", "u8", "outside [0, 255]"), ("-1", "u32", "outside"), ('"t"', "bool", "is a str"),
    ("9223372036854775808", "i64", "outside"), ("8", "i4", "outside [-8, 7]"),
])
def test_unusable_constant_is_refused(value, dtype, says) -> None:
    with pytest.raises(ConstantValueError) as info:
        verify(parse(_const(value, dtype)))
    err = info.value
    assert isinstance(err, VerifyError) and err.code == "RLX-V003" and err.hint
    assert says in err.message and "constant()" in err.message  # the IR around the node


def test_unusable_element_of_a_tuple_is_named() -> None:
    with pytest.raises(ConstantValueError, match="element 1 'x'"):
        verify(parse(_const('(1.0, "x")', n=2)))
    with pytest.raises(ConstantValueError, match=r"element 0 \(1, 2\) is a tuple"):
        verify(parse(_const("((1, 2), 3)", n=2)))


@pytest.mark.parametrize("value, dtype", [("1", "f32"), ("-2.5", "f16"), ("inf", "f32"),
                                          ("nan", "f64"), ("complex(1, 2)", "c64"), ("255", "u8"),
                                          ("true", "bool"), ("2", "bool"), ("-8", "i4"),
                                          ("3.0", "i32"),
                                          ("(1, 2.5)", "f32")])
def test_usable_constants_verify_and_run(value, dtype) -> None:
    g = verify(parse(_const(value, dtype, n=2 if value.startswith("(") else 0)))
    if dtype in ("i4", "c64", "f16"):
        return  # not every target has these dtypes; verifying is the point here
    out = rlx.compile(g, target="numpy")()
    assert np.asarray(out).dtype.kind in "fiub"


def test_rules_run_at_trace_time_too() -> None:
    from rlx_core.ir.builder import Builder

    with pytest.raises(ConstantValueError):
        Builder().emit("constant", [], {"value": None, "shape": (), "dtype": rlx.f32})


HOSTILE = ["a\x00b.py", "\ud800evil.py", "x\udfff\x1b[31m", "ok.py"]


@pytest.mark.parametrize("text", HOSTILE)
def test_loc_text_is_made_displayable(text) -> None:
    loc = Loc(file=text, line=1, scope=text, origin=text)
    for s in (loc.file, loc.scope, loc.origin):
        s.encode("utf-8")  # no lone surrogate left
        assert not any(ord(c) < 0x20 for c in s)
    assert loc.file.replace("\ufffd", "") == "".join(
        c for c in text if 0x20 <= ord(c) and not 0xD800 <= ord(c) < 0xE000 and c != "\x7f")


def test_parsed_hostile_locs_round_trip_and_lay_out(tmp_path) -> None:
    text = ('hir @g {\n  input %x : f32[2]\n'
            '  %0 : f32[2] = neg(%x) loc("a\\u0000b\\ud800.py":3 scope="s\\udc00\\u0007")\n'
            '  return %0\n}\n')
    g = verify(parse(text))
    node = g.nodes[0]
    assert node.loc.file == "a\ufffdb\ufffd.py" and node.loc.scope == "s\ufffd\ufffd"
    again = parse(print_graph(g))  # the printed form parses back to the same graph
    assert print_graph(again) == print_graph(g)
    pytest.importorskip("rlx_explorer")
    from rlx_explorer.html_export import save_html
    from rlx_explorer.session import Session

    bundle = Session(g, (np.ones(2, np.float32),)).bundle()
    json.dumps(bundle, ensure_ascii=False).encode("utf-8")
    page = save_html(bundle, tmp_path / "x.html").read_text(encoding="utf-8")
    assert "\x00" not in page
