"""The IR text parser: ``parse(print_graph(g)) == g`` for all three levels (grammar: printer.py).

The tokenizer (lexer.py) feeds a recursive-descent parser, one method per construct of the
grammar (docs/ir-text-format.md). Every malformed input raises IRParseError with a 1-based line/column pointing at the offending
token; ill-typed nodes are left to the verifier, which runs on every parsed graph.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Iterator
from typing import Any

from rlx_core.errors import DTypeError, IRParseError, RlxError
from rlx_core.ir import dtypes as dt
from rlx_core.ir.builder import infer_type
from rlx_core.ir.graph import (
    ArenaPlan,
    AttrValue,
    BufferSlot,
    Graph,
    Kernel,
    Level,
    Loc,
    Node,
    TensorType,
    Value,
    ValueKind,
    freeze_attrs,
)
from rlx_core.ir.lexer import Source, Tok, Token, tokenize, tokenize_source
from rlx_core.ir.ops import HIR_OPS, OPS
from rlx_core.ir.ops.base import AttrSpec
from rlx_core.ir.verifier import verify

_LEVELS = {lv.value: lv for lv in Level}
_MAX_NESTING = 64  # tuple depth; far beyond any real attribute, well inside the recursion limit


class _Parser:
    """Recursive descent over the token list; one method per construct of the grammar."""

    def __init__(self, text: str):
        self.src = Source(text)
        self.toks = tokenize_source(self.src)
        self.pos = 0
        self.types: dict[str, TensorType] = {}
        self.def_line: dict[str, int] = {}

    # -- token helpers -------------------------------------------------------------------------
    @property
    def tok(self) -> Token:
        return self.toks[self.pos]

    def advance(self) -> Token:
        t = self.toks[self.pos]
        if t.kind is not Tok.EOF:
            self.pos += 1
        return t

    def error(
        self, message: str, tok: Token | None = None, hint: str | None = None
    ) -> IRParseError:
        t = tok or self.tok
        return self.src.error(message, t.line, t.col, hint)

    def at(self, kind: Tok, text: str | None = None) -> bool:
        return self.tok.kind is kind and (text is None or self.tok.text == text)

    def at_punct(self, text: str) -> bool:
        return self.at(Tok.PUNCT, text)

    def expect(self, kind: Tok, text: str | None = None, what: str = "") -> Token:
        if not self.at(kind, text):
            want = what or (f"'{text}'" if text is not None else kind.value)
            raise self.error(f"expected {want}, found {self.tok.describe()}")
        return self.advance()

    def expect_punct(self, text: str, context: str = "") -> Token:
        return self.expect(Tok.PUNCT, text, f"'{text}'{' ' + context if context else ''}")

    def end_of_line(self, after: str) -> None:
        if not self.at(Tok.NEWLINE):
            raise self.error(f"expected end of line after {after}, found {self.tok.describe()}")
        self.advance()

    def skip_blank(self) -> None:
        while self.at(Tok.NEWLINE):
            self.advance()

    def block_items(self, open_tok: Token, item: str, closing: str) -> Iterator[None]:
        """Once per item of a ``{ ... }`` block whose items start with a %value (a kernel's
        nodes, an arena's slots), at the item's first token; blank lines are skipped and the
        closing ``}`` is consumed. Anything else where an item starts is an error naming
        ``item`` and the block (``closing``) with the line that opened it."""
        while True:
            self.skip_blank()
            if self.at_punct("}"):
                self.advance()
                return
            if not self.at(Tok.VALUE):
                raise self.error(
                    f"expected {item} or '}}' closing {closing} (opened on line "
                    f"{open_tok.line}), found {self.tok.describe()}"
                )
            yield

    def keyword(self) -> str:
        """The identifier that starts the current statement ('' if it is not one)."""
        return self.tok.text if self.tok.kind is Tok.IDENT else ""

    def int_tok(self, tok: Token) -> int:
        try:
            return int(tok.text)
        except ValueError:  # Python refuses to convert integers of thousands of digits
            raise self.error(
                f"integer literal of {len(tok.text)} digits is too long", tok
            ) from None

    # -- values --------------------------------------------------------------------------------
    def define(self, tok: Token, ttype: TensorType) -> None:
        if tok.text in self.types:
            raise self.error(
                f"%{tok.text} is already defined (line {self.def_line[tok.text]})",
                tok,
                hint="every value is assigned exactly once (SSA); rename one",
            )
        self.types[tok.text] = ttype
        self.def_line[tok.text] = tok.line

    def use(self, context: str) -> str:
        tok = self.expect(Tok.VALUE, what=f"a %value {context}")
        if tok.text not in self.types:
            raise self.error(
                f"use of undefined value %{tok.text}",
                tok,
                hint="values must be defined (input, param or node) before use",
            )
        return tok.text

    def value_list(self, context: str) -> tuple[str, ...]:
        """``(%a, %b)``: the opener is already consumed; reads up to and including ')'."""
        names: list[str] = []
        if self.at_punct(")"):
            self.advance()
            return ()
        while True:
            names.append(self.use(context))
            if self.at_punct(")"):
                self.advance()
                return tuple(names)
            if not self.at_punct(","):
                raise self.error(f"expected ',' or ')' after operand, found {self.tok.describe()}")
            self.advance()

    # -- types ---------------------------------------------------------------------------------
    def dtype(self, tok: Token, in_attr: bool = False) -> dt.DType:
        try:
            return dt.get(tok.text)
        except DTypeError as err:
            # a bare word in an attribute is most often a string that lost its quotes
            hint = f'{err.hint}; a string is quoted: "{tok.text}"' if in_attr else err.hint
            raise self.error(f"unknown dtype {tok.text!r}", tok, hint=hint) from None

    def tensor_type(self) -> TensorType:
        tok = self.expect(Tok.IDENT, what="a type such as f32[2,3]")
        dtype = self.dtype(tok)
        self.expect_punct("[", "after the dtype (a scalar is written f32[])")
        dims: list[int] = []
        if not self.at_punct("]"):
            while True:
                if not self.at(Tok.INT):
                    raise self.error(
                        f"expected a dimension (non-negative integer), found {self.tok.describe()}"
                    )
                dims.append(self.int_tok(self.advance()))
                if self.at_punct("]"):
                    break
                if not self.at_punct(","):
                    raise self.error(f"expected ',' or ']' in shape, found {self.tok.describe()}")
                self.advance()
        self.advance()
        return TensorType(dtype, tuple(dims))

    # -- attributes ----------------------------------------------------------------------------
    def attr_value(self, depth: int = 0) -> AttrValue:
        t = self.tok
        if t.kind is Tok.INT:
            return self.int_tok(self.advance())
        if t.kind is Tok.FLOAT:
            self.advance()
            return float(t.text)
        if t.kind is Tok.STRING:
            self.advance()
            return t.text
        if self.at_punct("-"):
            self.advance()
            nxt = self.tok
            if nxt.kind in (Tok.INT, Tok.FLOAT) or (nxt.kind is Tok.IDENT and nxt.text == "inf"):
                return -self.attr_value(depth)
            raise self.error(f"expected a number after '-', found {nxt.describe()}")
        if self.at_punct("("):
            return self.attr_tuple(depth + 1)
        if t.kind is Tok.IDENT:
            self.advance()
            consts: dict[str, AttrValue] = {
                "true": True,
                "false": False,
                "none": None,
                "inf": math.inf,
                "nan": math.nan,
            }
            if t.text in consts:
                return consts[t.text]
            if t.text == "complex":
                return self.attr_complex()
            return self.dtype(t, in_attr=True)
        raise self.error(
            f"expected an attribute value, found {t.describe()}",
            hint='values are numbers, true/false/none, "strings", dtypes or tuples',
        )

    def attr_tuple(self, depth: int) -> tuple[AttrValue, ...]:
        if depth > _MAX_NESTING:
            raise self.error(f"tuples nested deeper than {_MAX_NESTING} levels")
        self.expect_punct("(")
        items: list[AttrValue] = []
        while not self.at_punct(")"):
            items.append(self.attr_value(depth))
            if self.at_punct(","):
                self.advance()
                continue
            if not self.at_punct(")"):
                raise self.error(f"expected ',' or ')' in tuple, found {self.tok.describe()}")
            if len(items) == 1:
                raise self.error("a one-element tuple needs a trailing comma, as in (x,)")
        self.advance()
        return tuple(items)

    def attr_complex(self) -> complex:
        self.expect_punct("(", "after complex")
        parts: list[float] = []
        for sep in (",", ")"):
            start = self.tok
            v = self.attr_value()
            if isinstance(v, bool) or not isinstance(v, int | float):
                raise self.error("complex(re, im) takes two real numbers", start)
            parts.append(float(v))
            self.expect_punct(sep, "in complex(re, im)")
        return complex(parts[0], parts[1])

    def attr_block(self) -> tuple[dict[str, AttrValue], dict[str, Token]]:
        """``{key=value, ...}``; returns the values and the token each value started at."""
        self.expect_punct("{", "to open the attributes (write {} for none)")
        attrs: dict[str, AttrValue] = {}
        where: dict[str, Token] = {}
        while not self.at_punct("}"):
            key = self.expect(Tok.IDENT, what="an attribute name")
            if key.text in attrs:
                raise self.error(f"attribute {key.text!r} is given twice", key)
            self.expect_punct("=", f"after attribute name {key.text!r}")
            where[key.text] = self.tok
            attrs[key.text] = self.attr_value()
            if self.at_punct(","):
                self.advance()
            elif not self.at_punct("}"):
                raise self.error(
                    f"expected ',' or '}}' after attribute {key.text!r}, found "
                    f"{self.tok.describe()}"
                )
        self.advance()
        return attrs, where

    # -- locations -----------------------------------------------------------------------------
    def loc(self, name: str, op: str) -> Loc:
        """``loc("file":line scope="..." from=%origin:op)``; a node without ``from=`` is its own
        origin (what Builder.emit records and printer.fmt_loc leaves out)."""
        file, line, scope, origin, origin_op = "", 0, "", name, op
        if not self.at(Tok.IDENT, "loc"):
            return Loc(file, line, scope, origin, origin_op)
        self.advance()
        self.expect_punct("(", "after loc")
        if self.at(Tok.STRING):
            file = self.advance().text
            self.expect_punct(":", 'between file and line in loc("file":line)')
            line = self.signed_int("a line number")
        seen: set[str] = set()
        while not self.at_punct(")"):
            key = self.expect(Tok.IDENT, what="scope=, from= or ')' in loc(...)")
            if key.text not in ("scope", "from"):
                raise self.error(
                    f"unknown loc part {key.text!r}",
                    key,
                    hint='loc takes "file":line, scope="..." and from=%value:op',
                )
            if key.text in seen:
                raise self.error(f"loc part {key.text!r} is given twice", key)
            seen.add(key.text)
            self.expect_punct("=", f"after {key.text}")
            if key.text == "scope":
                scope = self.expect(Tok.STRING, what="a quoted scope").text
            else:
                # the origin is a HIR value name, which need not exist at this level
                origin = self.expect(Tok.VALUE, what="the origin %value").text
                self.expect_punct(":", "between the origin value and its op")
                origin_op = self.advance().text if self.at(Tok.IDENT) else ""
        self.advance()
        return Loc(file, line, scope, origin, origin_op)

    def signed_int(self, what: str) -> int:
        neg = self.at_punct("-")
        if neg:
            self.advance()
        v = self.int_tok(self.expect(Tok.INT, what=what))
        return -v if neg else v

    # -- statements ----------------------------------------------------------------------------
    def decl(self) -> Value:
        kind_tok = self.advance()
        kind = ValueKind.INPUT if kind_tok.text == "input" else ValueKind.PARAM
        name = self.expect(Tok.VALUE, what=f"a %name after {kind_tok.text}")
        self.expect_punct(":", "between the name and its type")
        ttype = self.tensor_type()
        self.define(name, ttype)
        self.end_of_line(f"the {kind_tok.text} declaration")
        return Value(name.text, ttype, kind)

    def node(self) -> Node:
        name = self.expect(Tok.VALUE, what="a node (%name : type = op(...))")
        self.expect_punct(":", "between the result name and its type")
        ttype = self.tensor_type()
        self.expect_punct("=", "after the result type")
        op_tok = self.expect(Tok.IDENT, what="an op name")
        if op_tok.text not in OPS:
            close = difflib.get_close_matches(op_tok.text, OPS, n=3)
            raise self.error(
                f"unknown op {op_tok.text!r}",
                op_tok,
                hint=f"did you mean {', '.join(close)}?"
                if close
                else "see rlx_core/ir/ops for the op set",
            )
        self.expect_punct("(", f"after op {op_tok.text!r}")
        inputs = self.value_list("as operand")
        attrs, where = self.attr_block() if self.at_punct("{") else ({}, {})
        full = self.check_attrs(op_tok, inputs, attrs, where)
        loc = self.loc(name.text, op_tok.text)
        self.end_of_line("the node")
        self.define(name, ttype)
        return Node(
            Value(name.text, ttype, ValueKind.NODE), op_tok.text, inputs, freeze_attrs(full), loc
        )

    def check_attrs(
        self,
        op_tok: Token,
        inputs: tuple[str, ...],
        attrs: dict[str, AttrValue],
        where: dict[str, Token],
    ) -> dict[str, AttrValue]:
        """Fill defaults, check each attribute's kind, and make sure the op's rule cannot crash.

        The rule's own verdict (a shape or dtype mismatch) is left to the verifier, which prints
        the IR around the node; here we only stop values of the wrong *structure* (e.g.
        ``contract=((1,),)``) from reaching the rule as raw Python errors.
        """
        d = OPS[op_tok.text]
        try:
            full = d.complete_attrs(attrs)
        except RlxError as err:
            raise self.error(err.message, op_tok, err.hint) from None
        for key, spec in d.attrs.items():
            if key in attrs and not _kind_ok(spec, attrs[key]):
                raise self.error(
                    f"attribute {key!r} of {op_tok.text} must be {_KIND_TEXT[spec.kind]}"
                    f", got {attrs[key]!r}",
                    where[key],
                )
        try:
            infer_type(op_tok.text, [self.types[i] for i in inputs], full)
        except RlxError:
            pass
        except Exception as err:  # noqa: BLE001 - a rule crashing on odd input is a parse error
            raise self.error(f"malformed attributes for {op_tok.text}: {err}", op_tok) from None
        return full

    def kernel(self) -> Kernel:
        self.advance()
        name = self.expect(Tok.SYMBOL, what="a kernel name (@k0)")
        kind = self.expect(Tok.IDENT, what="a kernel kind (elementwise, reduce, matmul, opaque)")
        self.expect_punct("(", "to open the kernel's inputs")
        inputs = self.value_list("as kernel input")
        self.expect_punct("->", "between kernel inputs and outputs")
        self.expect_punct("(", "to open the kernel's outputs")
        out_toks: list[Token] = []
        while not self.at_punct(")"):
            out_toks.append(self.expect(Tok.VALUE, what="a %value as kernel output"))
            if self.at_punct(","):
                self.advance()
            elif not self.at_punct(")"):
                raise self.error(
                    f"expected ',' or ')' after kernel output, found {self.tok.describe()}"
                )
        self.advance()
        open_tok = self.expect_punct("{", "to open the kernel body")
        self.end_of_line("'{'")
        nodes: list[Node] = []
        for _ in self.block_items(open_tok, "a node", f"kernel @{name.text}"):
            nodes.append(self.node())
        self.end_of_line("the kernel's '}'")
        for o in out_toks:  # outputs are computed in the body, so they are checked after it
            if o.text not in self.types:
                raise self.error(
                    f"kernel @{name.text} lists output %{o.text}, which is not defined", o
                )
        return Kernel(name.text, kind.text, tuple(nodes), inputs, tuple(o.text for o in out_toks))

    def arena(self) -> ArenaPlan:
        self.advance()
        fields: dict[str, int] = {}
        while not self.at_punct("{"):
            key = self.expect(Tok.IDENT, what="peak=, naive=, align= or '{'")
            if key.text not in ("peak", "naive", "align"):
                raise self.error(
                    f"unknown arena field {key.text!r}",
                    key,
                    hint="an arena header is: arena peak=N naive=N align=N {",
                )
            if key.text in fields:
                raise self.error(f"arena field {key.text!r} is given twice", key)
            self.expect_punct("=", f"after {key.text}")
            fields[key.text] = self.int_tok(self.expect(Tok.INT, what="a byte count"))
        for req in ("peak", "naive"):
            if req not in fields:
                raise self.error(f"arena header is missing {req}=")
        open_tok = self.advance()
        self.end_of_line("'{'")
        slots: list[BufferSlot] = []
        slot = "a slot (%v @offset +size live a..b [alias %r] [over %r])"
        for _ in self.block_items(open_tok, slot, "the arena"):
            value = self.use("in an arena slot")
            off_tok = self.expect(Tok.SYMBOL, what="the slot offset (@0)")
            if not off_tok.text.isdigit():
                raise self.error("a slot offset is a byte count, as in @0", off_tok)
            self.expect_punct("+", "before the slot size")
            size = self.int_tok(self.expect(Tok.INT, what="the slot size in bytes"))
            self.expect(Tok.IDENT, "live", "'live'")
            first = self.int_tok(self.expect(Tok.INT, what="the first kernel index"))
            self.expect(Tok.DOTDOT, what="'..' in the live range a..b")
            last = self.int_tok(self.expect(Tok.INT, what="the last kernel index"))
            alias = ""
            if self.at(Tok.IDENT) and self.tok.text == "alias":
                self.advance()
                alias = self.use("after 'alias' (the slot whose bytes it shares)")
            over = ""
            if self.at(Tok.IDENT) and self.tok.text == "over":
                self.advance()
                over = self.use("after 'over' (the input written over in place)")
            self.end_of_line("the arena slot")
            slots.append(BufferSlot(value, self.int_tok(off_tok), size, first, last, alias,
                                    over))
        self.end_of_line("the arena's '}'")
        return ArenaPlan(tuple(slots), fields["peak"], fields["naive"], fields.get("align", 64))

    def graph(self) -> Graph:
        self.skip_blank()
        lv_tok = self.expect(Tok.IDENT, what="a level (hir, mir or lir)")
        if lv_tok.text not in _LEVELS:
            raise self.error(
                f"unknown level {lv_tok.text!r}",
                lv_tok,
                hint="a graph starts with hir, mir or lir, as in: mir @f {",
            )
        level = _LEVELS[lv_tok.text]
        name = self.expect(Tok.SYMBOL, what="the graph name (@name)")
        open_tok = self.expect_punct("{", "after the graph name")
        self.end_of_line("'{'")
        inputs: list[Value] = []
        params: list[Value] = []
        nodes: list[Node] = []
        kernels: list[Kernel] = []
        plan: ArenaPlan | None = None
        outputs: tuple[str, ...] | None = None
        while True:
            self.skip_blank()
            kw = self.keyword()
            if self.at(Tok.EOF):
                raise self.error(
                    f"expected '}}' closing {level.value} @{name.text} (opened on "
                    f"line {open_tok.line}), found end of input"
                )
            if self.at_punct("}"):
                if outputs is None:
                    raise self.error("expected 'return %v, ...' before the graph's closing '}'")
                break
            if outputs is not None:
                raise self.error(f"expected '}}' after return, found {self.tok.describe()}")
            body_started = bool(nodes or kernels or plan)
            if kw in ("input", "param"):
                if body_started:
                    raise self.error(f"{kw} declarations come before the nodes")
                (inputs if kw == "input" else params).append(self.decl())
            elif kw == "kernel":
                if level is not Level.LIR:
                    raise self.error(f"kernel blocks appear only in lir, not {level.value}")
                if nodes and not kernels or plan is not None:
                    raise self.error("kernels cannot follow bare nodes or the arena")
                k = self.kernel()
                kernels.append(k)
                nodes.extend(k.nodes)
            elif kw == "arena":
                if level is not Level.LIR:
                    raise self.error(f"an arena plan appears only in lir, not {level.value}")
                if plan is not None:
                    raise self.error("the arena plan is given twice")
                plan = self.arena()
            elif kw == "return":
                self.advance()
                outputs = () if self.at(Tok.NEWLINE) else self.return_list()
                self.end_of_line("the return values")
            elif self.at(Tok.VALUE):
                if kernels:
                    raise self.error("once a lir graph has kernels, every node is inside one")
                if plan is not None:
                    raise self.error("nodes come before the arena plan")
                nodes.append(self.node())
            else:
                raise self.error(
                    f"expected input, param, a node, kernel, arena, return or '}}', "
                    f"found {self.tok.describe()}"
                )
        self.advance()
        self.skip_blank()
        if not self.at(Tok.EOF):
            raise self.error(f"unexpected {self.tok.describe()} after the graph's closing '}}'")
        return Graph(
            name.text,
            level,
            tuple(inputs),
            tuple(params),
            tuple(nodes),
            outputs,
            tuple(kernels),
            plan,
        )

    def return_list(self) -> tuple[str, ...]:
        names = [self.use("to return")]
        while self.at_punct(","):
            self.advance()
            names.append(self.use("to return"))
        return tuple(names)


_KIND_TEXT = {
    "int": "an integer",
    "float": "a number",
    "bool": "true or false",
    "str": "a string",
    "dtype": "a dtype name",
    "ints": "a tuple of integers",
    "floats": "a tuple of numbers",
    "ints2": "a tuple of integer tuples",
    "any": "a value",
}


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_num(v: Any) -> bool:
    return _is_int(v) or isinstance(v, float)


def _kind_ok(spec: AttrSpec, v: AttrValue) -> bool:
    """Whether ``v`` has the structure the attribute's kind promises (the rules rely on it)."""
    checks = {
        "int": _is_int,
        "float": _is_num,  # an integer literal is a fine float (eps=0)
        "bool": lambda x: isinstance(x, bool),
        "str": lambda x: isinstance(x, str),
        "dtype": lambda x: isinstance(x, dt.DType),
        "ints": lambda x: isinstance(x, tuple) and all(_is_int(e) for e in x),
        "floats": lambda x: isinstance(x, tuple) and all(_is_num(e) for e in x),
        "ints2": lambda x: (
            isinstance(x, tuple)
            and all(isinstance(e, tuple) and all(_is_int(i) for i in e) for e in x)
        ),
    }
    return checks.get(spec.kind, lambda x: True)(v)


def parse(text: str) -> Graph:
    """Parse the text form of a graph (any level) and verify it.

    Raises IRParseError (with line and column) for malformed text, unknown dtypes or ops and
    undefined or duplicate values; VerifyError when a node disagrees with its op's rule.
    """
    g = _Parser(text).graph()
    # HIR ops that appear in MIR/LIR text are taken as claimed natively by some target
    present = frozenset(n.op for n in g.nodes if n.op in HIR_OPS)
    return verify(g, native_composites=present)


def parse_attr(text: str) -> AttrValue:
    """Parse one attribute value (the inverse of printer.fmt_attr)."""
    p = _Parser(text)
    p.skip_blank()
    v = p.attr_value()
    p.skip_blank()
    if not p.at(Tok.EOF):
        raise p.error(f"unexpected {p.tok.describe()} after the attribute value")
    return v


def parse_type(text: str) -> TensorType:
    """Parse a tensor type such as ``f32[2,3]``."""
    p = _Parser(text)
    p.skip_blank()
    t = p.tensor_type()
    p.skip_blank()
    if not p.at(Tok.EOF):
        raise p.error(f"unexpected {p.tok.describe()} after the type")
    return t


__all__ = ["parse", "parse_attr", "parse_type", "tokenize", "Token", "Tok"]
