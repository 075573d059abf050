#!/usr/bin/env bash
# The whole test suite: set up, then run pytest on both cores.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# worksteal: a worker that runs out of tests takes half of the other's queue, so the run
# ends with both busy (the heavy compiles, marked slow, start first: tests/conftest.py)
exec .venv/bin/python -m pytest -n "${RLX_TEST_WORKERS:-auto}" --dist worksteal -q "$@"
