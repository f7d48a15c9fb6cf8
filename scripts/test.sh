#!/usr/bin/env bash
# README command 2: installs what is missing, builds, and runs every test (CPU only: the
# simulated GPU). GPU-labelled tests report themselves skipped without a GPU. Ends with each
# skipped test and its reason, and a last line "N passed, N failed, N skipped" (CI reads it);
# exits non-zero when a test failed. Arguments go to ctest (e.g. -L shim, -LE timing).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
build=${GPUSLICE_BUILD_DIR:-build}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j"$(nproc)"
junit=$(cd "$build" && pwd)/Testing/ctest-junit.xml
rm -f "$junit"
status=0
(cd "$build" && ctest --output-on-failure -j"$(nproc)" --timeout 600 --output-junit "$junit" "$@") || status=$?
echo
scripts/ctest-summary.py "$junit" || status=$((status ? status : 1))  # a failure ctest did not report
exit "$status"
