"""Dispatch matrix view model: HIR nodes x targets, each cell the route taken (native /
common-IR / rewritten / unsupported) with its full decision record, plus the what-if of every
policy (which op kinds moved route)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

ROUTES: tuple[str, ...] = ("native", "common-IR", "rewritten", "unsupported")


def _top_level(decisions: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    return [d for d in decisions if int(d.get("depth", 0)) == 0]


def _nested(decisions: list[dict[str, Any]], parent: str) -> list[dict[str, Any]]:
    return [d for d in decisions if d.get("parent") == parent and int(d.get("depth", 0)) > 0]


def counts(decisions: list[dict[str, Any]]) -> dict[str, dict[str, int]]:
    """op kind -> route -> number of top-level nodes (kinds in first-seen order)."""
    table: dict[str, dict[str, int]] = {}
    for d in _top_level(decisions):
        row = table.setdefault(d["op"], {r: 0 for r in ROUTES})
        row[d["route"]] = row.get(d["route"], 0) + 1
    return table


def dispatch_matrix(per_target: dict[str, dict[str, Any]], hir: dict[str, Any] | None,
                    policy: str) -> dict[str, Any]:
    """``per_target``: target -> {"decisions": [...JSON Decision records], "verification": ...,
    "compile_ready": bool}. Rows follow the HIR graph's node order; each cell holds the record
    and its nested decisions (what the decomposition's primitives did)."""
    ids = {n["name"]: n["id"] for n in (hir or {}).get("nodes", []) if n["kind"] == "node"}
    rows: list[dict[str, Any]] = []
    row_of: dict[str, dict[str, Any]] = {}
    for target, info in per_target.items():
        for d in _top_level(info.get("decisions", [])):
            name = d["node"]
            if name not in row_of:
                row_of[name] = {"node": name, "op": d["op"], "id": ids.get(name, ""),
                                "where": d.get("where", ""), "types": d.get("types", ""),
                                "origin": d.get("origin", name), "cells": {}}
                rows.append(row_of[name])
            row_of[name]["cells"][target] = {
                "route": d["route"], "rule": d.get("rule", ""), "record": d,
                "nested": _nested(info["decisions"], name)}
    order = {n["name"]: i for i, n in enumerate((hir or {}).get("nodes", []))}
    rows.sort(key=lambda r: order.get(r["node"], len(order)))
    targets = [{"name": t, "verification": info.get("verification", ""),
                "compile_ready": bool(info.get("compile_ready", True)),
                "counts": counts(info.get("decisions", []))}
               for t, info in per_target.items()]
    return {"policy": policy, "routes": list(ROUTES), "targets": targets, "rows": rows}


def moved_kinds(base: dict[str, Any], other: dict[str, Any]) -> list[dict[str, Any]]:
    """Kinds whose route counts differ between two matrices, per target."""
    out: list[dict[str, Any]] = []
    other_t = {t["name"]: t for t in other["targets"]}
    for t in base["targets"]:
        o = other_t.get(t["name"])
        if o is None:
            continue
        for kind, row in t["counts"].items():
            if o["counts"].get(kind) != row:
                out.append({"target": t["name"], "kind": kind, "before": row,
                            "after": o["counts"].get(kind, {})})
    return out


def policy_views(matrices: dict[str, dict[str, Any]], current: str) -> dict[str, Any]:
    """Every precomputed policy's matrix and what moved relative to ``current``."""
    base = matrices[current]
    return {"current": current, "available": list(matrices),
            "matrices": matrices,
            "moved": {p: moved_kinds(base, m) for p, m in matrices.items() if p != current}}
