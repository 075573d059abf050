#!/usr/bin/env bash
# Wheels for scripts/gpu_check.sh on a GPU machine that reaches no package registry: downloaded
# here (PyPI through pip) into .gpu_wheels/ (git-ignored; carry it with the working tree).
# About 45 MB: NVRTC 12.4 (cubins for sm_50..sm_90 and PTX for newer GPUs, on any CUDA 12+
# driver) and cuda_fp16.h (nvidia-cuda-runtime-cu12), numpy, pytest, pytest-xdist and pip itself.
#
#   bash scripts/gpu_wheels.sh [PYTHON_VERSION]     # default 3.12 (the GPU machine's)
set -euo pipefail
cd "$(dirname "$0")/.."
PYV=${1:-3.12}
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] && PY=.venv/bin/python
mkdir -p .gpu_wheels
"$PY" -m pip download --quiet --dest .gpu_wheels --only-binary=:all: \
    --python-version "$PYV" --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux_2_28_x86_64 \
    "numpy>=1.26" "pytest>=8" "pytest-xdist>=3.5" "nvidia-cuda-nvrtc-cu12==12.4.127" \
    "nvidia-cuda-runtime-cu12==12.4.127" pip
du -sh .gpu_wheels
ls .gpu_wheels
