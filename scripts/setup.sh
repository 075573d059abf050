#!/usr/bin/env bash
# Idempotent setup shared by the README's two commands: system packages, the virtual
# environment and the Python packages. Safe to re-run; does nothing that is already done.
set -euo pipefail
cd "$(dirname "$0")/.."

# Debian packages the tool chain and tests use (installed only when missing; needs root or sudo).
# mesa-vulkan-drivers: lavapipe, the Vulkan device the webgpu target runs on without a GPU;
# chromium: the browser tests (Playwright drives the system browser, never a downloaded one).
APT_PACKAGES=(python3-venv python3-dev gcc graphviz mesa-vulkan-drivers chromium)
# The device family's real toolchains, drivers and emulators (docs/targets.md says which target
# uses which): Vulkan/SPIR-V, OpenGL (EGL, llvmpipe), OpenCL (PoCL), clang (Hexagon), HIP,
# Cortex-M (arm-none-eabi + newlib, QEMU), FPGA (Verilator, yosys, nextpnr, icestorm).
APT_PACKAGES+=(libvulkan1 glslang-tools glslang-dev spirv-tools libegl-mesa0 libegl1 libgl1-mesa-dri)
APT_PACKAGES+=(pocl-opencl-icd ocl-icd-opencl-dev clang lld hipcc)
APT_PACKAGES+=(gcc-arm-none-eabi libnewlib-arm-none-eabi qemu-system-arm qemu-user)
APT_PACKAGES+=(verilator yosys nextpnr-ice40 fpga-icestorm)
missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
# Node.js/npm (the Pyodide runtime and the JupyterLab extension come from the npm registry):
# Debian's packages, only when no node is on the PATH already (never replace a newer one).
if ! command -v npm >/dev/null 2>&1; then
  missing+=(nodejs npm)
fi
if [ ${#missing[@]} -gt 0 ] && command -v apt-get >/dev/null 2>&1; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  echo "setup: installing Debian packages: ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv"
  "$PY" -m venv .venv
fi
# Reinstall only when the project's dependency list changed.
stamp=.venv/.rlx-installed
want=$(sha256sum pyproject.toml | cut -d' ' -f1)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "setup: installing Python packages"
  .venv/bin/python -m pip install -q --upgrade pip >/dev/null
  .venv/bin/python -m pip install -q -e '.[dev]'
  echo "$want" > "$stamp"
fi

# Jupyter: kernels of the venv load rlx_explorer (%%rlx without %load_ext), and the prebuilt
# JupyterLab extension is linked in, so saved explorer outputs render (editable installs skip it).
.venv/bin/python scripts/notebook_setup.py --prefix .venv >/dev/null

# The Pyodide core for the browser WebGPU tests (npm package, into a git-ignored folder; once).
if [ ! -f build/pyodide-npm/node_modules/pyodide/pyodide.mjs ] && command -v npm >/dev/null 2>&1; then
  echo "setup: installing the npm package pyodide (314.0.x)"
  mkdir -p build/pyodide-npm
  (cd build/pyodide-npm && npm install --no-audit --no-fund --silent "pyodide@~314.0.0") ||
    echo "setup: npm install pyodide failed; the browser WebGPU test will skip" >&2
fi
