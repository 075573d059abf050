"""Make the venv's Jupyter ready for the explorer (run by scripts/setup.sh; idempotent):

1. every IPython kernel and shell of the venv loads ``rlx_explorer`` at start, so ``%%rlx``
   works without ``%load_ext`` (``<prefix>/etc/ipython/ipython_config.json``: IPython reads
   that folder for the environment it runs in; other keys of the file are kept);
2. the JupyterLab extension (MIME renderer of saved outputs, browser WebGPU executor) is linked
   into ``<prefix>/share/jupyter/labextensions`` from ``extension/labextension``, as
   ``jupyter labextension develop`` does: an editable install does not copy the data files a
   wheel carries, so without the link saved explorer outputs show only their fallback;
3. JupyterLab saves widget state with the notebook (a settings override), so explorer widgets
   render again when the notebook is reopened without a kernel.

    usage: python scripts/notebook_setup.py [--prefix PREFIX]   (default: sys.prefix)
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXTENSION = "rlx_explorer"
LABEXT_NAME = "rlx-explorer-labextension"


def autoload(prefix: Path) -> Path:
    """Add ``rlx_explorer`` to ``InteractiveShellApp.extensions`` of the env's IPython config."""
    path = prefix / "etc" / "ipython" / "ipython_config.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    config = json.loads(path.read_text()) if path.exists() else {}
    extensions = config.setdefault("InteractiveShellApp", {}).setdefault("extensions", [])
    if EXTENSION not in extensions:
        extensions.append(EXTENSION)
        path.write_text(json.dumps(config, indent=2) + "\n")
    return path


def link_labextension(prefix: Path, source: Path = ROOT / "extension" / "labextension") -> Path:
    """``<prefix>/share/jupyter/labextensions/rlx-explorer-labextension`` -> the built one
    (a real folder there, from a wheel install, is left alone)."""
    dest = prefix / "share" / "jupyter" / "labextensions" / LABEXT_NAME
    dest.parent.mkdir(parents=True, exist_ok=True)
    if dest.is_symlink() and dest.resolve() != source.resolve():
        dest.unlink()
    if not dest.exists() and not dest.is_symlink():
        dest.symlink_to(source.resolve(), target_is_directory=True)
    return dest


WIDGETS_PLUGIN = "@jupyter-widgets/jupyterlab-manager:plugin"


def save_widget_state(prefix: Path) -> Path:
    """JupyterLab of the env saves widget state into the notebook (``saveState``), so an
    explorer widget still renders when the notebook is reopened without a kernel (otherwise:
    "Error displaying widget: model not found"). A settings override of the env; other keys
    of the file are kept."""
    path = prefix / "share" / "jupyter" / "lab" / "settings" / "overrides.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    config = json.loads(path.read_text()) if path.exists() else {}
    plugin = config.setdefault(WIDGETS_PLUGIN, {})
    if plugin.get("saveState") is not True:
        plugin["saveState"] = True
        path.write_text(json.dumps(config, indent=2) + "\n")
    return path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prefix", default=sys.prefix, help="the environment (default: sys.prefix)")
    args = ap.parse_args(argv)
    prefix = Path(args.prefix)
    print(f"notebook: %%rlx loads by itself ({autoload(prefix)})")
    print(f"notebook: JupyterLab extension linked ({link_labextension(prefix)})")
    print(f"notebook: widget state saved with notebooks ({save_widget_state(prefix)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
