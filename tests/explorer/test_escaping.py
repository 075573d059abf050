"""Hostile names: value names (after clean_name), scopes and file strings reach every view as
plain data, and no host ever emits them as markup."""

from __future__ import annotations

import json

from rlx_explorer.html_export import html_document
from rlx_explorer.views.dot import render_svg, to_dot

from .conftest import EVIL, EVIL_SCOPE


def test_raw_strings_are_data_in_the_bundle(hostile_bundle: dict) -> None:
    text = json.dumps(hostile_bundle)
    assert EVIL_SCOPE in json.loads(text)["levels"]["hir"]["clusters"][0]["scope"]
    files = [f["file"] for f in hostile_bundle["source"]["files"]]
    assert EVIL + ".py" in files


def test_html_export_never_contains_raw_markup(hostile_bundle: dict) -> None:
    page = html_document(hostile_bundle)
    assert EVIL not in page and "<img" not in page
    assert "<script>alert" not in page and "</script><script>" not in page
    # exactly the four script elements the export writes
    assert page.count("<script") == 4 and page.count("</script>") == 4


def test_dot_and_svg_escape_labels(hostile_bundle: dict) -> None:
    hir = hostile_bundle["levels"]["hir"]
    dot = to_dot(hir)
    for n in hir["nodes"]:
        assert n["id"].isalnum()  # DOT identifiers are generated, never user names
    svg = render_svg(dot)
    if svg is None:
        return  # no `dot` here: the browser test covers the WASM path
    assert "<script>" not in svg and "<img" not in svg
    assert "&lt;/script&gt;" in svg  # the scope label, as text
