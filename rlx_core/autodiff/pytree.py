"""Minimal pytrees: nested tuples, lists and dicts (sorted keys) of leaves, flattened in order."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class TreeDef:
    """The structure of a pytree: ``kind`` is leaf, tuple, list or dict."""

    kind: str
    children: tuple[TreeDef, ...] = ()
    keys: tuple[Any, ...] = ()

    @property
    def num_leaves(self) -> int:
        return 1 if self.kind == "leaf" else sum(c.num_leaves for c in self.children)


def flatten(tree: Any) -> tuple[list[Any], TreeDef]:
    """Leaves in depth-first order (dict keys sorted, for determinism) and the structure."""
    if isinstance(tree, tuple | list):
        leaves: list[Any] = []
        defs = []
        for item in tree:
            sub, d = flatten(item)
            leaves.extend(sub)
            defs.append(d)
        return leaves, TreeDef("tuple" if isinstance(tree, tuple) else "list", tuple(defs))
    if isinstance(tree, dict):
        keys = tuple(sorted(tree))
        leaves, defs = [], []
        for k in keys:
            sub, d = flatten(tree[k])
            leaves.extend(sub)
            defs.append(d)
        return leaves, TreeDef("dict", tuple(defs), keys)
    return [tree], TreeDef("leaf")


def unflatten(tree_def: TreeDef, leaves: list[Any]) -> Any:
    """The inverse of ``flatten``."""
    it = iter(leaves)

    def build(d: TreeDef) -> Any:
        if d.kind == "leaf":
            return next(it)
        items = [build(c) for c in d.children]
        if d.kind == "dict":
            return dict(zip(d.keys, items, strict=False))
        return tuple(items) if d.kind == "tuple" else items

    return build(tree_def)


def tree_map(fn: Callable[..., Any], tree: Any, *rest: Any) -> Any:
    """``fn`` applied leafwise to ``tree`` and trees of the same structure."""
    leaves, d = flatten(tree)
    others = [flatten(r)[0] for r in rest]
    return unflatten(d, [fn(*xs) for xs in zip(leaves, *others, strict=False)])
