"""``rlx.targets()`` and the ``rlx_core.targets`` package share a name: the package is the
callable, so every way of naming a target module finds it (a function bound over the package
made ``import rlx_core.targets.cpu.toolchain as tc`` raise ImportError)."""

from __future__ import annotations

import pkgutil
import subprocess
import sys
from unittest import mock

import rlx_core as rlx
from rlx_core.api import TargetInfo


def test_rlx_targets_is_the_package_and_lists_the_targets() -> None:
    import rlx_core.targets.cpu.toolchain as tc  # the form that raised ImportError

    assert tc.__name__ == "rlx_core.targets.cpu.toolchain"
    assert rlx.targets.__name__ == "rlx_core.targets"
    got = rlx.targets()
    assert got and all(isinstance(t, TargetInfo) for t in got)
    assert {"numpy", "cpu"} <= {t.name for t in got}


def test_dotted_names_through_the_package_resolve() -> None:
    from rlx_core.targets.cpu import peaks

    assert pkgutil.resolve_name("rlx_core.targets.cpu.peaks:QUIET_OTHERS") == peaks.QUIET_OTHERS
    with mock.patch("rlx_core.targets.cpu.peaks.QUIET_OTHERS", 9.0):
        assert peaks.QUIET_OTHERS == 9.0


def test_a_fresh_interpreter_imports_a_target_module_by_its_dotted_name() -> None:
    code = ("import rlx_core.targets.cpu.identity as i; import rlx_core; "
            "print(i.__name__, len(rlx_core.targets()) > 0)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out[:2] == ["rlx_core.targets.cpu.identity", "True"]
