#!/usr/bin/env bash
# README command 2: installs what is missing, builds, and runs every test (CPU only: the
# simulated GPU). GPU-labelled tests report themselves skipped without a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
build=${GPUSLICE_BUILD_DIR:-build}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j"$(nproc)"
cd "$build"
ctest --output-on-failure -j"$(nproc)" --timeout 600 "$@"
