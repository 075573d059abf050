"""Browser fixtures: the system Chromium through Playwright (never a downloaded browser), a
fresh profile per session, screenshots kept as artifacts and checked to be non-blank."""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run"]


@pytest.fixture(scope="session")
def artifacts() -> Path:
    """Where screenshots go: $RLX_ARTIFACTS (CI uploads it) or a fresh temp dir."""
    root = Path(os.environ.get("RLX_ARTIFACTS") or tempfile.mkdtemp(prefix="rlx-explorer-"))
    out = root / "browser_explorer"
    out.mkdir(parents=True, exist_ok=True)
    return out


# module scope, not session: a Playwright sync session left open across the run leaves its
# event loop marked running in this thread between calls, so a later file's own
# sync_playwright() (tests/binder/harness.chromium_page: lite, splat) failed with "using
# Playwright Sync API inside the asyncio loop" whenever it ran after these on one worker
@pytest.fixture(scope="module")
def browser_context() -> Iterator[Any]:
    if not Path(CHROMIUM).exists():
        pytest.skip(f"no system Chromium at {CHROMIUM} (scripts/setup.sh installs it)")
    sync_api = pytest.importorskip("playwright.sync_api")
    profile = tempfile.mkdtemp(prefix="rlx-chromium-")
    with sync_api.sync_playwright() as pw:
        ctx = pw.chromium.launch_persistent_context(
            profile, executable_path=CHROMIUM, args=FLAGS, headless=True,
            viewport={"width": 1500, "height": 950})
        try:
            yield ctx
        finally:
            ctx.close()
    shutil.rmtree(profile, ignore_errors=True)


@pytest.fixture
def page(browser_context: Any) -> Iterator[Any]:
    p = browser_context.new_page()
    p.errors = []  # type: ignore[attr-defined]
    p.dialogs = []  # type: ignore[attr-defined]
    p.on("pageerror", lambda e: p.errors.append(str(e)))
    p.on("dialog", lambda d: (p.dialogs.append(d.message), d.dismiss()))
    yield p
    p.close()


def assert_not_blank(path: Path) -> None:
    """A screenshot with real content: many distinct colours, not one flat fill."""
    from PIL import Image

    img = Image.open(path).convert("RGB")
    colours = img.getcolors(maxcolors=1 << 20) or []
    assert len(colours) > 20, f"{path} looks blank ({len(colours)} colours)"
    assert max(c for c, _ in colours) < 0.97 * img.width * img.height, f"{path} is one colour"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
