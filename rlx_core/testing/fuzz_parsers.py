"""Coverage-guided fuzzing (atheris / libFuzzer) of the three readers of untrusted bytes: the IR
text parser, the ONNX importer and the safetensors reader. Anything they raise that is not an
``RlxError`` is a finding; the goal is none.

    python -m rlx_core.testing.fuzz_parsers --seconds 600 --report docs/fuzz/parsers.json

Each target runs in its own process (libFuzzer ends the process when it stops), seeded with a
small corpus of valid inputs, for ``--seconds / 3`` each. ``--target T --atheris ARGS`` is that
child process. Needs ``atheris`` (``pip install atheris``); numpy and onnx for the importer.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

TARGETS = ("ir_text", "onnx", "safetensors")
RSS_LIMIT_MB = 4096
PER_INPUT_SECONDS = 20


def atheris_available() -> tuple[bool, str]:
    try:
        import atheris  # noqa: F401
    except ImportError as err:
        return False, f"atheris is not installed ({err}); pip install atheris"
    return True, ""


# ---- the targets: one input each; RlxError is the expected way to refuse ----------------------

def fuzz_ir_text(data: bytes) -> None:
    from rlx_core.ir.parser import parse

    parse(data.decode("utf-8", errors="surrogateescape"))


def fuzz_onnx(data: bytes) -> None:
    from rlx_core.frontend.onnx_import import import_model

    import_model(data)


_ST_PATH = os.path.join(tempfile.gettempdir(), f"rlx-fuzz-{os.getpid()}.safetensors")


def fuzz_safetensors(data: bytes) -> None:
    from rlx_core.frontend.weights import read_header, read_safetensors

    with open(_ST_PATH, "wb") as f:
        f.write(data)
    read_header(_ST_PATH)
    read_safetensors(_ST_PATH)


def fuzz_all(data: bytes) -> None:
    """The three in one process (the first byte picks one): the CI's short run pays the
    instrumented import once."""
    if data:
        (fuzz_ir_text, fuzz_onnx, fuzz_safetensors)[data[0] % 3](data[1:])


TARGET_FNS: dict[str, Callable[[bytes], None]] = {
    "ir_text": fuzz_ir_text, "onnx": fuzz_onnx, "safetensors": fuzz_safetensors,
    "all": fuzz_all}


# ---- seed corpora --------------------------------------------------------------------------

def seeds(target: str) -> list[bytes]:
    """Valid inputs to start from."""
    if target == "all":
        return [bytes([k]) + s for k, t in enumerate(TARGETS) for s in seeds(t)]
    if target == "ir_text":
        doc = Path(__file__).resolve().parents[2] / "docs" / "ir-text-format.md"
        blocks = re.findall(r"```rlx\n(.*?)```", doc.read_text(), re.S) if doc.is_file() else []
        return [b.encode() for b in blocks] or [b"hir @g {\n  input %x : f32[2]\n"
                                                 b"  %0 : f32[2] = neg(%x)\n  return %0\n}\n"]
    if target == "onnx":
        from rlx_core.testing.mutate_onnx import seed_models

        return seed_models()
    out = []
    for entries in ({"w": ("F32", [2, 2])}, {"a": ("I64", [3]), "b": ("F16", [1, 2])},
                    {"__metadata__": None, "x": ("BF16", [4])}):
        header: dict[str, Any] = {}
        offset = 0
        for name, spec in entries.items():
            if spec is None:
                header[name] = {"format": "pt"}
                continue
            dtype, shape = spec
            n = {"F32": 4, "I64": 8, "F16": 2, "BF16": 2}[dtype]
            for d in shape:
                n *= d
            header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + n]}
            offset += n
        raw = json.dumps(header).encode()
        out.append(struct.pack("<Q", len(raw)) + raw + bytes(offset))
    return out


# ---- the child: atheris on one target ------------------------------------------------------

def run_atheris(target: str, libfuzzer_args: list[str]) -> None:
    """Fuzz ``target`` in this process until libFuzzer stops (it exits the process)."""
    import warnings

    import atheris

    fn = TARGET_FNS[target]
    os.environ.setdefault("RLX_MEMORY_LIMIT", "1G")  # import-time values stay small
    # rlx_core is imported here for the first time in this process (the child runs as a
    # script), so every module of it the target loads is instrumented for coverage
    with atheris.instrument_imports(include=["rlx_core"]):
        from rlx_core.errors import RlxError
        from rlx_core.frontend import weights  # noqa: F401
        from rlx_core.ir import parser  # noqa: F401

        if target in ("onnx", "all"):
            from rlx_core.frontend import onnx_import  # noqa: F401
            from rlx_core.frontend.onnx_import.ops import table  # noqa: F401
            from rlx_core.targets.numpy_ref import semantics  # noqa: F401

    def one(data: bytes) -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                fn(data)
            except RlxError:
                pass  # a typed refusal: what malformed input should get

    for s in seeds(target):  # warm up: first-call costs (lazy imports) stay out of the clock
        one(s)
    atheris.Setup([sys.argv[0], *libfuzzer_args], one)
    atheris.Fuzz()


# ---- the driver: one child per target, a report ------------------------------------------

_DONE = re.compile(r"#(\d+)\s+DONE\s+cov: (\d+) ft: (\d+)")
_STAT = re.compile(r"#(\d+)\s+\w+\s+cov: (\d+) ft: (\d+)")


def fuzz_target(target: str, seconds: float, workdir: Path) -> dict[str, Any]:
    """Run one target for ``seconds`` in a child process; its executions, coverage, findings."""
    corpus = workdir / f"corpus-{target}"
    corpus.mkdir(parents=True, exist_ok=True)
    for i, s in enumerate(seeds(target)):
        (corpus / f"seed-{i}").write_bytes(s)
    artifacts = workdir / f"crashes-{target}"
    artifacts.mkdir(exist_ok=True)
    args = [f"-max_total_time={max(1, int(seconds))}", f"-rss_limit_mb={RSS_LIMIT_MB}",
            f"-timeout={PER_INPUT_SECONDS}", f"-artifact_prefix={artifacts}/",
            "-print_final_stats=1", str(corpus)]
    # a script, not -m: rlx_core must not be imported before the child instruments it
    cmd = [sys.executable, str(Path(__file__).resolve()), "--target", target, "--atheris", *args]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(Path(__file__).resolve().parents[2]), os.environ.get("PYTHONPATH", "")]))
    start = time.monotonic()
    res = subprocess.run(cmd, capture_output=True, text=True, env=env,
                         timeout=seconds + 300)
    wall = time.monotonic() - start
    text = res.stdout + res.stderr
    stats = _DONE.findall(text) or _STAT.findall(text)
    execs, cov, ft = (int(v) for v in stats[-1]) if stats else (0, 0, 0)
    findings = []
    for m in re.finditer(r"=== Uncaught Python exception: ===\n(.*?)\n(?:\n|==)", text, re.S):
        findings.append(m.group(1).strip().splitlines()[-1][:300])
    if res.returncode != 0 and not findings:
        tail = [ln for ln in text.splitlines() if ln.strip()][-3:]
        findings.append(f"exit status {res.returncode}: " + " | ".join(tail)[:300])
    return {"target": target, "seconds": round(wall, 1), "executions": execs,
            "coverage_edges": cov, "features": ft, "corpus_files": len(os.listdir(corpus)),
            "untyped_exceptions": len(findings), "findings": findings,
            "artifacts": sorted(os.listdir(artifacts))}


def _version(package: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(package)
    except PackageNotFoundError:
        return "?"


def run(seconds: float, targets: tuple[str, ...] = TARGETS,
        workdir: Path | None = None) -> dict[str, Any]:
    """Fuzz every target for ``seconds`` in all (split evenly); the report as a dict."""
    ok, why = atheris_available()
    if not ok:
        raise RuntimeError(why)
    from rlx_core.testing.mutate_onnx import machine_description

    work = workdir or Path(tempfile.mkdtemp(prefix="rlx-fuzz-parsers-"))
    per = seconds / len(targets)
    results = [fuzz_target(t, per, work) for t in targets]
    return {"command": f"python -m rlx_core.testing.fuzz_parsers --seconds {int(seconds)}",
            "atheris": _version("atheris"), "machine": machine_description(),
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "targets": results,
            "untyped_exceptions": sum(r["untyped_exceptions"] for r in results)}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if "--atheris" in argv:  # the child
        k = argv.index("--atheris")
        ap = argparse.ArgumentParser()
        ap.add_argument("--target", choices=tuple(TARGET_FNS), required=True)
        ns = ap.parse_args(argv[:k])
        run_atheris(ns.target, argv[k + 1:])
        return 0
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=600.0, help="in all, split over targets")
    ap.add_argument("--target", action="append", choices=TARGETS,
                    help="only these targets (repeatable)")
    ap.add_argument("--report", default=None, help="write the JSON report here")
    ns = ap.parse_args(argv)
    report = run(ns.seconds, tuple(ns.target or TARGETS))
    for r in report["targets"]:
        print(f"{r['target']:<12} {r['executions']:>9} execs  cov {r['coverage_edges']:>5}  "
              f"untyped {r['untyped_exceptions']}" +
              "".join(f"\n    {f}" for f in r["findings"]))
    if ns.report:
        Path(ns.report).write_text(json.dumps(report, indent=1) + "\n")
    return 1 if report["untyped_exceptions"] else 0


if __name__ == "__main__":
    sys.exit(main())
