"""Every public name of ``rlx_core`` and ``rlx_explorer`` (their ``__all__``) is documented:
each function, class and module has a docstring of its own, and docs/api.md has a row naming it
(``rlx.NAME`` / ``rlx_explorer.NAME``). Every class in the two packages whose name does not
start with ``_`` has a docstring too, exported or not (a target's dialect, a pass's record)."""

from __future__ import annotations

import ast
import inspect
import re
import types
from pathlib import Path
from typing import Any

import pytest

import rlx_core
import rlx_explorer

ROOT = Path(__file__).resolve().parent.parent
API_MD = ROOT / "docs" / "api.md"
PACKAGES = [(rlx_core, "rlx"), (rlx_explorer, "rlx_explorer")]


def _own_doc(obj: Any) -> str | None:
    """The docstring written for ``obj`` itself (a class's is not inherited from its bases)."""
    if inspect.isclass(obj):
        return obj.__dict__.get("__doc__")
    return obj.__doc__


def _public(mod: types.ModuleType) -> list[tuple[str, Any]]:
    return [(name, getattr(mod, name)) for name in mod.__all__]


@pytest.mark.parametrize(("mod", "prefix"), PACKAGES, ids=[p for _, p in PACKAGES])
def test_every_public_function_class_and_module_has_a_docstring(mod: types.ModuleType,
                                                                  prefix: str) -> None:
    missing = [f"{prefix}.{name}" for name, obj in _public(mod)
               if (inspect.isclass(obj) or callable(obj) or isinstance(obj, types.ModuleType))
               and not (_own_doc(obj) or "").strip()]
    assert not missing, f"public names without a docstring: {', '.join(missing)}"


@pytest.mark.parametrize(("mod", "prefix"), PACKAGES, ids=[p for _, p in PACKAGES])
def test_every_public_name_has_a_row_in_docs_api_md(mod: types.ModuleType, prefix: str) -> None:
    text = API_MD.read_text(encoding="utf-8")
    named = set(re.findall(r"`(rlx(?:_explorer)?\.[A-Za-z_][A-Za-z0-9_]*)`", text))
    missing = [f"{prefix}.{name}" for name in mod.__all__ if f"{prefix}.{name}" not in named]
    assert not missing, f"public names docs/api.md does not list: {', '.join(missing)}"


def test_every_class_without_a_leading_underscore_has_a_docstring() -> None:
    missing = []
    for package in ("rlx_core", "rlx_explorer"):
        for path in sorted((ROOT / package).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            missing += [f"{path.relative_to(ROOT)}:{node.lineno} {node.name}"
                        for node in ast.walk(tree)
                        if isinstance(node, ast.ClassDef) and not node.name.startswith("_")
                        and not (ast.get_docstring(node) or "").strip()]
    assert not missing, "classes without a docstring (say what each is for):\n" + \
        "\n".join(missing)
