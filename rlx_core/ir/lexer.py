"""The IR text tokenizer: turns text into tokens that carry 1-based line and column.

Newlines are tokens because the text form is one construct per line; that lets the parser say
"expected end of line" at the right place. Names after ``%`` and ``@`` use the alphabet
builder.clean_name produces; strings are JSON literals, decoded here by hand.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from rlx_core.errors import IRParseError

# Characters of a value / graph / kernel name after its sigil: the alphabet builder.clean_name
# produces, so any name the builder makes survives the text form.
_NAME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.")
_IDENT_START = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_")
_IDENT_CHARS = _IDENT_START | frozenset("0123456789")
_DIGITS = frozenset("0123456789")
_PUNCT = frozenset("{}()[],:=+-")
_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}


class Tok(enum.Enum):
    """The kinds of token of the IR text format; each value is how an error message names it."""

    IDENT = "identifier"
    VALUE = "%name"  # text is the name without '%'
    SYMBOL = "@name"  # text is the name without '@'
    INT = "integer"
    FLOAT = "number"
    STRING = "string"  # text is the decoded string
    PUNCT = "punctuation"
    DOTDOT = "'..'"
    NEWLINE = "end of line"
    EOF = "end of input"


@dataclass(frozen=True)
class Token:
    """One token of IR text and where it starts (1-based line and column)."""

    kind: Tok
    text: str
    line: int
    col: int

    def describe(self) -> str:
        """How the token is named in an error message."""
        if self.kind is Tok.NEWLINE:
            return "end of line"
        if self.kind is Tok.EOF:
            return "end of input"
        if self.kind is Tok.VALUE:
            return f"'%{self.text}'"
        if self.kind is Tok.SYMBOL:
            return f"'@{self.text}'"
        if self.kind is Tok.STRING:
            return "a string"
        return f"'{self.text}'"


class Source:
    """The text split into lines, so errors can quote the offending one."""

    def __init__(self, text: str):
        self.lines = text.split("\n")

    def error(self, message: str, line: int, col: int, hint: str | None = None) -> IRParseError:
        src = self.lines[line - 1] if 0 < line <= len(self.lines) else ""
        return IRParseError(message, line, col, src.rstrip("\r"), hint=hint)


def tokenize(text: str) -> list[Token]:
    """Split IR text into tokens; ``#`` starts a comment that runs to the end of the line."""
    return tokenize_source(Source(text))


def tokenize_source(src: Source) -> list[Token]:
    toks: list[Token] = []
    for ln, line in enumerate(src.lines, start=1):
        line = line.rstrip("\r")
        i, n = 0, len(line)
        while i < n:
            c = line[i]
            col = i + 1
            if c in " \t":
                i += 1
            elif c == "#":
                break
            elif c in "%@":
                j = i + 1
                while j < n and line[j] in _NAME_CHARS:
                    j += 1
                if j == i + 1:
                    raise src.error(
                        f"expected a name after '{c}'",
                        ln,
                        col + 1,
                        hint="names use letters, digits, '_' and '.'",
                    )
                kind = Tok.VALUE if c == "%" else Tok.SYMBOL
                toks.append(Token(kind, line[i + 1 : j], ln, col))
                i = j
            elif c in _IDENT_START:
                j = i
                while j < n and line[j] in _IDENT_CHARS:
                    j += 1
                toks.append(Token(Tok.IDENT, line[i:j], ln, col))
                i = j
            elif c in _DIGITS:
                i = _number(line, i, ln, toks, src)
            elif c == '"':
                i = _string(line, i, ln, toks, src)
            elif c == "-" and line.startswith("->", i):
                toks.append(Token(Tok.PUNCT, "->", ln, col))
                i += 2
            elif c == "." and line.startswith("..", i):
                toks.append(Token(Tok.DOTDOT, "..", ln, col))
                i += 2
            elif c in _PUNCT:
                toks.append(Token(Tok.PUNCT, c, ln, col))
                i += 1
            else:
                raise src.error(f"unexpected character {c!r}", ln, col)
        toks.append(Token(Tok.NEWLINE, "", ln, len(line) + 1))
    # end of input is reported just past the last non-blank line, so the caret has a line to sit on
    last = len(src.lines)
    while last > 1 and not src.lines[last - 1].strip():
        last -= 1
    toks.append(Token(Tok.EOF, "", last, len(src.lines[last - 1].rstrip("\r")) + 1))
    return toks


def _digits(line: str, j: int) -> int:
    while j < len(line) and line[j] in _DIGITS:
        j += 1
    return j


def _number(line: str, i: int, ln: int, toks: list[Token], src: Source) -> int:
    """``123``, ``1.5``, ``1e-05``; a '.' belongs to the number only before a digit (so the
    arena's ``0..1`` is 0, '..', 1)."""
    j = _digits(line, i)
    is_float = False
    if j + 1 < len(line) and line[j] == "." and line[j + 1] in _DIGITS:
        j, is_float = _digits(line, j + 1), True
    if j < len(line) and line[j] in "eE":
        k = j + 1
        if k < len(line) and line[k] in "+-":
            k += 1
        if k >= len(line) or line[k] not in _DIGITS:
            raise src.error("malformed exponent: expected digits after 'e'", ln, k + 1)
        j, is_float = _digits(line, k), True
    if j < len(line) and line[j] in _IDENT_CHARS:
        raise src.error(f"malformed number {line[i : j + 1]!r}", ln, i + 1)
    toks.append(Token(Tok.FLOAT if is_float else Tok.INT, line[i:j], ln, i + 1))
    return j


def _string(line: str, i: int, ln: int, toks: list[Token], src: Source) -> int:
    """A JSON string literal (the printer writes them with json.dumps), decoded by hand."""
    out: list[str] = []
    j = i + 1
    while True:
        if j >= len(line):
            raise src.error(
                "unterminated string: expected a closing '\"' on this line",
                ln,
                i + 1,
                hint="write a newline inside a string as \\n",
            )
        c = line[j]
        if c == '"':
            toks.append(Token(Tok.STRING, "".join(out), ln, i + 1))
            return j + 1
        if c == "\\":
            esc = line[j + 1] if j + 1 < len(line) else ""
            if esc in _ESCAPES:
                out.append(_ESCAPES[esc])
                j += 2
            elif esc == "u":
                code = _hex4(line, j, ln, src)
                j += 6
                # a surrogate pair written as two escapes is one character, as in JSON
                if 0xD800 <= code < 0xDC00 and line.startswith("\\u", j):
                    low = _hex4(line, j, ln, src)
                    if 0xDC00 <= low < 0xE000:
                        code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
                        j += 6
                out.append(chr(code))
            else:
                raise src.error(
                    f"invalid escape '\\{esc}' in string",
                    ln,
                    j + 1,
                    hint='use \\" \\\\ \\/ \\b \\f \\n \\r \\t or \\uXXXX',
                )
        elif ord(c) < 0x20:
            raise src.error(
                f"control character {c!r} inside a string",
                ln,
                j + 1,
                hint="escape it (\\t, \\n, or \\uXXXX)",
            )
        else:
            out.append(c)
            j += 1


def _hex4(line: str, j: int, ln: int, src: Source) -> int:
    digits = line[j + 2 : j + 6]
    if len(digits) != 4 or any(ch not in "0123456789abcdefABCDEF" for ch in digits):
        raise src.error("invalid \\u escape: expected four hex digits", ln, j + 1)
    return int(digits, 16)


__all__ = ["Tok", "Token", "Source", "tokenize", "tokenize_source"]
