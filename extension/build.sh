#!/usr/bin/env bash
# Build the JupyterLab extension into extension/labextension (what the Python distribution
# installs as share/jupyter/labextensions/rlx-explorer-labextension). One command, idempotent:
# skips everything when the inputs (sources, package files, the explorer's viewer) are unchanged.
#   usage: bash extension/build.sh [--force]
set -euo pipefail
cd "$(dirname "$0")"
PY=${PYTHON:-../.venv/bin/python}
# one build at a time (pytest-xdist workers may all ask for it)
exec 9>.build-lock
flock 9
inputs=$(cat package.json package-lock.json tsconfig.json src/*.ts src/vendor/*.ts scripts/*.mjs \
  ../rlx_explorer/static/parts/*.js ../rlx_explorer/static/viz/viz.js | sha256sum | cut -d' ' -f1)
if [ "${1:-}" != "--force" ] && [ -f .build-stamp ] && [ "$(cat .build-stamp)" = "$inputs" ] \
    && [ -f labextension/package.json ]; then
  echo "extension: up to date"; exit 0
fi
command -v npm >/dev/null || { echo "extension/build.sh: npm is not installed" >&2; exit 2; }
[ -d node_modules/@jupyterlab/builder ] || npm ci --no-audit --no-fund --silent
node scripts/vendor-viewer.mjs
npx tsc -p .
# the core (shared singletons) of the JupyterLab the venv has; jupyter's own `labextension build`
# now goes through jupyter-builder, which wants a GitHub download for a legacy builder
core=$("$PY" -c "import jupyterlab, os; print(os.path.join(os.path.dirname(jupyterlab.__file__), 'staging'))")
rm -rf labextension
node node_modules/@jupyterlab/builder/lib/build-labextension.js --core-path "$core" . >/dev/null
echo "$inputs" > .build-stamp
echo "extension: built $(ls labextension/static | wc -l) files into extension/labextension"
