#!/usr/bin/env bash
# The whole test suite: set up, then run pytest on both cores.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python -m pytest -n "${RLX_TEST_WORKERS:-auto}" -q "$@"
