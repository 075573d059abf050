#!/usr/bin/env bash
# Build a local Pyodide distribution for the browser tests: the Pyodide core from the npm
# package `pyodide` (314.0.x, Python 3.14) plus the rlx wheel, in one folder to serve over http.
# Idempotent: the npm package is installed once; the wheel is rebuilt each run (seconds).
#   usage: scripts/build_pyodide_dist.sh [OUT_DIR]      (default build/pyodide-dist)
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-build/pyodide-dist}
NPM_DIR=build/pyodide-npm
PY=${PYTHON:-.venv/bin/python}
mkdir -p build
# parallel test workers may all ask for the distribution: one builds, the others wait
exec 9>build/.pyodide-dist.lock
flock 9

if [ ! -f "$NPM_DIR/node_modules/pyodide/pyodide.mjs" ]; then
  command -v npm >/dev/null || { echo "build_pyodide_dist: npm is not installed" >&2; exit 2; }
  mkdir -p "$NPM_DIR"
  (cd "$NPM_DIR" && npm install --no-audit --no-fund --silent "pyodide@~314.0.0")
fi

mkdir -p "$OUT"
# the core only: the lock file lists CDN packages we never fetch (the page loads the wheel by URL)
for f in pyodide.mjs pyodide.asm.mjs pyodide.asm.wasm python_stdlib.zip pyodide-lock.json \
         package.json; do
  cp -u "$NPM_DIR/node_modules/pyodide/$f" "$OUT/"
done

# the rlx wheel: pure Python, built without network (no build isolation). Built aside and
# renamed into place, so the wheel is never missing: another test worker may be copying or
# serving it outside this lock (a lite site build once found it deleted mid-rebuild)
TMP_WHL=$(mktemp -d "$OUT/.wheel.XXXXXX")
trap 'rm -rf "$TMP_WHL"' EXIT
"$PY" -m pip wheel -q --no-deps --no-build-isolation -w "$TMP_WHL" . >/dev/null
rm -rf build/lib build/bdist.*
new=$(ls "$TMP_WHL"/rlx_explorer-*.whl)
mv -f "$new" "$OUT/"
for old in "$OUT"/rlx_explorer-*.whl; do  # wheels of other versions
  [ "$(basename "$old")" = "$(basename "$new")" ] || rm -f "$old"
done
ls "$OUT"/rlx_explorer-*.whl
