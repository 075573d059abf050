#!/usr/bin/env bash
# The main job: set up, then compile the shipped tour example and show all three IR levels
# and its dispatch report.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/rlx tour
