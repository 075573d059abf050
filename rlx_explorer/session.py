"""Explorer sessions: compile a function for some targets and assemble every view model into
one JSON bundle — the single input of the viewer in every host (widget, Panel, HTML export).

A target that fails legalization contributes a failure view instead of an executable; a target
that has a capability table but cannot build here (no toolchain, not registered yet) is still
probed statically for the dispatch matrix and failures, and says so.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import rlx_core as rlx
from rlx_core.errors import RlxError
from rlx_core.ir.graph import Graph
from rlx_core.ir.printer import print_graph
from rlx_core.runtime.executable import Executable
from rlx_explorer.views.dispatch import dispatch_matrix, policy_views
from rlx_explorer.views.dot import initial_state, render_svg, to_dot
from rlx_explorer.views.failures import failure_view
from rlx_explorer.views.graphs import graph_view
from rlx_explorer.views.ir_text import ir_text_view
from rlx_explorer.views.kernels import kernels_view
from rlx_explorer.views.links import link_index
from rlx_explorer.views.memory import memory_view
from rlx_explorer.views.passes import passes_view
from rlx_explorer.views.profile import cache_view, profile_view
from rlx_explorer.views.sources import SourceIndex

BUNDLE_SCHEMA = 1
# the devices view lowers the model for all fifteen targets: on by default only below this size
# (MiniLM's HIR is several hundred nodes: explore(..., devices=True) or %%rlx --devices asks)
DEVICES_AUTO_NODES = 120

VIEWS: tuple[str, ...] = ("graph", "text", "passes", "dispatch", "devices", "failures", "kernels",
                          "memory", "profile", "cache", "numerics")
POLICIES: tuple[str, ...] = ("prefer-native", "force-common", "force-native")


@dataclass
class TargetOutcome:
    """What happened for one target: an executable, or the error that stopped it."""

    target: str
    executable: Executable | None = None
    error: RlxError | None = None
    note: str = ""


@dataclass
class Session:
    """The inputs of one explorer: a function (or graph), example args, targets, policy."""

    fn: Callable[..., Any] | Graph
    args: tuple[Any, ...]
    targets: tuple[str, ...] = ("numpy",)
    policy: str | None = None
    run: bool = True
    title: str = ""
    extra_sources: dict[str, str] = field(default_factory=dict)
    outcomes: list[TargetOutcome] = field(default_factory=list)
    progress: Callable[[str], None] | None = None  # rlx_explorer/progress.py
    numerics: bool = False  # the numerics lens (views/numerics.py): every node on every target
    reference: Graph | None = None  # the lens's oracle graph for a rewritten (quantized) one
    # every registered target side by side (views/devices.py); None: only for graphs of up to
    # DEVICES_AUTO_NODES HIR nodes (it lowers the model once per registered target)
    devices: bool | None = None
    calibrate: bool = False  # measure the CPU peaks for the cost overlay when not known yet

    def report(self, stage: str) -> None:
        if self.progress is not None:
            self.progress(stage)

    def compile(self) -> None:
        """Compile for every target, keeping failures as data."""
        self.outcomes = []
        fn = getattr(self.fn, "fn", self.fn)  # a JitFunction compiles its wrapped function
        for i, t in enumerate(self.targets):
            self.report(f"compiling for {t} ({i + 1}/{len(self.targets)})")
            try:
                exe = rlx.compile(fn, *self.args, target=t, policy=self.policy)
                self.outcomes.append(TargetOutcome(t, exe))
            except rlx.LegalizationError as err:
                self.outcomes.append(TargetOutcome(t, error=err))
            except RlxError as err:  # unavailable / unknown target: static probe only
                self.outcomes.append(TargetOutcome(t, error=err, note=err.message))

    @property
    def primary(self) -> Executable | None:
        return next((o.executable for o in self.outcomes if o.executable is not None), None)

    def hir(self) -> Graph:
        exe = self.primary
        if exe is not None:
            return exe.hir
        if isinstance(self.fn, Graph):
            return self.fn
        return rlx.trace(getattr(self.fn, "fn", self.fn), *self.args)

    def bundle(self, view: str = "graph") -> dict[str, Any]:
        if not self.outcomes:
            self.compile()
        self.report("building the views (dispatch probes, layouts, profile)")
        return build_bundle(self, view)


def _has_caps(name: str) -> bool:
    """A capability table exists for ``name`` (a static one, or its target object's)."""
    from rlx_core.dispatch.registry import caps_names
    from rlx_core.targets.registry import TARGETS, get_target

    if name in caps_names():
        return True
    if name not in TARGETS:
        return False
    try:
        return get_target(name).caps is not None
    except (RlxError, ImportError, OSError):
        return False


def _probe(hir: Graph, targets: Sequence[str], policy: str | None) -> dict[str, dict[str, Any]]:
    """Static dispatch of the HIR graph on every registered target (and any other name that
    has a capability table): the session's targets first, then the registry's order."""
    from rlx_core.dispatch.registry import caps_names
    from rlx_core.targets.registry import target_names

    names = list(dict.fromkeys([*targets, *target_names(), *caps_names()]))
    known = [t for t in names if _has_caps(t)]
    report = rlx.explain(hir, targets=known, policy=policy)
    data = report.to_json()["targets"]
    return {t: {"decisions": d["decisions"], "failures": d["failures"],
                "verification": d["verification"], "compile_ready": d["compile_ready"],
                "policy": d["policy"]} for t, d in data.items()}


def _levels(exe: Executable) -> dict[str, dict[str, Any]]:
    return {"hir": graph_view(exe.hir), "mir": graph_view(exe.mir), "lir": graph_view(exe.lir)}


def _svgs(levels: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Server-side layouts of each level's initial state (empty without ``dot``)."""
    out: dict[str, Any] = {}
    for level, view in levels.items():
        state = initial_state(view)
        svg = render_svg(to_dot(view, state["collapsed"], state["params"]))
        if svg is not None:
            out[level] = {"state": state, "svg": svg}
    return out


def _embedded(exe: Executable | None, s: Session) -> dict[str, Any]:
    """The embedded view (device memory, instructions / cycles); a failed run leaves it out."""
    from rlx_explorer.views.embedded import embedded_view

    try:
        return embedded_view(exe, s.args if s.run else None) if exe is not None else {}
    except RlxError as err:
        return {"target": exe.target if exe else "", "error": err.message}


def _numerics(s: Session, levels: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The numerics lens over the HIR on every compiled target (views/numerics.py)."""
    if not s.numerics or s.primary is None:
        return {"present": False}
    from rlx_explorer.views.numerics import numerics_view

    s.report("numerics lens: every node on every target against the f64 oracle")
    done = [o.target for o in s.outcomes if o.executable is not None]
    return numerics_view(s.primary.hir, s.args, done, levels["hir"], reference=s.reference)


def _roofline(s: Session, exe: Executable | None, lir_view: dict[str, Any] | None,
              profile: dict[str, Any]) -> dict[str, Any]:
    """The cost overlay of the primary target's kernels (views/roofline.py)."""
    from rlx_core.targets.cpu.peaks import machine_peaks, measure_peaks
    from rlx_explorer.views.roofline import HOST_CPU_TARGETS, roofline_view

    if exe is None:
        return roofline_view(None, None, "", {}, None)
    peaks = None
    if exe.target in HOST_CPU_TARGETS:
        peaks = machine_peaks()
        if peaks is None and s.calibrate:
            s.report("measuring this CPU's FMA and bandwidth peaks (once per machine)")
            try:
                peaks = measure_peaks()
            except RlxError:  # no C compiler: the overlay stays uncalibrated
                peaks = None
    measured = {k["name"]: float(k["seconds"]) for k in profile.get("kernels", [])}
    return roofline_view(exe.lir, lir_view, exe.target, measured, peaks)


def _devices(s: Session, exe: Executable | None, hir_view: dict[str, Any], sources: SourceIndex,
             probe: dict[str, dict[str, Any]], profile: dict[str, Any]) -> dict[str, Any]:
    """The every-device view: a column per probed target and the side-by-side kernels."""
    from rlx_explorer.device_sources import emit_all
    from rlx_explorer.views.devices import devices_view, side_by_side, target_column

    avail = {t.name: (t.available, t.reason) for t in rlx.targets()}
    compiled = {o.target: o.executable for o in s.outcomes if o.executable is not None}
    fn = s.fn if isinstance(s.fn, Graph) else getattr(s.fn, "fn", s.fn)
    emitted = emit_all(fn, s.args, list(probe), s.policy, compiled, s.report)
    columns = [target_column(t, probe[t], hir_view, sources, avail.get(t, (False, "")),
                             emitted[t]["problems"]) for t in probe]
    kernels = side_by_side(exe.lir, emitted) if exe is not None and exe.lir is not None \
        else {"kernels": [], "targets": list(emitted)}
    return devices_view(columns, kernels)


def build_bundle(s: Session, view: str = "graph", layout: bool = True) -> dict[str, Any]:
    """Every view model of a session, as one JSON-able dict (see docs/explorer.md)."""
    sources = SourceIndex(s.extra_sources)
    exe = s.primary
    hir = s.hir()
    levels = _levels(exe) if exe is not None else {"hir": graph_view(hir)}
    texts = {lv: ir_text_view(print_graph(g), levels[lv]) for lv, g in
             ((("hir", exe.hir), ("mir", exe.mir), ("lir", exe.lir)) if exe is not None
              else (("hir", hir),))}
    policy = exe.trace.policy if exe is not None else (s.policy or "prefer-native")
    matrices = {}
    failures_by_policy: dict[str, dict[str, Any]] = {}
    for p in dict.fromkeys([policy, *POLICIES]):
        probe = _probe(hir, s.targets, p)
        matrices[p] = dispatch_matrix(probe, levels["hir"], p)
        failures_by_policy[p] = probe
    failures = []
    for o in s.outcomes:
        err = o.error
        if isinstance(err, rlx.LegalizationError):
            failures.append(failure_view(o.target, err.policy, err.to_json()["failures"],
                                         levels["hir"], sources, err.message, compiled=True))
        elif err is not None:
            probed = failures_by_policy[policy].get(o.target)
            if probed and probed["failures"]:
                failures.append(failure_view(o.target, policy, probed["failures"],
                                             levels["hir"], sources, o.note, compiled=False))
    kernels = {}
    for o in s.outcomes:
        if o.executable is not None and exe is not None and o.executable.lir is not None:
            lv = levels["lir"] if o.executable is exe else graph_view(o.executable.lir)
            kernels[o.target] = kernels_view(o.target, o.executable.lir, lv, o.executable.sources)
    profile: dict[str, Any] = {}
    if exe is not None and s.run:
        from rlx_explorer.profiling import profile_executable

        try:
            profile = profile_executable(exe, s.args)
        except RlxError as err:
            profile = {"target": exe.target, "method": f"not run: {err.message}", "kernels": []}
    for lv in levels.values():  # touch every referenced source line so the pane has the file
        for n in lv["nodes"]:
            sources.line(n["loc"]["file"], n["loc"]["line"])
    roofline = _roofline(s, exe, levels.get("lir"), profile)
    want_devices = s.devices if s.devices is not None else len(hir.nodes) <= DEVICES_AUTO_NODES
    devices = _devices(s, exe, levels["hir"], sources, failures_by_policy[policy], profile) \
        if want_devices else {}
    jit = s.fn if isinstance(s.fn, rlx.JitFunction) else None
    source = exe.trace.source if exe is not None else {}
    return {
        "schema": BUNDLE_SCHEMA,
        "title": s.title or hir.name,
        "view": view if view in VIEWS else "graph",
        "targets": [{"name": o.target, "compiled": o.executable is not None,
                     "note": o.note or (o.error.message.splitlines()[0] if o.error else "")}
                    for o in s.outcomes],
        "primary": exe.target if exe is not None else "",
        "levels": levels,
        "texts": texts,
        "svg": _svgs(levels) if layout else {},
        "passes": passes_view(exe.trace) if exe is not None else {"steps": [], "rule_count": 0},
        "dispatch": policy_views(matrices, policy),
        "devices": devices,
        "failures": failures,
        "kernels": kernels,
        "memory": memory_view(exe.trace.plan if exe is not None else {}, levels.get("lir")),
        "embedded": _embedded(exe, s),  # cortex-m / fpga only (views/embedded.py)
        "numerics": _numerics(s, levels),  # views/numerics.py, with explore(numerics=True)
        "profile": profile_view(profile, levels.get("lir")),
        "roofline": roofline,
        "cache": cache_view(jit, exe.trace.cache if exe is not None else {}),
        "links": link_index(levels, kernels),
        "source": {"function": source, **sources.to_json()},
    }
