"""Syntax highlighting as data: each line becomes a list of (class, text) tokens.

The viewer turns tokens into ``<span>``s through ``textContent``, so highlighting never builds
markup from source text. Two lexers: the RLX IR text form, and C-like kernel sources (C, WGSL,
GLSL, CUDA share enough lexical structure for colouring).
"""

from __future__ import annotations

import re

Token = tuple[str, str]

_IR = re.compile(r"""
    (?P<str>"(?:[^"\\]|\\.)*")
  | (?P<val>%[A-Za-z0-9_.]+)
  | (?P<sym>@[A-Za-z0-9_.]+)
  | (?P<type>\b(?:bool|i4|i8|i16|i32|i64|u8|u32|f16|bf16|f32|f64|c64)\[[0-9,]*\])
  | (?P<kw>\b(?:hir|mir|lir|input|param|return|kernel|arena|loc|scope|from|live)\b)
  | (?P<num>-?\b\d+(?:\.\d+)?(?:e[-+]?\d+)?\b)
  | (?P<op>\b[a-z_][a-z0-9_]*(?=\())
""", re.VERBOSE)

_C_KEYWORDS = (
    "if else for while do return break continue switch case default struct const static "
    "inline void int float double char unsigned signed long short bool let var fn var "
    "array vec2 vec3 vec4 u32 i32 f32 f16 uniform storage read_write workgroup_size "
    "compute builtin group binding include define pragma omp parallel restrict size_t "
    "int64_t int32_t uint8_t uint32_t int8_t int16_t __global__ __device__").split()

_C = re.compile(r"""
    (?P<com>//.*$|/\*.*?\*/|\#\s*\w+.*$)
  | (?P<str>"(?:[^"\\]|\\.)*")
  | (?P<num>\b\d+(?:\.\d+)?(?:[eE][-+]?\d+)?[fuUlL]*\b)
  | (?P<word>\b[A-Za-z_][A-Za-z0-9_]*\b)
""", re.VERBOSE)

_KW = frozenset(_C_KEYWORDS)


def _lex(line: str, pattern: re.Pattern[str], keywords: frozenset[str] | None) -> list[Token]:
    out: list[Token] = []
    pos = 0
    for m in pattern.finditer(line):
        if m.start() > pos:
            out.append(("", line[pos:m.start()]))
        kind = m.lastgroup or ""
        if kind == "word":
            kind = "kw" if keywords is not None and m.group() in keywords else ""
        out.append((kind, m.group()))
        pos = m.end()
    if pos < len(line):
        out.append(("", line[pos:]))
    return out


def highlight_ir(text: str) -> list[list[Token]]:
    """Tokens for each line of IR text."""
    return [_lex(line, _IR, None) for line in text.splitlines()]


def highlight_source(text: str) -> list[list[Token]]:
    """Tokens for each line of generated kernel source (C-like languages)."""
    return [_lex(line, _C, _KW) for line in text.splitlines()]
