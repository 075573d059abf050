#!/usr/bin/env bash
# The cuda target on an NVIDIA GPU, in one command sized for a scarce machine (< 8 minutes):
#   1. Python packages from the wheels carried in the working tree (.gpu_wheels/, made by
#      scripts/gpu_wheels.sh on a machine with PyPI), installed only where an import is missing;
#   2. the cuda runtime tests, the int8 kernels (__dp4a, bit-exact vs numpy) and the
#      conformance suite on the GPU (pytest -k cuda);
#   3. MiniLM and an MLP Adam step against the numpy target, and their timings beside their
#      peers (benchmarks/gpu_check.py).
# Results: benchmarks/results/gpu_check-<gpu>.{md,json} and gpu_check-<gpu>-conformance.txt,
# copied to --out DIR too (the device tool's $OUT). Without a GPU it says so and exits 77;
# RLX_GPU_CHECK_DRY=1 then still installs and runs everything, the GPU parts skipping.
#
#   bash scripts/gpu_check.sh [--out DIR]
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=""
[ "${1:-}" = "--out" ] && OUT=${2:?--out needs a folder}
say() { echo "gpu_check: $*"; }
PY=${PYTHON:-}
for p in python3.12 python3 python; do  # the first that runs and is 3.11+ (not a stale shim)
    [ -z "$PY" ] && "$p" -c "import sys; assert sys.version_info >= (3, 11)" 2>/dev/null \
        && PY=$(command -v "$p")
done
[ -n "$PY" ] || { say "no python3 on PATH"; exit 2; }

# -- is there a GPU? (the driver library and a device; nvidia-smi only names it) --------------
GPU=$("$PY" - <<'PYEOF'
import ctypes
try:
    lib = ctypes.CDLL("libcuda.so.1")
except OSError as err:
    print(f"none: no CUDA driver library ({err})")
else:
    n = ctypes.c_int(0)
    res = lib.cuInit(0)
    if res == 0:
        lib.cuDeviceGetCount(ctypes.byref(n))
    print(f"none: cuInit returned {res}" if res else
          (f"{n.value} device(s)" if n.value else "none: the driver sees no device"))
PYEOF
) || GPU="none: the driver check failed"
if [[ $GPU == none* ]]; then
    say "no NVIDIA GPU here (${GPU#none: }): the GPU parts are skipped"
    [ "${RLX_GPU_CHECK_DRY:-0}" = 1 ] || exit 77
else
    say "CUDA driver: $GPU"
    command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total \
        --format=csv,noheader
fi

# -- Python packages: from the carried wheels, only what is missing -------------------------
SITE=$ROOT/.gpu-site
export PYTHONPATH=$ROOT:$SITE${PYTHONPATH:+:$PYTHONPATH}
need=()
for mod in numpy:numpy pytest:pytest xdist:pytest-xdist nvidia.cuda_nvrtc:nvidia-cuda-nvrtc-cu12 \
           nvidia.cuda_runtime:nvidia-cuda-runtime-cu12; do
    "$PY" -c "import ${mod%%:*}" 2>/dev/null || need+=("${mod#*:}")
done
if [ ${#need[@]} -gt 0 ]; then
    WHEELS=$ROOT/.gpu_wheels
    if ! ls "$WHEELS"/*.whl >/dev/null 2>&1; then
        say "missing ${need[*]} and no wheels in .gpu_wheels/ (run scripts/gpu_wheels.sh where PyPI is reachable, then carry .gpu_wheels)"
        exit 2
    fi
    say "installing ${need[*]} from .gpu_wheels/ into .gpu-site/"
    PIP=("$PY" -m pip)
    "$PY" -m pip --version >/dev/null 2>&1 || PIP=("$PY" "$(ls "$WHEELS"/pip-*.whl | head -1)/pip")
    "${PIP[@]}" install --quiet --no-index --find-links "$WHEELS" --target "$SITE" \
        --disable-pip-version-check "${need[@]}" || { say "pip install failed"; exit 2; }
fi

# -- 1. runtime tests + conformance on the GPU --------------------------------------------------
RES=$ROOT/benchmarks/results
[[ $GPU == none* ]] && RES=${TMPDIR:-/tmp}/rlx-gpu-check  # a dry run's files are not results
mkdir -p "$RES"
SLUG=$("$PY" - <<'PYEOF'
import re
try:
    from rlx_core.targets.registry import get_target
    print(re.sub(r"[^a-z0-9]+", "-", get_target("cuda").runtime.device().info.name.lower()).strip("-"))
except Exception:
    print("no-gpu")
PYEOF
)
CONF=$RES/gpu_check-$SLUG-conformance.txt
say "conformance on the GPU -> ${CONF#$ROOT/}"
JOBS=$("$PY" -c "import os; print(min(8, max(1, len(os.sched_getaffinity(0)) // 2)))")
timeout 300 "$PY" -m pytest tests/targets/test_cuda_runtime.py tests/targets/test_gpu_int8.py \
    tests/conformance -k cuda \
    -q -rs -p no:cacheprovider -n "$JOBS" >"$CONF" 2>&1
CONF_RC=$?
tail -5 "$CONF"

# -- 2. MiniLM, MLP step, timings -----------------------------------------------------------
timeout 180 "$PY" benchmarks/gpu_check.py --out "$RES"
MODEL_RC=$?
if [ -n "$OUT" ]; then
    mkdir -p "$OUT" && cp "$RES"/gpu_check-"$SLUG"* "$OUT"/ 2>/dev/null
fi
say "conformance exit $CONF_RC, models exit $MODEL_RC"
if [[ $GPU == none* ]]; then exit 77; fi
[ $CONF_RC -eq 0 ] && [ $MODEL_RC -eq 0 ]
