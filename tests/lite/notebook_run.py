"""Run a notebook of the lite site in a Chromium page (Run > Run All Cells) and wait for the
line it prints at the end, watching the page meanwhile: the kernel's status, each code cell's
prompt with the times it started and finished, the console, the requests that failed or are
still waiting. A run that does not finish in time fails with that record, which says what the
kernel was doing (which cell, since when, what it last fetched), not only that nothing came."""

from __future__ import annotations

import json
import os
import re
import time
from dataclasses import dataclass, field
from typing import Any

# one look at the page: the execution indicator's kernel status, every code cell's prompt
# ('[ ]:' never run, '[*]:' queued or running, '[3]:' done) and the first line matching the
# marker. textContent, not innerText: a cell scrolled out of JupyterLab's windowed notebook
# keeps its text but shows none. The line is matched and read in one step: JupyterLab
# re-renders merged stream outputs, so an element found first may be gone a moment later.
_LOOK = """(marker) => {
  const ind = document.querySelector('.jp-Notebook-ExecutionIndicator');
  const prompts = [...document.querySelectorAll('.jp-Notebook .jp-CodeCell')].map(c => {
    const p = c.querySelector('.jp-InputPrompt');
    return p ? p.textContent.trim() : '?';
  });
  const outputs = [...document.querySelectorAll('.jp-OutputArea-output')];
  let line = null;
  for (const e of outputs) {
    const m = e.textContent.match(new RegExp(marker + ' (\\\\{.*\\\\})'));
    if (m) { line = m[1]; break; }
  }
  return {status: ind ? ind.dataset.status || '' : 'none', prompts, outputs: outputs.length,
          line};
}"""

# what the page says about its service worker (JupyterLite's drive and stdin go through it)
_WORKER_STATE = """() => {
  const sw = navigator.serviceWorker;
  return sw && sw.controller ? 'controlled by ' + sw.controller.scriptURL.replace(/^.*\\//, '')
    + ' (' + sw.controller.state + ')' : 'not controlled by a service worker';
}"""


def browser_cpu() -> dict[str, float]:
    """CPU seconds used so far by this process's descendants (the Playwright driver and the
    browser's processes), by kind (Chromium's ``--type=``: renderer, gpu-process, utility;
    the browser itself). Over a stall, a renderer that keeps using CPU is a kernel at work
    (slow); one that uses none is a kernel waiting on something that will not come."""
    children: dict[int, list[int]] = {}
    stats: dict[int, list[str]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        stats[int(name)] = fields
        children.setdefault(int(fields[1]), []).append(int(name))
    tick = os.sysconf("SC_CLK_TCK")
    used: dict[str, float] = {}
    todo = list(children.get(os.getpid(), []))
    while todo:
        pid = todo.pop()
        todo += children.get(pid, [])
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        # (Chromium rewrites its command line as one string: no NULs to split at)
        m = re.search(r"--type=(\S+)", cmd)
        kind = m.group(1) if m else os.path.basename(cmd.split(" ", 1)[0])
        used[kind] = used.get(kind, 0.0) + (int(stats[pid][11]) + int(stats[pid][12])) / tick
    return used


# the console line of the rlx-explorer extension once the notebook's session has its kernel
KERNEL_ATTACHED = "rlx-explorer: comm target rlx.webgpu registered on kernel"
KERNEL_TIMEOUT_S = 300.0  # for the kernel to be attached, then for it to boot
QUEUE_TIMEOUT_S = 60.0  # for Run All to queue a cell ('[*]:'; at once with a kernel)


@dataclass
class CellTimes:
    """One code cell's prompt and when (seconds into the run) it went to '[*]' and to a number."""

    prompt: str = "[ ]:"
    queued: float | None = None
    done: float | None = None


@dataclass
class NotebookWatch:
    """What one page did while its notebook ran (times in seconds since ``start``)."""

    page: Any
    notebook: str
    start: float = field(default_factory=time.monotonic)
    statuses: list[tuple[float, str]] = field(default_factory=list)
    cells: list[CellTimes] = field(default_factory=list)
    console: list[tuple[float, str]] = field(default_factory=list)
    http_errors: list[tuple[float, str]] = field(default_factory=list)
    pending: dict[Any, tuple[float, str]] = field(default_factory=dict)  # by Request
    run_clicked: float | None = None
    outputs: int = 0
    cpu: list[tuple[float, dict[str, float]]] = field(default_factory=list)  # every 10 s

    def __post_init__(self) -> None:
        ctx = self.page.context  # requests of the page, its workers and the service worker
        self.page.on("console", lambda m: self.console.append((self.now(), m.text[:300])))
        ctx.on("request", lambda r: self.pending.__setitem__(r, (self.now(),
                                                                  f"{r.method} {r.url}")))
        ctx.on("requestfinished", self._finished)
        ctx.on("requestfailed", lambda r: self._finished(r, r.failure or "failed"))

    def now(self) -> float:
        return time.monotonic() - self.start

    def _finished(self, req: Any, failure: str | None = None) -> None:
        self.pending.pop(req, None)
        try:
            status = failure or (req.response().status if req.response() else "no response")
        except Exception as err:  # the page may be closing
            status = type(err).__name__
        if failure or (isinstance(status, int) and status >= 400):
            self.http_errors.append((self.now(), f"{status} {req.method} {req.url}"))

    def look(self, marker: str) -> str | None:
        """Record what changed since the last look; the marker's JSON once it is shown."""
        seen = self.page.evaluate(_LOOK, marker)
        t = self.now()
        if not self.statuses or self.statuses[-1][1] != seen["status"]:
            self.statuses.append((t, seen["status"]))
        while len(self.cells) < len(seen["prompts"]):
            self.cells.append(CellTimes())
        for cell, prompt in zip(self.cells, seen["prompts"], strict=False):
            if prompt == cell.prompt:
                continue
            cell.prompt = prompt
            if prompt == "[*]:" and cell.queued is None:
                cell.queued = t
            elif re.fullmatch(r"\[\d+\]:", prompt):
                cell.done = t
        self.outputs = seen["outputs"]
        if not self.cpu or t - self.cpu[-1][0] >= 10:
            self.cpu.append((t, browser_cpu()))
        return seen["line"]  # type: ignore[no-any-return]

    def cpu_lately(self, span: float = 60.0) -> str:
        """CPU seconds each kind of browser process used over the last ``span`` seconds."""
        t, now = self.now(), browser_cpu()
        since, then = next(((at, u) for at, u in reversed(self.cpu) if t - at >= span),
                           self.cpu[0] if self.cpu else (t, now))
        used = {k: v - then.get(k, 0.0) for k, v in now.items()}
        return (f"browser CPU over the last {t - since:.0f} s: "
                + ", ".join(f"{k} {v:.1f} s" for k, v in sorted(used.items(), key=lambda kv: -kv[1])))

    def report(self) -> str:
        """The record, for a failure message."""
        t = self.now()
        lines = [f"{self.notebook} after {t:.0f} s; Run All clicked at "
                 + (f"{self.run_clicked:.0f} s" if self.run_clicked is not None else "no time"),
                 "kernel status: " + ", ".join(f"{s} at {at:.0f} s" for at, s in self.statuses)]
        running = next((i for i, c in enumerate(self.cells) if c.prompt == "[*]:"), None)
        prev = self.run_clicked
        for i, c in enumerate(self.cells):
            since = prev if prev is not None else c.queued
            if c.done is not None:
                what = (f"done at {c.done:.0f} s, took {c.done - since:.1f} s"
                        if since is not None else f"done at {c.done:.0f} s")
                prev = c.done
            elif i == running:
                what = (f"EXECUTING for {t - since:.0f} s" if since is not None else "executing")
            else:
                what = "queued" if c.prompt == "[*]:" else "not run"
            lines.append(f"  code cell {i} {c.prompt} {what}")
        shown = self.page.evaluate("() => [...document.querySelectorAll('.jp-OutputArea-output')]"
                                   ".map(e => e.textContent.slice(0, 400))")
        lines.append(f"outputs shown: {shown}")
        lines.append(self.page.evaluate(_WORKER_STATE)
                     + f"; workers: {[w.url.rsplit('/', 1)[-1] for w in self.page.workers]}")
        lines.append(self.cpu_lately())
        lines.append("requests still waiting: " + ("; ".join(
            f"{what} (for {t - at:.0f} s)" for at, what in self.pending.values()) or "none"))
        lines.append("failed requests: " + ("; ".join(
            f"{what} at {at:.0f} s" for at, what in self.http_errors) or "none"))
        lines.append("console (last 25):")
        lines += [f"  {at:7.1f} {text}" for at, text in self.console[-25:]]
        return "\n".join(lines)


def run_all(page: Any, url: str, notebook: str, marker: str = "RLX-RESULT",
            timeout_s: float = 900.0) -> dict[str, Any]:
    """Open ``notebook`` in the site, Run All Cells, and return the JSON of its ``marker {..}``
    line; an AssertionError with the watch's record when it is not shown within ``timeout_s``."""
    import pytest

    watch = NotebookWatch(page, notebook)
    page.goto(f"{url}/lab/index.html?path={notebook}")
    page.wait_for_function("() => document.body.dataset.rlxExtension === 'active'",
                           timeout=180_000)
    if not page.evaluate("async () => !!(navigator.gpu && await navigator.gpu.requestAdapter())"):
        pytest.skip("this Chromium exposes no WebGPU adapter")
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=120_000)
    # The execution indicator says 'idle' before the notebook's session has a kernel (its
    # default, until the session reports), and a Run All then runs nothing: JupyterLab clears
    # each code cell that has no kernel to go to, and the kernel, attached a moment later,
    # boots and waits for ever (the flake: 02 printed nothing for 15 minutes under load; a
    # click while the session is still 'initializing' does the same). So first the kernel:
    # the rlx-explorer extension logs when it registers its comm target on the session's new
    # kernel (extension/src/comm.ts, registerKernel); then its status, idle once booted.
    deadline = time.monotonic() + KERNEL_TIMEOUT_S
    while not any(KERNEL_ATTACHED in text for _, text in watch.console):
        if time.monotonic() > deadline:
            raise AssertionError(f"no kernel attached to the notebook within "
                                 f"{KERNEL_TIMEOUT_S:.0f} s:\n{watch.report()}")
        page.wait_for_timeout(250)
    page.wait_for_selector(".jp-Notebook-ExecutionIndicator[data-status='idle']",
                           timeout=KERNEL_TIMEOUT_S * 1000)
    page.click(".lm-MenuBar-item:has-text('Run')", timeout=30_000)
    page.click(".lm-Menu-item[data-command='runmenu:run-all']", timeout=30_000)
    watch.run_clicked = watch.now()
    # Pyodide installs and imports rlx in the page: minutes on a loaded 2-core machine
    deadline = time.monotonic() + timeout_s
    while True:
        line = watch.look(marker)
        if line is not None:
            return json.loads(line)  # type: ignore[no-any-return]
        if watch.now() - watch.run_clicked > QUEUE_TIMEOUT_S and not any(
                c.queued is not None or c.done is not None for c in watch.cells):
            raise AssertionError(f"Run All queued no cell in {QUEUE_TIMEOUT_S:.0f} s:\n"
                                 f"{watch.report()}")
        if time.monotonic() > deadline:
            raise AssertionError(f"no {marker} line within {timeout_s:.0f} s:\n{watch.report()}")
        page.wait_for_timeout(1000)
