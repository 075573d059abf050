"""Run the official ONNX backend node tests on rlx targets; print pass / fail / rejected counts
and write the committed report (docs/onnx-report.md and docs/onnx-report.json).

    python scripts/onnx_report.py                      # numpy, cpu, webgpu (those available)
    python scripts/onnx_report.py --targets cpu -j 2   # one target, two worker processes
    python scripts/onnx_report.py --targets opencl,opengl,vulkan,directx,tpu -j 2
                                                       # the GPU API targets and tpu, every case
    python scripts/onnx_report.py --targets webgpu --filter bf16 --merge
                                                       # rerun some cases, keep the other rows

"rejected" means rlx raised a typed error (an op it does not import exactly, a dtype the
target cannot run): an explicit refusal. "fail" means a wrong answer or a crash; the goal is
zero of those, and tests/onnx/test_backend_node.py enforces it.
"""

from __future__ import annotations

import argparse
import collections
import datetime
import json
import multiprocessing
import os
import sys
from concurrent.futures import ProcessPoolExecutor
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "tests", "onnx"))

import node_cases  # noqa: E402
import suite  # noqa: E402

GOAL = {"cpu": 0.75, "webgpu": 0.80}  # the issues' target pass rate per target
DEFAULT_TARGETS = ("numpy", "cpu", "webgpu")
# the order of the report's tables (targets not listed follow in the order they ran)
ORDER = ("numpy", "cpu", "webgpu", "tpu", "opencl", "opengl", "vulkan", "directx")


def _run_chunk(args: tuple[str, list[str], float]) -> list[dict[str, Any]]:
    target, names, timeout = args
    wanted = set(names)
    cases = [c for c in node_cases.load_cases() if c.name in wanted]
    return [suite.run_case(c, target, timeout).__dict__ for c in cases]


def run_target(target: str, names: list[str], jobs: int, timeout: float) -> list[dict[str, Any]]:
    if jobs <= 1:
        return _run_chunk((target, names, timeout))
    chunks = [names[i::jobs] for i in range(jobs)]
    # spawn, not fork: a forked child inherits GPU driver state (wgpu / Vulkan) and hangs
    with ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
        parts = list(pool.map(_run_chunk, [(target, c, timeout) for c in chunks]))
    out = [r for part in parts for r in part]
    out.sort(key=lambda r: r["name"])
    return out


def _available(target: str) -> tuple[bool, str]:
    import rlx_core as rlx

    for info in rlx.targets():
        if info.name == target:
            return info.available, info.reason
    return False, "not a registered target"


def _reason_key(detail: str) -> str:
    """A short grouping key for rejection reasons: the error code, op type and reason."""
    key = detail.split(" (+")[0]
    for quote in ("'", '"'):  # value names differ per case; the reason does not
        parts = key.split(quote)
        key = quote.join(p if i % 2 == 0 else "…" for i, p in enumerate(parts))
    return key[:90]


def _load_previous(path_json: str) -> dict[str, Any]:
    if not os.path.exists(path_json):
        return {}
    with open(path_json) as f:
        return json.load(f)


def write_report(results: dict[str, list[dict[str, Any]]], skipped: dict[str, str],
                 path_md: str, path_json: str, sample: dict[str, int],
                 merge: bool = False) -> None:
    """Write both files; targets not run this time keep their rows from the existing report.
    With ``merge``, a target run on some of its cases keeps its other cases' rows too."""
    import onnx

    prev = _load_previous(path_json)
    if merge and prev.get("onnx_version") == onnx.__version__:
        for t, rows in list(results.items()):
            old = prev.get("cases", {}).get(t)
            if old is None:
                continue
            new = {r["name"]: r for r in rows}
            results[t] = [new.get(k, {"name": k, "status": v[0], "detail": v[1]})
                          for k, v in sorted(old.items())]
            results[t] += [r for k, r in sorted(new.items()) if k not in old]
            sample.setdefault(t, prev.get("summary", {}).get(t, {}).get("sample", 1))
    if prev.get("onnx_version") == onnx.__version__:
        for t, cases in prev.get("cases", {}).items():
            if t not in results and t not in skipped:
                results[t] = [{"name": k, "status": v[0], "detail": v[1]}
                              for k, v in sorted(cases.items())]
                sample.setdefault(t, prev.get("summary", {}).get(t, {}).get("sample", 1))
    results = dict(sorted(results.items(), key=lambda kv: ORDER.index(kv[0])
                          if kv[0] in ORDER else len(ORDER)))
    summary = {}
    for target, rows in results.items():
        counts = collections.Counter(r["status"] for r in rows)
        total = len(rows)
        summary[target] = {"total": total, "pass": counts[suite.PASS],
                           "rejected": counts[suite.REJECTED], "fail": counts[suite.FAIL],
                           "pass_rate": round(counts[suite.PASS] / total, 4) if total else 0.0,
                           "sample": sample.get(target, 1)}
    data = {
        "onnx_version": onnx.__version__,
        "generated": datetime.date.today().isoformat(),
        "summary": summary,
        "skipped_targets": skipped,
        "cases": {t: {r["name"]: [r["status"], r["detail"][:160]] for r in rows}
                  for t, rows in results.items()},
    }
    with open(path_json, "w") as f:
        json.dump(data, f, indent=1, sort_keys=True)
        f.write("\n")
    lines = [
        "# ONNX backend node tests on rlx",
        "",
        f"The official node tests of onnx {onnx.__version__} (`onnx.backend.test`, "
        f"{max((s['total'] for s in summary.values()), default=0)} cases) run through "
        "`rlx_core.frontend.onnx_backend`. Written by `scripts/onnx_report.py`; "
        "`tests/onnx/test_backend_node.py` checks it in CI.",
        "",
        "- **pass**: outputs match ONNX's expected outputs within the test's tolerance.",
        "- **rejected**: rlx raised a typed error (`UnsupportedOp` for an op, attribute, "
        "dtype or opset it does not import exactly; `LegalizationError` when the target "
        "cannot run a dtype or op): an explicit refusal, never a silent result.",
        "- **fail**: a wrong answer or a crash. The rule is zero.",
        "",
        "Tolerances are each test's own (`rtol`, `atol`), checked by ONNX's "
        "`Runner.assert_similar_outputs`. On compiled targets, float16 outputs are compared "
        "within two float16 ULPs (`rtol` 2^-9), as ONNX's runner does for bfloat16; the numpy "
        "reference is held to the test's own tolerance. Sampled targets run every Nth case "
        "(the same sample `tests/onnx/test_backend_node.py` runs in CI).",
        "",
        "Targets without i64 kernels (webgpu, opencl, opengl, vulkan, directx, tpu) run int64 "
        "values as i32 where that is exact: the backend promises each int64 input's "
        "power-of-two range, the compiler proves every narrowed value fits i32 and each call "
        "checks the promise (RLX-G002). What stays rejected there is mostly f64 (no f64 in "
        "GLSL compute or HLSL here, nor on a TPU; webgpu emulates it as double-float, "
        "`rlx_core/targets/webgpu/df64.py`: a 48-bit significand in f32's exponent range, for "
        "arithmetic, exp/log/pow, reductions, matmul and movement), bf16 and i64 values of "
        "unknown range (float->int64 casts).",
        "",
        "| target | cases run | pass | rejected | fail | pass rate | goal |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for t, s in summary.items():
        goal = f"{GOAL[t]:.0%}" if t in GOAL else "-"
        run = str(s["total"]) if s["sample"] == 1 else f"{s['total']} (every {s['sample']}th)"
        lines.append(f"| {t} | {run} | {s['pass']} | {s['rejected']} | {s['fail']} | "
                     f"{s['pass_rate']:.1%} | {goal} |")
    for t, why in skipped.items():
        lines.append(f"| {t} | - | - | - | - | not run: {why} | - |")
    for t, rows in results.items():
        reasons = collections.Counter(_reason_key(r["detail"]) for r in rows
                                      if r["status"] == suite.REJECTED)
        lines += ["", f"## Most common rejections on {t}", "", "| cases | reason |", "|---:|---|"]
        lines += [f"| {n} | {k.replace('|', '/')} |" for k, n in reasons.most_common(25)]
        fails = [r for r in rows if r["status"] == suite.FAIL]
        if fails:
            lines += ["", f"## Failures on {t}", ""]
            lines += [f"- `{r['name']}`: {r['detail'][:160]}" for r in fails]
    with open(path_md, "w") as f:
        f.write("\n".join(lines) + "\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--targets", default=",".join(DEFAULT_TARGETS))
    ap.add_argument("-j", "--jobs", type=int, default=max(1, (os.cpu_count() or 2) // 1))
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds per case")
    ap.add_argument("--filter", default="", help="only cases whose name contains this")
    ap.add_argument("--out", default=os.path.join(ROOT, "docs", "onnx-report"),
                    help="report path without extension (.md and .json are written)")
    ap.add_argument("--sample", default="", help="run every Nth case on some targets, e.g. "
                                                 "webgpu=16 (the report says so)")
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--merge", action="store_true", help="update only the cases run (with "
                    "--filter) in the existing report, keeping its other rows")
    args = ap.parse_args(argv)

    all_names = [c.name for c in node_cases.load_cases() if args.filter in c.name]
    sample = {k: int(v) for k, v in (p.split("=") for p in args.sample.split(",") if p)}
    for t in args.targets.split(","):  # a target run now in full is no longer a sample, even
        sample.setdefault(t.strip(), 1)  # when --merge keeps the other targets' rows
    results: dict[str, list[dict[str, Any]]] = {}
    skipped: dict[str, str] = {}
    print(f"{'target':<8} {'pass':>6} {'rejected':>9} {'fail':>6} {'pass rate':>10}")
    for target in [t for t in args.targets.split(",") if t]:
        ok, why = _available(target)
        if not ok:
            skipped[target] = why
            print(f"{target:<8} skipped: {why}")
            continue
        names = all_names[::sample.get(target, 1)]
        rows = run_target(target, names, args.jobs, args.timeout)
        results[target] = rows
        c = collections.Counter(r["status"] for r in rows)
        rate = c[suite.PASS] / len(rows) if rows else 0.0
        print(f"{target:<8} {c[suite.PASS]:>6} {c[suite.REJECTED]:>9} {c[suite.FAIL]:>6} "
              f"{rate:>9.1%}", flush=True)
        if not args.no_write:  # after every target, so a long run keeps what it finished
            write_report(dict(results), dict(skipped), args.out + ".md", args.out + ".json",
                         dict(sample), args.merge)
    if not args.no_write:
        write_report(results, skipped, args.out + ".md", args.out + ".json", sample, args.merge)
        print(f"wrote {args.out}.md and {args.out}.json")
    return 1 if any(r["status"] == suite.FAIL for rows in results.values() for r in rows) else 0


if __name__ == "__main__":
    raise SystemExit(main())
