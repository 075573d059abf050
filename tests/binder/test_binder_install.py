"""Binder's install, replayed: a fresh virtual environment gets binder/requirements.txt, then
binder/postBuild runs from a copy of the repository (what repo2docker does), then a JupyterLab
server from that environment starts on 127.0.0.1 and serves the extension, which activates in
Chromium, and its kernel imports rlx with the webgpu-browser target registered."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import venv
from pathlib import Path

import pytest

from tests.binder.harness import ROOT, build_extension, chromium_page, lab_server, require_browser

pytestmark = pytest.mark.slow

# what repo2docker would copy: the tracked tree (no venv, no node_modules, no build output)
_IGNORE = shutil.ignore_patterns(".venv", ".git", "node_modules", "build", "lib", "*.egg-info",
                                 "__pycache__", ".pytest_cache", ".hypothesis", ".rlx_cache")


def _sh(cmd: list[str], env: dict[str, str], cwd: Path, timeout: int = 1200) -> str:
    done = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{cmd} failed:\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
    return done.stdout


def test_binder_steps_in_a_fresh_venv_then_jupyterlab_starts(tmp_path: Path) -> None:
    require_browser()
    build_extension()  # the committed build, refreshed if its sources changed
    repo = tmp_path / "repo"
    shutil.copytree(ROOT, repo, ignore=_IGNORE)
    env_dir = tmp_path / "binder-env"
    venv.EnvBuilder(with_pip=True, clear=True).create(env_dir)
    bindir = env_dir / "bin"
    env = {**{k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "PYTHON"))},
           "PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}", "HOME": str(tmp_path / "home"),
           "RLX_NOTEBOOKS": str(tmp_path / "home" / "notebooks"), "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    (tmp_path / "home").mkdir()
    py = str(bindir / "python")
    _sh([py, "-m", "pip", "install", "-q", "-r", "binder/requirements.txt"], env, repo)
    _sh(["bash", "binder/postBuild"], env, repo)

    listed = subprocess.run([str(bindir / "jupyter"), "labextension", "list"], env=env,
                            capture_output=True, text=True, timeout=120)
    text = listed.stdout + listed.stderr
    assert "rlx-explorer-labextension" in text and "enabled" in text and "OK" in text, text
    share = env_dir / "share" / "jupyter" / "labextensions" / "rlx-explorer-labextension"
    assert (share / "package.json").exists() and any((share / "static").glob("remoteEntry.*.js"))
    notebooks = sorted(p.name for p in (tmp_path / "home" / "notebooks").glob("*.ipynb"))
    assert {"00_tour.ipynb", "01_legalization_failures.ipynb"} <= set(notebooks)

    probe = _sh([py, "-c", "import json, rlx_core as rlx; print(json.dumps({t.name: t.available "
                 "for t in rlx.targets()}))"], env, tmp_path)
    assert json.loads(probe.strip().splitlines()[-1])["webgpu-browser"] is False  # no kernel here

    with lab_server(tmp_path / "lab", [str(bindir / "jupyter"), "lab"], env=env) as lab:
        specs = lab.api("kernelspecs")["kernelspecs"]
        assert "python3" in specs
        with chromium_page() as page:
            page.goto(lab.page_url("lab"))
            page.wait_for_function("() => document.body.dataset.rlxExtension === 'active'",
                                   timeout=180_000)
