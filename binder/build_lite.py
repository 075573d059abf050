"""Build the JupyterLite site: Pyodide kernel, rlx wheel, the JupyterLab extension and the
notebooks, with the Pyodide runtime from local files — the site and its test work offline.

    python binder/build_lite.py [--out build/lite-site] [--force]      (or: rlx lite build)

Steps (each input is hashed; an unchanged build is skipped, wheels are cached):
1. the Pyodide core (npm package ``pyodide`` 314.0.x) and the rlx wheel, from the webgpu
   helper's scripts/build_pyodide_dist.sh;
2. the notebooks' data files (binder/lite_data.py: an MNIST subset, the ONNX example as rlx IR
   text — the page has neither numpy nor onnx);
3. the Python 3.14 wheels of ``micropip`` and ``packaging`` from PyPI put into that distribution,
   their pyodide-lock.json entries (file name, sha256) rewritten with the ``pyodide-lock``
   package — the kernel's worker calls ``loadPackage(['micropip'])`` by name;
4. the kernel's own Python dependencies (ipython, jedi, comm and theirs) as pure wheels for
   piplite, with the PyPI fallback disabled;
5. ``jupyter lite build`` with the distribution as ``static/pyodide`` of the lite dir, the rlx
   wheel both as a piplite wheel and as the federated extension it carries.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
LITE = ROOT / "binder" / "lite"
CACHE = ROOT / "build" / "lite-cache"
DEFAULT_OUT = ROOT / "build" / "lite-site"
# the wheels the Pyodide lock must carry locally: pinned to what pyodide-lock.json names
LOCK_WHEELS = ("micropip", "packaging")
# what the kernel's worker installs with piplite: ipykernel (shipped by the kernel), these
KERNEL_DEPS = ("ipython", "jedi", "comm")


class LiteBuildError(RuntimeError):
    """A step of the site build failed; the message says which and what to do."""


def _run(cmd: list[str], what: str, **kw: object) -> str:
    done = subprocess.run(cmd, capture_output=True, text=True, **kw)  # type: ignore[call-overload]
    if done.returncode != 0:
        raise LiteBuildError(f"{what} failed ({' '.join(cmd[:4])} ...):\n{done.stdout}\n{done.stderr}")
    return str(done.stdout)


def _digest(paths: list[Path], extra: str) -> str:
    h = hashlib.sha256(extra.encode())
    for base in paths:
        files = sorted(p for p in (base.rglob("*") if base.is_dir() else [base])
                       if p.is_file() and "__pycache__" not in p.parts)
        for f in files:
            h.update(str(f.relative_to(ROOT)).encode())
            h.update(f.read_bytes())
    return h.hexdigest()


def _lite_data() -> Any:
    """binder/lite_data.py (binder/ is a folder of scripts, not a package)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("rlx_lite_data", ROOT / "binder" / "lite_data.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def input_hash() -> str:
    versions = " ".join(f"{d}={metadata.version(d)}" for d in
                        ("jupyterlite-core", "jupyterlite-pyodide-kernel", "pyodide-lock"))
    return _digest([ROOT / "rlx_core", ROOT / "rlx_explorer", ROOT / "extension" / "labextension",
                    LITE, ROOT / "pyproject.toml", Path(__file__),
                    ROOT / "binder" / "lite_data.py",
                    ROOT / "scripts" / "build_pyodide_dist.sh"], versions)


def pyodide_dist() -> tuple[Path, Path]:
    """(Pyodide core folder, rlx wheel): the webgpu helper's script makes both."""
    dist = ROOT / "build" / "pyodide-dist"
    _run(["bash", str(ROOT / "scripts" / "build_pyodide_dist.sh"), str(dist)],
         "building the Pyodide distribution", cwd=ROOT, timeout=900)
    wheels = sorted(dist.glob("rlx_explorer-*.whl"))
    if not wheels:
        raise LiteBuildError(f"no rlx wheel in {dist}")
    return dist, wheels[-1]


def download(specs: list[str], dest: Path, deps: bool) -> list[Path]:
    """Pure-Python wheels for CPython 3.14 (Pyodide 314), cached in ``dest``."""
    dest.mkdir(parents=True, exist_ok=True)
    stamp = dest / ".specs"
    key = json.dumps([specs, deps])
    if not (stamp.exists() and stamp.read_text() == key):
        cmd = [sys.executable, "-m", "pip", "download", "-q", "--only-binary=:all:",
               "--python-version", "3.14", "--implementation", "py", "--abi", "none",
               "--platform", "any", "-d", str(dest), *([] if deps else ["--no-deps"]), *specs]
        _run(cmd, f"downloading {', '.join(specs)} from PyPI", timeout=600)
        stamp.write_text(key)
    return sorted(dest.glob("*.whl"))


def lock_wheels(core: Path, out: Path) -> None:
    """Copy the core into ``out`` with local micropip/packaging wheels in its lock file."""
    from pyodide_lock import PyodideLockSpec
    from pyodide_lock.utils import update_package_sha256

    out.mkdir(parents=True, exist_ok=True)
    for f in ("pyodide.mjs", "pyodide.asm.mjs", "pyodide.asm.wasm", "python_stdlib.zip",
              "package.json"):
        shutil.copy2(core / f, out / f)
    # Pyodide 314's lock has "tool" tables that pyodide-lock 0.1.2's schema does not know yet:
    # set them aside, edit with pyodide-lock, put them back
    raw = json.loads((core / "pyodide-lock.json").read_text())
    tools = {"": raw.pop("tool", None)}
    for name, pkg in raw["packages"].items():
        tools[name] = pkg.pop("tool", None)
    info = dict(raw["info"])  # 0.1.2 also wants info.version, which 314 dropped
    raw["info"].setdefault("version", json.loads((core / "package.json").read_text())["version"])
    plain = CACHE / "pyodide-lock.plain.json"
    plain.parent.mkdir(parents=True, exist_ok=True)
    plain.write_text(json.dumps(raw))
    spec = PyodideLockSpec.from_json(plain)
    pins = [f"{n}=={spec.packages[n].version}" for n in LOCK_WHEELS]
    for whl in download(pins, CACHE / "lock-wheels", deps=False):
        name = whl.name.split("-")[0].replace("_", "-").lower()
        if name not in spec.packages:
            continue
        shutil.copy2(whl, out / whl.name)
        pkg = spec.packages[name]
        pkg.file_name = whl.name
        update_package_sha256(pkg, out / whl.name)
    # only what is really here: the rest of the lock names CDN files this site never has
    spec.packages = {n: p for n, p in spec.packages.items() if (out / p.file_name).exists()}
    spec.to_json(out / "pyodide-lock.json")
    lock = json.loads((out / "pyodide-lock.json").read_text())
    lock["info"] = info
    for name, pkg in lock["packages"].items():
        if tools.get(name) is not None:
            pkg["tool"] = tools[name]
    if tools[""] is not None:
        lock["tool"] = tools[""]
    (out / "pyodide-lock.json").write_text(json.dumps(lock, indent=1))


def build(out: Path = DEFAULT_OUT, force: bool = False) -> Path:
    """Build (or reuse) the site in ``out``; returns ``out``. One build at a time (a lock file),
    so parallel test workers share one site."""
    import fcntl

    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _build(out, force)


def _stages(total: int) -> Callable[[str], None]:
    """``step(what)`` prints ``lite: [i/total] what (t s)``: long builds show where they are."""
    import time

    t0, done = time.perf_counter(), [0]

    def step(what: str) -> None:
        done[0] += 1
        print(f"lite: [{done[0]}/{total}] {what} ({time.perf_counter() - t0:.0f} s)", flush=True)
    return step


def _build(out: Path, force: bool) -> Path:
    key = input_hash()
    stamp = out / ".rlx-lite-build"
    if not force and stamp.exists() and stamp.read_text() == key:
        print(f"lite: up to date ({out})")
        return out
    step = _stages(5)
    step("the rlx wheel and the Pyodide core")
    core_dist, rlx_wheel = pyodide_dist()
    core = ROOT / "build" / "pyodide-npm" / "node_modules" / "pyodide"
    work = CACHE / "lite-dir"
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(LITE, work)
    step("the notebooks' data files (MNIST subset, the ONNX model as rlx IR)")
    _lite_data().write_all(work / "content")
    step("the Pyodide lock file")
    lock_wheels(core if core.exists() else core_dist, work / "static" / "pyodide")
    step("the kernel's wheels")
    piplite = [rlx_wheel, *download(list(KERNEL_DEPS), CACHE / "kernel-wheels", deps=True)]
    if out.exists():
        shutil.rmtree(out)
    cmd = [sys.executable, "-m", "jupyterlite_core", "build", "--lite-dir", str(work),
           "--output-dir", str(out), "--contents", str(work / "content"),
           f"--LiteBuildConfig.federated_extensions={rlx_wheel}",
           "--LiteBuildConfig.cache_dir", str(CACHE / "jupyterlite"),
           *[f"--piplite-wheels={p}" for p in piplite]]
    step("jupyter lite build (a few minutes the first time)")
    _run(cmd, "jupyter lite build", cwd=work, timeout=900)
    if not (out / "static" / "pyodide" / "pyodide-lock.json").exists():
        raise LiteBuildError("the site has no static/pyodide: the Pyodide addon did not run")
    stamp.write_text(key)
    print(f"lite: built {out}")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="rlx lite build", description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help="site folder")
    ap.add_argument("--force", action="store_true", help="rebuild even if nothing changed")
    args = ap.parse_args(argv)
    try:
        build(args.out.resolve(), args.force)
    except LiteBuildError as err:
        print(f"rlx lite build: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
