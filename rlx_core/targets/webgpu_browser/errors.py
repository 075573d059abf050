"""Typed errors of the webgpu-browser target (codes RLX-B001 ... RLX-B004)."""

from __future__ import annotations

from rlx_core.errors import RlxError, TargetUnavailableError

_INSTALL = ("open the notebook in JupyterLab (or JupyterLite) with the rlx-explorer extension "
            "installed: `pip install rlx-explorer`, then check `jupyter labextension list`")


class NoBrowserError(TargetUnavailableError):
    """No browser tab answered on the rlx.webgpu comm (no kernel, no frontend, no extension)."""

    code = "RLX-B001"

    def __init__(self, message: str, *, hint: str | None = None):
        super().__init__(message, hint=hint or _INSTALL)


class BrowserNoGpuError(TargetUnavailableError):
    """A browser is attached but has no usable WebGPU (no navigator.gpu, or no adapter)."""

    code = "RLX-B002"

    def __init__(self, message: str, *, hint: str | None = None):
        super().__init__(message, hint=hint or (
            "use a browser with WebGPU enabled (Chrome/Edge 113+, Firefox 141+, Safari 26+; "
            "on Linux Chromium: --enable-unsafe-webgpu), or compile for target 'webgpu' / 'cpu'"))


class BrowserRunError(RlxError):
    """The browser rejected a shader or failed a run; the message is the browser's own."""

    code = "RLX-B003"


class KernelCannotWaitError(TargetUnavailableError):
    """The kernel cannot receive the browser's reply while a cell runs (no kernel subshells)."""

    code = "RLX-B004"

    def __init__(self, message: str, *, hint: str | None = None):
        super().__init__(message, hint=hint or (
            "use ipykernel >= 7 (kernel subshells: replies arrive while the cell waits)"))
