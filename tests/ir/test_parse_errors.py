"""Bad IR text: every malformed input raises a typed error pointing at the offending token."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlx_core.errors import IRParseError, RlxError, VerifyError
from rlx_core.ir.parser import parse, parse_attr, parse_type

GOOD = """\
mir @f {
  input %x : f32[2,3]
  param %w : f32[3,4]
  %0 : f32[2,4] = dot_general(%x, %w) {batch=((), ()), contract=((1,), (0,))} loc("m.py":3)
  %1 : f32[2] = reduce_sum(%0) {axes=(1,)} loc("m.py":4 scope="head")
  return %1
}
"""

LIR = """\
lir @g {
  input %x : f32[4]
  kernel @k0 elementwise (%x) -> (%0) {
    %0 : f32[4] = exp(%x) {}
  }
  arena peak=64 naive=64 align=64 {
    %0 @0 +16 live 0..0
  }
  return %0
}
"""


@dataclass(frozen=True)
class Failure:
    err: IRParseError
    text: str


def parse_error(text: str, old: str | None = None, new: str = "") -> Failure:
    """Parse ``text`` (with ``old`` replaced by ``new``) and return the IRParseError it raises."""
    if old is not None:
        assert old in text, old
        text = text.replace(old, new, 1)
    with pytest.raises(IRParseError) as info:
        parse(text)
    return Failure(info.value, text)


def at(f: Failure, line: int, where: int | str, *words: str) -> None:
    """The error points at ``line`` and at column ``where`` (or where the text ``where`` starts
    on that line), quotes the line with a caret under that column, and says ``words``."""
    err, src_line = f.err, f.text.split("\n")[line - 1]
    col = where if isinstance(where, int) else src_line.index(where) + 1
    assert (err.line, err.col) == (line, col), str(err)
    rendered = str(err).splitlines()
    for w in words:
        assert w in str(err), (w, str(err))
    prefix = f"  {line:>4} | "
    i = rendered.index(prefix + src_line)
    assert rendered[i + 1].index("^") == len(prefix) + col - 1, str(err)
    assert err.code == "RLX-P001"


def test_good_inputs_parse() -> None:
    assert parse(GOOD).outputs == ("1",)
    assert parse(LIR).plan is not None


def test_missing_closing_brace() -> None:
    err = parse_error(GOOD[: GOOD.rindex("}")])
    at(err, 6, 12, "expected '}' closing mir @f (opened on line 1)", "end of input")


def test_missing_kernel_brace() -> None:
    err = parse_error(LIR, "    %0 : f32[4] = exp(%x) {}\n  }\n", "    %0 : f32[4] = exp(%x) {}\n")
    at(err, 5, 3, "closing kernel @k0 (opened on line 3)", "'arena'")


def test_missing_arena_brace() -> None:
    err = parse_error(LIR, "    %0 @0 +16 live 0..0\n  }\n", "    %0 @0 +16 live 0..0\n")
    at(err, 8, 3, "expected a slot (%v @offset +size live a..b [alias %r] [over %r]) or '}' "
       "closing the arena (opened on line 6)", "'return'")


def test_bad_token() -> None:
    at(parse_error(GOOD, "%x : f32[2,3]", "%x : f32[2,3] $"), 2, "$", "unexpected character '$'")
    at(parse_error(GOOD, "%w)", "%w]"), 4, "] {", "expected ',' or ')' after operand, found ']'")


def test_missing_operand_comma() -> None:
    err = parse_error(GOOD, "(%x, %w)", "(%x %w)")
    at(err, 4, "%w)", "expected ',' or ')' after operand, found '%w'")


def test_missing_equals() -> None:
    at(
        parse_error(GOOD, "f32[2,4] = dot", "f32[2,4] dot"),
        4,
        "dot",
        "expected '=' after the result type, found 'dot_general'",
    )
    at(parse_error(GOOD, "axes=(1,)", "axes (1,)"), 5, "(1,)", "expected '=' after attribute name")


def test_unterminated_string() -> None:
    err = parse_error(GOOD, '"head")', '"head)')
    at(err, 5, '"head', "unterminated string")


def test_bad_escape_and_control_character() -> None:
    at(parse_error(GOOD, '"head"', '"he\\qad"'), 5, "\\q", "invalid escape '\\q'")
    at(parse_error(GOOD, '"head"', '"he\\u12"'), 5, "\\u", "four hex digits")
    at(parse_error(GOOD, '"head"', '"he\x01ad"'), 5, "\x01", "control character")


def test_bad_shape() -> None:
    at(parse_error(GOOD, "f32[2,3]", "f32[2,"), 2, 20, "expected a dimension", "end of line")
    at(parse_error(GOOD, "f32[2,3]", "f32[2;3]"), 2, 19, "unexpected character ';'")
    at(parse_error(GOOD, "f32[2,3]", "f32[2,-3]"), 2, 20, "expected a dimension", "'-'")
    at(parse_error(GOOD, "f32[2,3]", "f32(2,3)"), 2, 17, "expected '[' after the dtype")


def test_unknown_dtype() -> None:
    err = parse_error(GOOD, "param %w : f32", "param %w : f31")
    at(err, 3, "f31", "unknown dtype 'f31'", "bf16", "c64")
    err = parse_error(GOOD, "{axes=(1,)}", "{axes=(1,), dtype=flaot}")
    at(err, 5, "flaot", "unknown dtype 'flaot'")


def test_unknown_op() -> None:
    err = parse_error(GOOD, "reduce_sum", "reduce_summ")
    at(err, 5, "reduce_summ", "unknown op 'reduce_summ'", "did you mean reduce_sum")


def test_undefined_operand() -> None:
    at(parse_error(GOOD, "(%x, %w)", "(%x, %v)"), 4, "%v", "use of undefined value %v")
    at(parse_error(GOOD, "return %1", "return %7"), 6, "%7", "undefined value %7")
    at(parse_error(LIR, "(%x) ->", "(%y) ->"), 3, "%y", "undefined value %y")
    at(parse_error(LIR, "-> (%0)", "-> (%5)"), 3, "%5", "lists output %5, which is not defined")
    at(parse_error(LIR, "    %0 @0", "    %3 @0"), 7, "%3", "undefined value %3")


def test_forward_reference_is_undefined() -> None:
    text = GOOD.replace("reduce_sum(%0)", "reduce_sum(%2)")
    at(parse_error(text), 5, "%2", "use of undefined value %2", "before use")


def test_duplicate_definition() -> None:
    at(parse_error(GOOD, "%1 : f32[2]", "%0 : f32[2]"), 5, "%0", "%0 is already defined (line 4)")
    at(parse_error(GOOD, "param %w", "param %x"), 3, "%x", "%x is already defined (line 2)")


def test_attribute_errors() -> None:
    at(parse_error(GOOD, "axes=(1,)", "axes=(1,), axes=(1,)"), 5, 44, "given twice")
    at(parse_error(GOOD, "axes=(1,)", "axes=(1)"), 5, ")}", "one-element tuple", "(x,)")
    at(parse_error(GOOD, "axes=(1,)", "axes=1"), 5, "1}", "'axes' of reduce_sum must be a tuple")
    at(parse_error(GOOD, "axes=(1,)", "axis=(1,)"), 5, "reduce_sum", "unknown attribute(s) axis")
    at(parse_error(GOOD, "{axes=(1,)}", "{}"), 5, "reduce_sum", "missing required attribute 'axes'")
    # a structurally wrong value the shape rule would crash on is a parse error, not a crash
    at(
        parse_error(GOOD, "contract=((1,), (0,))", "contract=((1,),)"),
        4,
        "dot_general",
        "malformed attributes for dot_general",
    )


def test_structure_errors() -> None:
    at(parse_error(GOOD, "mir @f", "xir @f"), 1, 1, "unknown level 'xir'")
    at(parse_error(GOOD, "mir @f {", "mir f {"), 1, "f {", "expected the graph name (@name)")
    at(parse_error(GOOD, "  return %1\n", ""), 6, 1, "expected 'return")
    at(parse_error(GOOD + "mir @g {\n"), 8, 1, "after the graph's closing '}'")
    at(parse_error(LIR.replace("lir @g", "mir @g")), 3, 3, "kernel blocks appear only in lir")
    at(
        parse_error(LIR, "  return %0", "  %9 : f32[4] = exp(%0) {}\n  return %0"),
        9,
        3,
        "every node is inside one",
    )
    at(
        parse_error(GOOD, "  param %w", "  %9 : f32[2,3] = neg(%x) {}\n  param %w"),
        4,
        3,
        "declarations come before the nodes",
    )
    at(parse_error(LIR, "live 0..0", "live 0.0"), 7, "0.0", "first kernel index")
    at(parse_error(LIR, "live 0..0", "live 0 0"), 7, 22, "expected '..' in the live range")
    at(parse_error(LIR, "peak=64 ", ""), 6, "{", "missing peak=")


def test_shape_mismatch_is_a_verify_error() -> None:
    with pytest.raises(VerifyError) as info:
        parse(GOOD.replace("param %w : f32[3,4]", "param %w : f32[5,4]"))
    text = str(info.value)
    assert "ill-typed dot_general" in text and "cannot contract" in text
    assert ">>   %0 : f32[2,4] = dot_general(%x, %w)" in text


def test_axis_out_of_range_is_a_verify_error() -> None:
    with pytest.raises(VerifyError) as info:
        parse(GOOD.replace("axes=(1,)", "axes=(5,)"))
    assert "axis 5 is out of range for a rank-2 operand" in str(info.value)
    assert ">>   %1 : f32[2] = reduce_sum(%0) {axes=(5,)}" in str(info.value)


def test_wrong_declared_type_is_a_verify_error() -> None:
    with pytest.raises(VerifyError, match=r"declared f32\[3\] but its rule gives f32\[2\]"):
        parse(GOOD.replace("%1 : f32[2]", "%1 : f32[3]"))


def test_overlapping_arena_is_a_verify_error() -> None:
    text = LIR.replace("input %x : f32[4]", "input %x : f32[4]\n  input %z : f32[4]")
    text = text.replace(
        "  arena",
        "  kernel @k1 elementwise (%z) -> (%1) {\n    %1 : f32[4] = neg(%z) {}\n  }\n  arena",
    )
    text = text.replace("live 0..0", "live 0..1\n    %1 @8 +16 live 1..1")
    with pytest.raises(VerifyError, match="alive together but overlap"):
        parse(text)


def test_parse_attr_and_type_errors() -> None:
    for text, words in [
        ("(1, 2", "expected ',' or ')' in tuple"),
        ("1e", "malformed exponent"),
        ("-x", "expected a number after '-'"),
        ("12ab", "malformed number"),
        ("complex(1, true)", "two real numbers"),
        ("1 2", "after the attribute"),
        ("(" * 100 + ")" * 100, "nested deeper"),
        ("9" * 5000, "too long"),
    ]:
        with pytest.raises(IRParseError) as info:
            parse_attr(text)
        assert words in str(info.value), (text, str(info.value))
    with pytest.raises(IRParseError, match="unknown dtype"):
        parse_type("q7[2]")


# ---- fuzzing: whatever the damage, only typed errors come out --------------------------------


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_mutated_text_raises_only_typed_errors(data: st.DataObject) -> None:
    base = data.draw(st.sampled_from([GOOD, LIR]))
    i = data.draw(st.integers(0, len(base) - 1))
    j = data.draw(st.integers(i, min(len(base), i + 6)))
    junk = data.draw(st.text(alphabet='%@(){}[],:=+-."\\#01azf \n', max_size=4))
    try:
        parse(base[:i] + junk + base[j:])
    except RlxError:
        pass


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=40))
def test_random_attr_text_raises_only_typed_errors(text: str) -> None:
    try:
        parse_attr(text)
    except RlxError:
        pass
