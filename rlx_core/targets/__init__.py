"""Every target rlx compiles for, one subpackage each (``cpu``, ``webgpu``, ...); called, as
``rlx.targets()``, the list of them: whether each runs here (and why not) and how it is verified.

The package itself is the callable: the public function's name is this package's, and a plain
function bound to ``rlx_core.targets`` hid the package from ``import
rlx_core.targets.cpu.toolchain as tc`` (ImportError: cannot import name 'cpu' from 'targets')
and from dotted-name lookups (``unittest.mock.patch``, ``pkgutil.resolve_name``)."""

from __future__ import annotations

import sys
import types
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rlx_core.api import TargetInfo


class _CallablePackage(types.ModuleType):
    """This package, callable as ``rlx.targets()`` (rlx_core.api.targets)."""

    def __call__(self) -> list[TargetInfo]:
        from rlx_core.api import targets

        return targets()


sys.modules[__name__].__class__ = _CallablePackage
