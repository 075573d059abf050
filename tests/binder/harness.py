"""Shared by the JupyterLab and Binder tests: build the extension, run a JupyterLab server on
127.0.0.1 that sees it, and open pages in system Chromium with the WebGPU flags of the webgpu
browser harness (tests/browser). Everything is isolated in a temporary folder."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.browser.test_webgpu_browser import CHROMIUM, FLAGS

ROOT = Path(__file__).resolve().parents[2]
EXT_NAME = "rlx-explorer-labextension"
TOKEN = "rlx-test-token"


def require_browser() -> None:
    if not Path(CHROMIUM).exists():
        pytest.skip("no system Chromium (Debian package chromium)")
    pytest.importorskip("playwright.sync_api", reason="playwright is not installed")


def build_extension() -> Path:
    """extension/labextension, rebuilt when its inputs changed (seconds when up to date)."""
    out = ROOT / "extension" / "labextension"
    if shutil.which("npm") is None and (out / "package.json").exists():
        return out  # the committed build
    done = subprocess.run(["bash", str(ROOT / "extension" / "build.sh")], capture_output=True,
                          text=True, timeout=900, env={**os.environ, "PYTHON": sys.executable})
    assert done.returncode == 0, done.stdout + done.stderr
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class LabServer:
    url: str
    root: Path
    runtime: Path
    log: Path

    def api(self, path: str) -> Any:
        req = urllib.request.Request(f"{self.url}/api/{path}",
                                     headers={"Authorization": f"token {TOKEN}"})
        with urllib.request.urlopen(req, timeout=10) as r:
            return json.loads(r.read())

    def page_url(self, path: str) -> str:
        return f"{self.url}/{path}?token={TOKEN}"


@contextmanager
def lab_server(tmp: Path, jupyter: list[str], data_path: Path | None = None,
               env: dict[str, str] | None = None) -> Iterator[LabServer]:
    """``jupyter lab`` (the given command) on 127.0.0.1 with a private config, data and runtime
    folder; ``data_path`` is prepended to JUPYTER_PATH (where a labextensions/ folder lives)."""
    root, runtime, cfg = tmp / "notebooks", tmp / "runtime", tmp / "config"
    for d in (root, runtime, cfg):
        d.mkdir(parents=True, exist_ok=True)
    port = free_port()
    full_env = {**os.environ, "JUPYTER_CONFIG_DIR": str(cfg), "JUPYTER_RUNTIME_DIR": str(runtime),
                "JUPYTERLAB_SETTINGS_DIR": str(tmp / "settings"),
                "JUPYTERLAB_WORKSPACES_DIR": str(tmp / "workspaces"), **(env or {})}
    if data_path is not None:
        full_env["JUPYTER_PATH"] = os.pathsep.join(
            [str(data_path), *filter(None, [os.environ.get("JUPYTER_PATH")])])
    log = tmp / "lab.log"
    with open(log, "w") as logf:
        proc = subprocess.Popen(
            [*jupyter, "--no-browser", "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}",
             f"--IdentityProvider.token={TOKEN}", f"--ServerApp.root_dir={root}",
             "--ServerApp.open_browser=False", "--allow-root", "--LabApp.news_url=", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"],
            stdout=logf, stderr=subprocess.STDOUT, env=full_env, cwd=root)
    server = LabServer(f"http://127.0.0.1:{port}", root, runtime, log)
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                server.api("status")
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError("jupyter lab did not start:\n" +
                                         log.read_text()) from None
                time.sleep(0.5)
        yield server
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()


def extension_data_dir(tmp: Path, built: Path) -> Path:
    """A JUPYTER_PATH entry holding labextensions/<name> -> the built extension."""
    data = tmp / "jupyter-data"
    target = data / "labextensions" / EXT_NAME
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(built, target, dirs_exist_ok=True)
    shutil.copy(ROOT / "extension" / "install.json", target / "install.json")
    return data


@contextmanager
def chromium_page() -> Iterator[Any]:
    """One page in headless system Chromium (WebGPU on SwiftShader), console collected."""
    import tempfile

    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw, tempfile.TemporaryDirectory() as profile:
        ctx = pw.chromium.launch_persistent_context(profile, executable_path=CHROMIUM,
                                                    args=FLAGS, headless=True)
        try:
            page = ctx.new_page()
            page.console_lines = []  # type: ignore[attr-defined]
            page.on("console", lambda m: page.console_lines.append(m.text))  # type: ignore
            yield page
        finally:
            ctx.close()
