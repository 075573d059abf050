"""The kernel end of the rlx.webgpu comm: send a request, wait for the browser's reply.

The wait happens inside a running cell, so the kernel's main shell is busy and cannot read the
reply. JupyterLab (services >= 7.4) sends comm messages over a kernel *subshell* (JEP 91,
ipykernel >= 7), which runs in its own thread: our comm callback runs there and wakes the
waiting cell. ipykernel 7.4 would route a reply to the subshell that sent the request (the busy
main shell); ``_HeaderRoutedComm`` restores routing by the reply's own header.
"""

from __future__ import annotations

import itertools
import os
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from rlx_core.targets.webgpu.target import AdapterInfo
from rlx_core.targets.webgpu_browser import protocol
from rlx_core.targets.webgpu_browser.errors import KernelCannotWaitError, NoBrowserError

HELLO_TIMEOUT_S = float(os.environ.get("RLX_BROWSER_HELLO_TIMEOUT", "5"))
RUN_TIMEOUT_S = float(os.environ.get("RLX_BROWSER_RUN_TIMEOUT", "120"))
# after a failed connect, calls within this window fail fast instead of waiting again
RETRY_AFTER_S = 30.0


def _kernel() -> Any:
    """The running ipykernel, or raise NoBrowserError (plain Python, a terminal IPython)."""
    try:
        from IPython import get_ipython
    except ImportError:
        raise NoBrowserError("webgpu-browser needs a Jupyter kernel; IPython is not installed") \
            from None
    shell = get_ipython()
    kernel = getattr(shell, "kernel", None)
    if kernel is None:
        raise NoBrowserError("webgpu-browser runs from a notebook: no Jupyter kernel here, so "
                             "no browser tab can be attached")
    return kernel


def _comm_class() -> Any:
    from ipykernel.comm import Comm

    class _HeaderRoutedComm(Comm):  # type: ignore[misc]
        def _reply_subshell_for(self, data: Any, default: Any) -> Any:
            return default  # the subshell the frontend sent the reply on

    return _HeaderRoutedComm


@dataclass
class _Pending:
    done: threading.Event = field(default_factory=threading.Event)
    data: dict[str, Any] | None = None
    buffers: list[bytes] = field(default_factory=list)


class BrowserBridge:
    """One comm to one browser tab, with the adapter it opened."""

    _shared: ClassVar[BrowserBridge | None] = None
    _failed_at: ClassVar[float] = 0.0
    _failure: ClassVar[Exception | None] = None
    generation: ClassVar[int] = 0  # bumps on every new connection (programs reload then)

    def __init__(self, comm: Any):
        self.comm = comm
        self.info: AdapterInfo | None = None
        self._ids = itertools.count(1)
        self._pending: dict[str, _Pending] = {}
        self._lock = threading.Lock()
        comm.on_msg(self._on_msg)

    # -- connecting ----------------------------------------------------------------------------

    @classmethod
    def current(cls, timeout: float | None = None) -> BrowserBridge:
        """The connected bridge, connecting on first use; raises NoBrowserError/B002/B004."""
        if cls._shared is not None:
            return cls._shared
        if cls._failure is not None and time.monotonic() - cls._failed_at < RETRY_AFTER_S:
            raise cls._failure
        try:
            cls._shared = cls._connect(HELLO_TIMEOUT_S if timeout is None else timeout)
        except Exception as err:
            cls._failure, cls._failed_at = err, time.monotonic()
            raise
        cls._failure = None
        cls.generation += 1
        return cls._shared

    @classmethod
    def _connect(cls, timeout: float) -> BrowserBridge:
        kernel = _kernel()
        if getattr(kernel, "shell_channel_thread", None) is None:
            raise KernelCannotWaitError(
                "this kernel has no subshells, so a cell cannot receive the browser's reply "
                "while it runs")
        comm = _comm_class()(target_name=protocol.COMM_TARGET,
                             data={"rlx": protocol.VERSION, "op": "open"})
        bridge = cls(comm)
        try:
            reply, _ = bridge.call("hello", timeout=timeout)
        except NoBrowserError:
            comm.close()
            raise NoBrowserError(
                f"no browser answered on the {protocol.COMM_TARGET} comm within {timeout:g} s "
                "(JupyterLab >= 4.4 with the rlx-explorer extension, comms over subshells "
                "not disabled)") from None
        bridge.info = protocol.adapter_info(reply)
        return bridge

    @classmethod
    def reset(cls) -> None:
        """Forget the connection (a reloaded tab); the next call connects again."""
        if cls._shared is not None:
            try:
                cls._shared.comm.close()
            except Exception:  # the comm may already be gone with its kernel
                pass
        cls._shared, cls._failure = None, None

    # -- requests ------------------------------------------------------------------------------

    def _on_msg(self, msg: dict[str, Any]) -> None:
        data = msg.get("content", {}).get("data", {})
        rid = data.get("id") if isinstance(data, dict) else None
        with self._lock:
            slot = self._pending.get(rid) if isinstance(rid, str) else None
        if slot is not None:
            slot.data = data
            slot.buffers = [bytes(b) for b in msg.get("buffers") or ()]
            slot.done.set()

    def send(self, op: str, buffers: Sequence[bytes] = (), **fields: Any) -> None:
        """A message that has no reply (``free``)."""
        self.comm.send(protocol.request(op, None, **fields), buffers=list(buffers))

    def call(self, op: str, buffers: Sequence[bytes] = (), timeout: float = RUN_TIMEOUT_S,
             **fields: Any) -> tuple[dict[str, Any], list[bytes]]:
        """Send one request and wait for its reply; raises typed errors from protocol.py."""
        rid = f"r{next(self._ids)}"
        slot = _Pending()
        with self._lock:
            self._pending[rid] = slot
        try:
            self.comm.send(protocol.request(op, rid, **fields), buffers=list(buffers))
            if not slot.done.wait(timeout):
                if BrowserBridge._shared is self:
                    BrowserBridge.reset()
                raise NoBrowserError(f"the browser did not answer {op!r} within {timeout:g} s "
                                     "(tab closed or reloaded?)")
        finally:
            with self._lock:
                self._pending.pop(rid, None)
        assert slot.data is not None  # set together with the event
        return protocol.check_reply(slot.data, op), slot.buffers
