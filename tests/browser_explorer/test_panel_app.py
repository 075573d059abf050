"""``rlx explore FILE`` serves the Panel app on 127.0.0.1; Chromium loads it and the same ESM
renders (inside Panel's AnyWidgetComponent), with live policy recompiles through Python."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rlx_core.cli import REPO_ROOT

from .checks import check_dispatch, check_failures, check_graphs_and_linking, wait_ready
from .conftest import free_port
from .servers import PYTHON, server

MODELS = REPO_ROOT / "examples" / "models"


def _serve(model: str, targets: str, tmp_path: Path) -> Any:
    port = free_port()
    argv = [PYTHON, "-m", "rlx_core.cli", "explore", str(MODELS / model), "--port", str(port),
            "--target", targets]
    return server(argv, f"http://127.0.0.1:{port}/", tmp_path / f"panel-{port}.log"), port


def test_panel_app_renders_links_and_recompiles(page: Any, tmp_path: Path,
                                                artifacts: Path) -> None:
    ctx, port = _serve("mlp.py", "numpy,webgpu", tmp_path)
    with ctx:
        page.goto(f"http://127.0.0.1:{port}/")
        wait_ready(page, timeout=90_000)
        check_graphs_and_linking(page, page, artifacts, "panel")
        check_dispatch(page, page, artifacts, "panel")
        assert "recompiles live" in page.inner_text(".rlx-pane[data-pane='dispatch']")
        page.select_option("select.rlx-policy", "force-native")
        # Python recompiled under the new policy and sent a new bundle
        page.wait_for_selector(".rlx-pane[data-pane='dispatch'] >> text=compiled with force-native",
                               timeout=90_000)
        assert page.locator(".rlx-cell.r-unsupported").count() > 0
        page.screenshot(path=str(artifacts / "panel-force-native.png"), full_page=True)
    assert not page.errors, page.errors


def test_panel_app_failure_view(page: Any, tmp_path: Path, artifacts: Path) -> None:
    ctx, port = _serve("illegal_f64.py", "webgpu,numpy", tmp_path)
    with ctx:
        page.goto(f"http://127.0.0.1:{port}/")
        wait_ready(page, timeout=90_000)
        check_failures(page, page, artifacts, "panel")
    assert not page.errors, page.errors
