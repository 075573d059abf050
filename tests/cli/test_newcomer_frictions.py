"""The command line as a newcomer meets it (issue 30): `rlx run`'s default target, target
choices in every subcommand's help, an aligned `rlx targets`, a busy port, webgpu-browser's
typed error, train_mnist.py's help."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest

import rlx_core as rlx
from rlx_core.api import TargetInfo, default_jit_target
from rlx_core.cli import REPO_ROOT, PortBusyError, build_parser, main, pick_port, targets_table
from rlx_core.targets.registry import target_names

MLP = str(REPO_ROOT / "examples" / "models" / "mlp.py")


def test_run_defaults_to_the_fastest_target_and_compares_with_numpy(capsys) -> None:
    assert main(["run", MLP]) == 0
    out = capsys.readouterr().out
    assert f"ran on {default_jit_target()}" in out and "vs numpy reference" in out


@pytest.mark.parametrize("command", ["compile", "explain", "run", "explore"])
def test_subcommand_help_lists_every_registered_target(command: str, capsys, monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "400")  # no wrapping inside a hyphenated target name
    with pytest.raises(SystemExit):
        build_parser().parse_args([command, "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert all(name in text for name in target_names()), text


def test_explore_defaults_include_cpu() -> None:
    args = build_parser().parse_args(["explore", MLP])
    assert "cpu" in args.target.split(",") and args.port is None


def test_targets_rows_line_up() -> None:
    rows = [TargetInfo("numpy", True, "", "executes", "ref"),
            TargetInfo("webgpu-browser", False, "no tab", "executes", "browser")]
    lines = targets_table(rows).splitlines()
    starts = {line.index(word) for line, word in zip(lines, ("verified", "executes", "executes"),
                                                     strict=True)}
    assert len(starts) == 1, lines  # the third column starts at one offset in every row
    assert lines[2].endswith("browser  (no tab)")


def test_busy_port_picks_a_free_one_or_says_which(capsys) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(PortBusyError) as info:
            pick_port(port)
        assert info.value.code == "RLX-E103" and "--port" in info.value.hint
        assert f"port {port}" in str(info.value)
    free = pick_port(None)
    assert 0 < free < 65536


def test_webgpu_browser_outside_a_notebook_raises_b001_with_the_install_hint() -> None:
    from rlx_core.targets.webgpu_browser.errors import NoBrowserError

    with pytest.raises(NoBrowserError) as info:
        rlx.compile(lambda x: x * 2, [1.0, 2.0], target="webgpu-browser")
    assert info.value.code == "RLX-B001" and "labextension" in info.value.hint


def test_train_mnist_help_is_whole_and_defaults_to_the_fast_target() -> None:
    out = subprocess.run([sys.executable, str(REPO_ROOT / "examples" / "train_mnist.py"),
                          "--help"], capture_output=True, text=True, check=True,
                         env={"PYTHONPATH": str(REPO_ROOT), "PATH": "/usr/bin:/bin"}).stdout
    flat = " ".join(out.split())
    assert "test accuracy." in flat  # the description is a whole sentence
    assert f"(default {default_jit_target()}:" in flat


def test_lite_build_reports_its_stages(capsys) -> None:
    import runpy

    step = runpy.run_path(str(REPO_ROOT / "binder" / "build_lite.py"))["_stages"](4)
    step("the rlx wheel and the Pyodide core")
    step("the Pyodide lock file")
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("lite: [1/4] the rlx wheel") and out[1].startswith("lite: [2/4]")
