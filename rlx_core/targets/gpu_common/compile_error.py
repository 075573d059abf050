"""A generated kernel its driver refused: the typed error, naming the source line and LIR node."""

from __future__ import annotations

import re

from rlx_core.errors import RlxError


class ShaderCompileError(RlxError):
    """A driver or shader compiler rejected a generated kernel (a renderer bug)."""

    code = "RLX-G001"


def node_of_line(source: str, line: int, comment: str = "//") -> str:
    """The LIR node a source line was made for: its ``% node`` comment, or the nearest one
    above it in the same function."""
    lines = source.splitlines()
    for i in range(min(line, len(lines)) - 1, -1, -1):
        text = lines[i]
        if text.rstrip().endswith("{") and i < line - 1 and "%" not in text:
            break
        m = re.search(re.escape(comment) + r".*?(%[A-Za-z0-9_.]+)", text)
        if m:
            return m.group(1)
    return "(no node: kernel scaffolding)"


# clang (OpenCL): "file.cl:28:14: error: ..." or "error: file.cl:28:14: ..."; glslang:
# "ERROR: 0:28: ..."
CLANG_LINE = r":(\d+):\d+:"
GLSLANG_LINE = r"ERROR: \d+:(\d+):"


def compile_error(api: str, kernel: str, source: str, log: str,
                  pattern: str = CLANG_LINE) -> ShaderCompileError:
    """A ShaderCompileError for ``log`` (the compiler's output): the first error's line, that
    line of source, and the node it computes."""
    errors = [x for x in log.splitlines() if "error" in x.lower()]
    m = next((m for x in errors if (m := re.search(pattern, x))), None)
    where = ""
    if m:
        n = int(m.group(1))
        lines = source.splitlines()
        text = lines[n - 1].strip() if 0 < n <= len(lines) else ""
        where = f" at line {n} (node {node_of_line(source, n)}): {text}"
    first = errors[0] if errors else log.strip()[:300]
    return ShaderCompileError(f"{api} rejected kernel {kernel}{where}\n{first.strip()}",
                              hint="a renderer bug: report it with the kernel source "
                                   "(Program.sources)")
