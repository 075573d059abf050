"""Legalization failure view model: every illegal node with its code, the user's source line,
each rejected route with reasons, the fix hint, and the HIR graph node to highlight."""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path
from typing import Any

from rlx_explorer.views.root_causes import group_by_root
from rlx_explorer.views.sources import SourceIndex

ERRORS_DOC = "docs/errors.md"
REPO_ROOT = Path(__file__).resolve().parents[2]


def _split_where(where: str) -> tuple[str, int]:
    file, _, line = where.rpartition(":")
    if not file or not line.isdigit():
        return where, 0
    return file, int(line)


def failure_view(target: str, policy: str, failures: list[dict[str, Any]],
                 hir: dict[str, Any] | None, sources: SourceIndex, message: str = "",
                 compiled: bool = True) -> dict[str, Any]:
    """``failures``: JSON Decision records of the unsupported nodes (LegalizationError.to_json
    ()["failures"]). ``compiled`` says whether this came from a real compile or a static probe."""
    ids = {n["name"]: n["id"] for n in (hir or {}).get("nodes", [])}
    items = []
    for d in failures:
        file, line = _split_where(d.get("where", ""))
        why = next((r["message"] for rej in d.get("rejected", []) for r in rej.get("reasons", [])
                    if r.get("code") == d.get("code")), "")
        origin = d.get("origin") or d["node"]
        items.append({
            "node": d["node"], "op": d["op"], "types": d.get("types", ""),
            "code": d.get("code", ""), "message": why, "hint": d.get("hint", ""),
            "file": file, "file_label": sources.label(file), "line": line,
            "source_line": sources.line(file, line),
            "origin": origin, "origin_op": d.get("origin_op", ""),
            "hir_id": ids.get(origin, ids.get(d["node"], "")),
            "rejected": d.get("rejected", []), "record": d})
    codes = list(dict.fromkeys(i["code"] for i in items))
    return {"target": target, "policy": policy, "count": len(items), "codes": codes,
            "failures": items, "groups": group_by_root(items, hir, sources),
            "message": message, "compiled": compiled, "docs": ERRORS_DOC,
            "code_links": {c: error_link(c) for c in codes}}


def error_link(code: str) -> str:
    """The docs/errors.md entry of ``code``: the file in this checkout (a file URI) when it is
    there, else the repository-relative path; the anchor is GitHub's for the heading."""
    return f"{_errors_doc_uri()}#{_anchors().get(code, code.lower())}"


@lru_cache(maxsize=1)
def _anchors() -> dict[str, str]:
    """code -> heading anchor, as GitHub and most Markdown renderers derive it."""
    try:
        text = (REPO_ROOT / ERRORS_DOC).read_text(encoding="utf-8")
    except OSError:
        return {}
    out = {}
    for head in re.findall(r"^## (RLX-[A-Z]\d{3} .*)$", text, flags=re.M):
        slug = re.sub(r"[^\w\- ]", "", head.strip().lower()).replace(" ", "-")
        out[head.split(" ", 1)[0]] = slug
    return out


@lru_cache(maxsize=1)
def _errors_doc_uri() -> str:
    path = REPO_ROOT / ERRORS_DOC
    return path.as_uri() if path.is_file() else ERRORS_DOC
