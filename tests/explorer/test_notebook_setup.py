"""scripts/notebook_setup.py (run by scripts/setup.sh): kernels of the env load rlx_explorer by
themselves, and the JupyterLab extension is linked into the env (issue 30)."""

from __future__ import annotations

import json
import runpy
from pathlib import Path

from IPython.core.application import BaseIPythonApplication

from rlx_core.cli import REPO_ROOT

SETUP = runpy.run_path(str(REPO_ROOT / "scripts" / "notebook_setup.py"))


def test_ipython_of_the_env_loads_the_extension(tmp_path: Path) -> None:
    cfg = tmp_path / "etc" / "ipython" / "ipython_config.json"
    cfg.parent.mkdir(parents=True)
    cfg.write_text(json.dumps({"InteractiveShellApp": {"exec_lines": ["x = 1"]}}))
    assert SETUP["main"](["--prefix", str(tmp_path)]) == 0
    assert SETUP["main"](["--prefix", str(tmp_path)]) == 0  # idempotent
    # IPython's own loader, on the folder it reads for the environment (ENV_CONFIG_DIRS)
    app = BaseIPythonApplication(config_file_paths=[str(cfg.parent)])
    app.load_config_file(suppress_errors=False)
    shell_app = app.config.InteractiveShellApp
    assert shell_app.extensions == ["rlx_explorer"] and shell_app.exec_lines == ["x = 1"]


def test_labextension_is_linked_to_the_built_one(tmp_path: Path) -> None:
    dest = SETUP["link_labextension"](tmp_path)
    assert dest.is_symlink() and (dest / "package.json").is_file()
    build = json.loads((dest / "package.json").read_text())["jupyterlab"]["_build"]
    assert (dest / build["load"]).is_file() and "mimeExtension" in build  # a built extension


def test_jupyterlab_saves_widget_state(tmp_path: Path) -> None:
    path = tmp_path / "share" / "jupyter" / "lab" / "settings" / "overrides.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"@jupyterlab/apputils-extension:themes": {"theme": "x"}}))
    SETUP["save_widget_state"](tmp_path)
    config = json.loads(path.read_text())
    assert config["@jupyter-widgets/jupyterlab-manager:plugin"] == {"saveState": True}
    assert config["@jupyterlab/apputils-extension:themes"] == {"theme": "x"}
