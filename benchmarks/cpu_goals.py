"""Issue 22's CPU goals on one machine: met or NOT MET, read from the committed results files.

Each goal reads the newest results file of its benchmark that was measured on this machine's
CPU (``--cpu SLUG`` for another's, e.g. ``intel-xeon-emerald-rapids``), at the goal's thread
count, and says what it measured, the goal, met / NOT MET / not measured, the file and the
command recorded in it. The verdicts are computed here from the JSON numbers against the
thresholds below (defined once); nothing is copied from a results table.

    python benchmarks/cpu_goals.py                       # this machine's table
    python benchmarks/cpu_goals.py --cpu amd-epyc-zen-1  # another machine's files
    python benchmarks/cpu_goals.py --write               # + results/goals-<slug>.{md,json}
    python benchmarks/cpu_goals.py --run                 # peak.py, every goal bench, the table
    python benchmarks/cpu_goals.py --run --only gemm2,decode2 --dry-run   # list the commands

Which file: among ``results/<bench>-<slug>*.json`` whose recorded CPU is this slug's and whose
thread count is the goal's, the one that covers most of the goal's parts (shapes, batches,
conditions), the newest of those by the time recorded in it. ``-host-slow-*`` files (runs on
a host measured slower than its stored peaks) are left out unless ``--include-host-slow``;
files of a path ``RLX_CPU_ISA`` forced below the CPU's own (``-isa-<family>``, recorded as
``machine.rlx_path_forced``) are always left out: they stand in for another machine.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from enum import Enum
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.bench_contention import CONDITIONS  # noqa: E402
from benchmarks.common import (  # noqa: E402
    RESULTS,
    cpu_slug,
    markdown_table,
    rlx_path,
    say,
)
from benchmarks.goal_runs import (  # noqa: E402
    STEPS,
    Runner,
    run_steps,
    select_steps,
    subprocess_runner,
)

# --- issue 22's goals (`issues show 22`, the table and "What to build"), defined once --------
GEMM_VS_MLAS = 1.0  # bench_gemm: rlx / MLAS >= this on every shape, prepacked W and per call
MINILM_VS_PEER = 1.2  # bench_minilm: rlx over the fastest peer >= this at every batch
MINILM_BATCHES = (1, 8, 32)  # at sequence length 128 (bench_minilm --batches 1,8,32)
MINILM_SMALL = (2, 8)  # batch x seq of the short sentence
MINILM_SMALL_OVER_FLOOR = 1.5  # its time over its floor <= this
MLP_PEAK_CONFIG = "784-128-10/128"
MLP_PEAK_FRACTION = 0.80  # rlx's share of the stored FMA peak >= this
MLP_AHEAD_CONFIG = "784-512-512-10/1024"  # ahead of every peer: rlx / peer > 1
DISPATCH_VS_NP_ADD = 1.2  # rlx hit time / np.add(x, y) time <= this
DISPATCH_VS_TORCH_COMPILE = 20.0  # torch.compile time / rlx hit time >= this
DECODE_SMALL = {"torch": 1.5, "torch.compile": 1.7}  # rlx speedup >= this, the small model
DECODE_GPT2_PEERS = ("torch", "torch.compile")  # GPT-2 small: ahead of both (speedup > 1)
CONTENTION_VS_ONE_THREAD = 1.1  # the team's time / rlx on one thread, same load, <= this
# every condition bench_contention runs, each with all its workloads
CONTENTION_CONDITIONS = tuple(CONDITIONS)
AHEAD = 1.0  # "ahead of": a speedup above this

# under the table: how to read its placement column (benchmarks/README.md)
PLACEMENT_NOTE = ("\n*placement*: where the run's first two CPUs sat, from a core-to-core "
                  "round trip at its start (and end, where the host moved them: `a -> b`): "
                  "`shared L3` or `split L3` (the 2-vCPU Zen 4 VM switches between the two "
                  "minutes apart; two L3s read ~1.8x the two-thread bandwidth and ~15% slower "
                  "MiniLM b1 s8), `not recorded` in a file written before it was kept. A "
                  "figure is comparable with another only at the same placement.\n")
HOST_SLOW_TAG = "host-slow"  # results files of runs on such a host (benchmarks/README.md)

NOT_IN_FILE = "not in this file"
NOT_IN_FORMAT = "not in this file's format"


class Status(Enum):
    MET = "met"
    NOT_MET = "NOT MET"
    NOT_MEASURED = "not measured"


@dataclass(frozen=True)
class Part:
    """One checked figure of a goal (a shape, a batch, a condition): its value as text and
    whether it meets the goal (None: not measured, ``why`` says so). ``slack`` is the value
    over the threshold, oriented so that above 1 is better (the worst part has the least)."""

    label: str
    text: str
    ok: bool | None
    slack: float = 1.0
    why: str = ""


@dataclass(frozen=True)
class Row:
    """One line of the goal table."""

    goal: str
    measured: str
    target: str
    status: Status
    file: str  # the results file's name ("" where none)
    command: str
    when: str
    placement: str = "-"  # where the CPUs sat in that run (ResultsFile.placement)


@dataclass(frozen=True)
class ResultsFile:
    path: Path
    data: dict[str, Any]

    @property
    def when(self) -> str:
        m = self.data.get("machine")
        return str(m.get("when", "")) if isinstance(m, dict) else ""

    @property
    def cpu(self) -> str:
        m = self.data.get("machine")
        return str(m.get("cpu", "")) if isinstance(m, dict) else ""

    @property
    def forced_path(self) -> bool:
        """Did RLX_CPU_ISA force the run below the CPU's own path (common.rlx_path)?"""
        m = self.data.get("machine")
        return bool(m.get("rlx_path_forced")) if isinstance(m, dict) else False

    @property
    def threads(self) -> int | None:
        """The thread count every peer got: an int (bench_gemm), ``{"threads": "2"}`` (the
        others' limit_threads record), or, where the file has none, a ``-<n>thread`` name."""
        t = self.data.get("threads")
        if isinstance(t, dict):
            t = t.get("threads")
        if isinstance(t, int):
            return t
        if isinstance(t, str) and t.isdigit():
            return int(t)
        m = re.search(r"-(\d+)thread", self.path.stem)
        return int(m.group(1)) if m else None

    @property
    def cores(self) -> int | None:
        m = self.data.get("machine")
        c = m.get("cores") if isinstance(m, dict) else None
        return c if isinstance(c, int) else None

    @property
    def placement(self) -> str:
        """Where the run's first two CPUs sat (common.machine's ``placement`` and
        end_of_run's ``placement_end``): ``shared L3 (58 ns)``, ``shared L3 (58 ns) -> split
        L3 (310 ns)`` where the host moved them mid-run, ``not recorded`` in an older file."""
        m = self.data.get("machine")
        start = m.get("placement") if isinstance(m, dict) else None
        if not isinstance(start, dict):
            return "not recorded"
        end = m.get("placement_end")
        text = _placement_short(start)
        if isinstance(end, dict) and end.get("kind") != start.get("kind"):
            text += f" -> {_placement_short(end)}"
        return text

    def command(self) -> str:
        """The command the run recorded: the JSON's ``command``, else the first backquoted
        ``python benchmarks/...`` in the .md written beside it."""
        if isinstance(self.data.get("command"), str):
            return self.data["command"]
        md = self.path.with_suffix(".md")
        if md.exists():
            m = re.search(r"`((?:\S*/)?python3? benchmarks/[^`]+)`", md.read_text())
            if m:
                return m.group(1)
        return "(no command recorded)"


def _placement_short(p: dict[str, Any]) -> str:
    """A recorded placement's kind with its round trip: ``split L3 (310 ns)``."""
    ns = p.get("round_trip_ns")
    kind = str(p.get("kind", "unknown"))
    return f"{kind} ({ns:.0f} ns)" if isinstance(ns, (int, float)) and ns > 0 else kind


def rows_of(data: dict[str, Any]) -> list[Any]:
    r = data.get("results")
    return r if isinstance(r, list) else []


def _at_least(label: str, value: Any, want: float, text: str = "") -> Part:
    if not isinstance(value, (int, float)):
        return Part(label, "-", None, why=NOT_IN_FORMAT)
    return Part(label, text or f"{value:.2f}x", value >= want, value / want)


def _at_most(label: str, value: Any, want: float, text: str = "") -> Part:
    if not isinstance(value, (int, float)) or value <= 0:
        return Part(label, "-", None, why=NOT_IN_FORMAT)
    return Part(label, text or f"{value:.2f}x", value <= want, want / value)


def _above(label: str, value: Any, want: float) -> Part:
    if not isinstance(value, (int, float)):
        return Part(label, "-", None, why=NOT_IN_FORMAT)
    return Part(label, f"{value:.2f}x", value > want, value / want)


def _missing(label: str, why: str = NOT_IN_FILE) -> Part:
    return Part(label, "-", None, why=why)


# --- each goal's parts, from one results file's JSON ------------------------------------------

def gemm_parts(data: dict[str, Any]) -> list[Part]:
    """Every shape bench_gemm ran (the MiniLM / MLP GEMMs and the GPT-2 decoding GEMVs: the
    goal says every shape), both of the goal's comparisons: rlx with W prepacked over MLAS
    with its prepacked initializer, and rlx's per-call form over MLAS packing W per call
    (bench_gemm's PAIR_HEADERS)."""
    parts = []
    for r in rows_of(data):
        gf = r.get("gflops") if isinstance(r, dict) else None
        shape = (f"{r.get('group', '')} " + "x".join(str(s) for s in r.get("shape", ()))
                 ).strip() if isinstance(r, dict) else "?"
        if not isinstance(gf, dict):
            parts.append(_missing(shape, NOT_IN_FORMAT))
            continue
        per_call = next((p for p in gf if p.startswith("rlx (") and "prepacked" not in p), "")
        for label, rlx, mlas in ((f"{shape} prepacked", "rlx (W prepacked)",
                                  "onnxruntime (MLAS)"),
                                 (f"{shape} per call", per_call,
                                  "onnxruntime (MLAS, W per call)")):
            if rlx in gf and mlas in gf and gf[mlas]:
                parts.append(_at_least(label, gf[rlx] / gf[mlas], GEMM_VS_MLAS))
            else:
                parts.append(_missing(label, NOT_IN_FORMAT))
    return parts or [_missing("every shape")]


def _minilm_row(data: dict[str, Any], batch: int, seq: int) -> dict[str, Any] | None:
    return next((r for r in rows_of(data) if isinstance(r, dict) and r.get("batch") == batch
                 and r.get("seq", 128) == seq), None)


def minilm_parts(data: dict[str, Any]) -> list[Part]:
    parts = []
    for b in MINILM_BATCHES:
        r = _minilm_row(data, b, 128)
        if r is None:
            parts.append(_missing(f"b{b}"))
            continue
        v = r.get("speedup_vs_fastest_peer")
        peer = r.get("fastest_peer")
        text = f"{v:.2f}x" + (f" ({peer})" if peer else "") if isinstance(v, (int, float)) \
            else ""
        parts.append(_at_least(f"b{b}", v, MINILM_VS_PEER, text))
    return parts


def minilm_small_parts(data: dict[str, Any]) -> list[Part]:
    b, s = MINILM_SMALL
    r = _minilm_row(data, b, s)
    if r is None:
        return [_missing(f"b{b} s{s}")]
    if r.get("floor_status") == "uncalibrated":
        return [_missing(f"b{b} s{s}", "floor uncalibrated (peak measured low)")]
    return [_at_most(f"b{b} s{s}", r.get("rlx_over_floor"), MINILM_SMALL_OVER_FLOOR)]


def _mlp_row(data: dict[str, Any], label: str) -> dict[str, Any] | None:
    return next((r for r in rows_of(data) if isinstance(r, dict) and r.get("label") == label),
                None)


def mlp_peak_parts(data: dict[str, Any]) -> list[Part]:
    r = _mlp_row(data, MLP_PEAK_CONFIG)
    if r is None:
        return [_missing(MLP_PEAK_CONFIG)]
    v = r.get("rlx_fraction_of_peak")
    run = r.get("rlx_fraction_of_run_peak")
    text = (f"{v:.0%} of the stored peak" + (f" ({run:.0%} of this run's)" if run else "")
            if isinstance(v, (int, float)) else "")
    return [_at_least(MLP_PEAK_CONFIG, v, MLP_PEAK_FRACTION, text)]


def mlp_ahead_parts(data: dict[str, Any]) -> list[Part]:
    r = _mlp_row(data, MLP_AHEAD_CONFIG)
    if r is None:
        return [_missing(MLP_AHEAD_CONFIG)]
    ratios = r.get("rlx_ratio")
    if not isinstance(ratios, dict) or not ratios:
        return [_missing(MLP_AHEAD_CONFIG, NOT_IN_FORMAT)]
    return [_above(f"vs {peer}", v, AHEAD) for peer, v in ratios.items()]


def dispatch_parts(data: dict[str, Any]) -> list[Part]:
    """rlx's hit over ``np.add(x, y)`` (the ufunc, the goal's baseline) and torch.compile's
    time over rlx's, from the per-peer median ns."""
    res = data.get("results")
    if not isinstance(res, dict):
        return [_missing("np.add", NOT_IN_FORMAT), _missing("torch.compile", NOT_IN_FORMAT)]

    def ns(prefix: str) -> float | None:
        key = next((k for k in res if k.startswith(prefix)), None)
        v = res[key].get("median_ns") if key and isinstance(res[key], dict) else None
        return v if isinstance(v, (int, float)) and v > 0 else None

    rlx, np_add, tc = ns("rlx"), ns("numpy ufunc"), ns("torch.compile")
    return [_at_most("rlx / np.add", rlx / np_add if rlx and np_add else None,
                     DISPATCH_VS_NP_ADD),
            _at_least("torch.compile / rlx", tc / rlx if rlx and tc else None,
                      DISPATCH_VS_TORCH_COMPILE, f"{tc / rlx:.0f}x" if rlx and tc else "")]


def decode_parts(data: dict[str, Any]) -> list[Part]:
    sizes = {r.get("size"): r for r in rows_of(data) if isinstance(r, dict)}
    parts = []
    for size, goals in (("small", DECODE_SMALL),
                        ("gpt2", dict.fromkeys(DECODE_GPT2_PEERS, AHEAD))):
        r = sizes.get(size)
        for peer, want in goals.items():
            label = f"{size} vs {peer}"
            if r is None:
                parts.append(_missing(label))
                continue
            speedup = r.get("rlx_speedup")
            v = speedup.get(peer) if isinstance(speedup, dict) else None
            parts.append(_at_least(label, v, want) if size == "small" else
                         _above(label, v, want))
    return parts


def _contention_rows(data: dict[str, Any]) -> tuple[list[dict[str, Any]], list[str]]:
    rows = [r for r in rows_of(data) if isinstance(r, dict)]
    seen = {r.get("condition") for r in rows}
    return rows, [c for c in CONTENTION_CONDITIONS if c not in seen]


def contention_team_parts(data: dict[str, Any]) -> list[Part]:
    """The team over rlx on one thread under the same load: the shared turns ("paired",
    both timed under one placement of the loads) where the file has them, else the own
    turns; the part's label says which."""
    rows, missing = _contention_rows(data)
    parts = []
    for r in rows:
        label = f"{r.get('condition')} {r.get('workload')}"
        if "team_over_1thread_paired" in r:
            parts.append(_at_most(label + " (shared turns)", r["team_over_1thread_paired"],
                                  CONTENTION_VS_ONE_THREAD))
        else:
            parts.append(_at_most(label + " (own turns)", r.get("team_over_1thread"),
                                  CONTENTION_VS_ONE_THREAD))
    return parts + [_missing(c) for c in missing]


def contention_peers_parts(data: dict[str, Any]) -> list[Part]:
    """The team's time over the fastest peer's (torch, onnxruntime) under the same load."""
    rows, missing = _contention_rows(data)
    parts = []
    for r in rows:
        v = r.get("team_over_best_peer")
        ok = isinstance(v, (int, float)) and v > 0
        parts.append(Part(f"{r.get('condition')} {r.get('workload')}",
                          f"{v:.2f}x" if ok else "-", v < AHEAD if ok else None,
                          AHEAD / v if ok else 1.0, "" if ok else NOT_IN_FORMAT))
    return parts + [_missing(c) for c in missing]


# --- the goal table ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Goal:
    """A row of the table: its benchmark's results base name, the thread count its file must
    have (None: the machine's default, all its cores), and how to read its parts."""

    key: str  # the --run step that measures it
    figure: str
    target: str
    base: str
    parts: Callable[[dict[str, Any]], list[Part]]
    threads: int | None = None
    any_threads: bool = False  # bench_dispatch: one thread, no thread count recorded


GOALS: tuple[Goal, ...] = (
    Goal("gemm1", "bench_gemm vs MLAS, 1 thread",
         f"rlx / MLAS >= {GEMM_VS_MLAS:g}x on every shape, prepacked and per call", "gemm",
         gemm_parts, threads=1),
    Goal("gemm2", "bench_gemm vs MLAS, 2 threads",
         f"rlx / MLAS >= {GEMM_VS_MLAS:g}x on every shape, prepacked and per call", "gemm",
         gemm_parts, threads=2),
    Goal("minilm", "bench_minilm vs fastest peer",
         f">= {MINILM_VS_PEER:g}x at " + ", ".join(f"b{b}" for b in MINILM_BATCHES)
         + " (seq 128)", "minilm", minilm_parts),
    Goal("minilm", f"MiniLM b{MINILM_SMALL[0]} s{MINILM_SMALL[1]} over its floor",
         f"<= {MINILM_SMALL_OVER_FLOOR:g}x its floor", "minilm", minilm_small_parts),
    Goal("mlp", f"MLP {MLP_PEAK_CONFIG} of the FMA peak", f">= {MLP_PEAK_FRACTION:.0%}",
         "mnist_mlp", mlp_peak_parts),
    Goal("mlp", f"MLP {MLP_AHEAD_CONFIG} vs every peer", "ahead of every peer (> 1x)",
         "mnist_mlp", mlp_ahead_parts),
    Goal("dispatch", "bench_dispatch (x + y, 16 f32)",
         f"<= {DISPATCH_VS_NP_ADD:g}x np.add(x, y); torch.compile >= "
         f"{DISPATCH_VS_TORCH_COMPILE:g}x rlx", "dispatch", dispatch_parts, any_threads=True),
    Goal("decode1", "bench_decode, 1 thread",
         f"small >= {DECODE_SMALL['torch']:g}x eager, >= {DECODE_SMALL['torch.compile']:g}x "
         "torch.compile; GPT-2 small ahead of both", "decode", decode_parts, threads=1),
    Goal("decode2", "bench_decode, 2 threads",
         f"small >= {DECODE_SMALL['torch']:g}x eager, >= {DECODE_SMALL['torch.compile']:g}x "
         "torch.compile; GPT-2 small ahead of both", "decode", decode_parts, threads=2),
    Goal("contention", "bench_contention: team vs rlx on 1 thread",
         f"<= {CONTENTION_VS_ONE_THREAD:g}x under every load (shared turns where recorded)",
         "contention", contention_team_parts),
    Goal("contention", "bench_contention: team vs peers",
         "ahead of torch and onnxruntime under every load", "contention",
         contention_peers_parts),
)


def this_slug() -> str:
    from rlx_core.targets.cpu.identity import cpu_model

    return cpu_slug(cpu_model())


def results_files(results: Path, base: str, slug: str,
                  include_host_slow: bool = False) -> list[ResultsFile]:
    """``<base>-*.json`` (and ``<base>.json``) measured on ``slug``'s CPU, as the JSON records
    it (a name alone cannot tell ``amd-epyc`` from ``amd-epyc-zen-1``)."""
    out = []
    for path in sorted(results.glob(f"{base}*.json")):
        if path.stem != base and not path.stem.startswith(base + "-"):
            continue  # another benchmark whose name starts the same (minilm_gpu)
        if HOST_SLOW_TAG in path.stem and not include_host_slow:
            continue
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if not isinstance(data, dict):
            continue
        f = ResultsFile(path, data)
        if f.forced_path:
            continue  # a proxy for another machine's path, not this machine's figure
        if cpu_slug(f.cpu) == slug:
            out.append(f)
    return out


def _fits(goal: Goal, f: ResultsFile) -> bool:
    if goal.any_threads:
        return True
    threads = f.threads
    if goal.threads is not None:
        # bench_gemm's files before it recorded threads were its one-thread default
        return threads == goal.threads or (threads is None and goal.threads == 1
                                           and goal.base == "gemm")
    return threads is None or f.cores is None or threads == f.cores


def verdict(parts: Sequence[Part]) -> Status:
    if any(p.ok is False for p in parts):
        return Status.NOT_MET
    if parts and all(p.ok for p in parts):
        return Status.MET
    return Status.NOT_MEASURED


def summary(parts: Sequence[Part]) -> str:
    """All parts where there are a few; else the count met, the worst and what is missing."""
    measured = [p for p in parts if p.ok is not None]
    missing = [p for p in parts if p.ok is None]
    gone = "; ".join(f"{p.label}: {p.why}" for p in missing[:3]) + \
        (f" (+{len(missing) - 3} more)" if len(missing) > 3 else "")
    if len(parts) == 1:
        text = parts[0].text if measured else ""
    elif len(parts) <= 4:
        text = ", ".join(f"{p.label} {p.text}" for p in measured)
    else:
        bad = [p for p in measured if not p.ok]
        text = f"{len(measured) - len(bad)} of {len(measured)} met" if measured else ""
        if measured:
            worst = min(measured, key=lambda p: p.slack)
            text += f"; worst {worst.label} {worst.text}"
        if len(bad) > 1:
            text += "; not met: " + ", ".join(f"{p.label} {p.text}" for p in bad[:4]) + \
                (f" (+{len(bad) - 4} more)" if len(bad) > 4 else "")
    return "; ".join(t for t in (text, gone) if t)


def goal_row(goal: Goal, files: Iterable[ResultsFile]) -> Row:
    """The goal read from the file covering most of its parts (the newest of those)."""
    best: tuple[int, str] | None = None
    chosen: tuple[ResultsFile, list[Part]] | None = None
    for f in files:
        if not _fits(goal, f):
            continue
        parts = goal.parts(f.data)
        rank = (sum(p.ok is not None for p in parts), f.when)
        if best is None or rank > best:
            best, chosen = rank, (f, parts)
    if chosen is None:
        step = next(s for s in STEPS if s.name == goal.key)
        return Row(goal.figure, "-", goal.target, Status.NOT_MEASURED, "",
                   " ".join(["python", *step.args]), "")
    f, parts = chosen
    return Row(goal.figure, summary(parts), goal.target, verdict(parts), f.path.name,
               f.command(), f.when, f.placement)


def goal_table(slug: str, results: Path = RESULTS,
               include_host_slow: bool = False) -> list[Row]:
    files = {base: results_files(results, base, slug, include_host_slow)
             for base in dict.fromkeys(g.base for g in GOALS)}
    return [goal_row(g, files[g.base]) for g in GOALS]


def table_markdown(slug: str, rows: Sequence[Row], include_host_slow: bool = False) -> str:
    met = sum(r.status is Status.MET for r in rows)
    left = "" if include_host_slow else f"; `-{HOST_SLOW_TAG}-*` files left out"
    return (f"# Issue 22's CPU goals on `{slug}`\n\n{met} of {len(rows)} met. Each row reads "
            f"the newest committed results file of its benchmark for this CPU that covers "
            f"the most of the goal (`python benchmarks/cpu_goals.py --cpu {slug}`{left}).\n\n"
            + markdown_table(["goal", "measured", "target", "status", "results file",
                              "when", "placement", "command"],
                             [[r.goal, r.measured, r.target, r.status.value,
                               f"`{r.file}`" if r.file else "-", r.when or "-", r.placement,
                               f"`{r.command}`"] for r in rows])
            + PLACEMENT_NOTE)


def main(argv: list[str] | None = None, runner: Runner = subprocess_runner) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cpu", default="", help="CPU slug of the files to read (default: this "
                    "machine's), e.g. intel-xeon-emerald-rapids, amd-epyc-zen-1")
    ap.add_argument("--results", type=Path, default=RESULTS, help=argparse.SUPPRESS)
    ap.add_argument("--include-host-slow", action="store_true",
                    help=f"also read the -{HOST_SLOW_TAG}-* files")
    ap.add_argument("--write", action="store_true",
                    help="keep the table as results/goals-<slug>.md and .json")
    ap.add_argument("--run", action="store_true",
                    help="run peak.py and the goal benchmarks first (20+ minutes)")
    ap.add_argument("--only", default="", help="with --run: a comma list of "
                    + ", ".join(s.name for s in STEPS))
    ap.add_argument("--dry-run", action="store_true",
                    help="with --run: list the commands, run nothing")
    args = ap.parse_args(argv)
    if args.run and args.cpu:
        ap.error("--run measures this machine: leave out --cpu")
    path = rlx_path()
    if args.run and path["rlx_path_forced"]:
        ap.error("--run measures this machine's own path: unset RLX_CPU_ISA "
                 f"(it forces {path['rlx_path']})")
    if (args.only or args.dry_run) and not args.run:
        ap.error("--only and --dry-run go with --run")
    try:
        steps = select_steps(args.only) if args.run else []
    except ValueError as e:
        ap.error(str(e))
    if args.dry_run:
        for step in steps:
            say(" ".join([sys.executable, *step.args]))
        return 0
    failed = [n for n, rc in run_steps(steps, runner) if rc] if steps else []
    slug = args.cpu or this_slug()
    rows = goal_table(slug, args.results, args.include_host_slow)
    md = table_markdown(slug, rows, args.include_host_slow)
    say(md)
    if args.write:
        data = {"cpu": slug, "when": time.strftime("%Y-%m-%d %H:%M:%S"),
                "include_host_slow": args.include_host_slow,
                "rows": [{**asdict(r), "status": r.status.value} for r in rows]}
        js, mdp = args.results / f"goals-{slug}.json", args.results / f"goals-{slug}.md"
        js.write_text(json.dumps(data, indent=2) + "\n")
        mdp.write_text(md)
        say(f"wrote {js} and {mdp}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
