#!/usr/bin/env bash
# README command 1: installs what is missing, builds, and runs the demo: two tenants sharing
# one GPU with no sharing layer (the baseline gpuslice exists to fix), on the simulated GPU
# unless a real NVIDIA driver is present.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
build=${GPUSLICE_BUILD_DIR:-build}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j"$(nproc)" --target gpuslice-workload gpuslice-sim gpuslice_sim_cuda gpuslice_sim_nvml
exec python3 scripts/demo.py --build "$build" "$@"
