#!/usr/bin/env bash
# README command 2: installs what is missing, builds, and runs every test (CPU only: the
# simulated GPU). GPU-labelled tests report themselves skipped without a GPU. Ends with each
# skipped test and its reason, and a last line "N passed, N failed, N skipped" (CI reads it);
# exits non-zero when a test failed. Arguments go to ctest (e.g. -L shim, -LE timing, -R Suite).
#
# Two ctest runs: every test but the `timing` ones, in parallel; then the `timing` ones (shares
# of device time and latencies measured on real processes), one at a time, each allowed three
# attempts. Their bounds hold on a quiet machine with margin, but one stall of the host (another
# VM's burst on a shared 2-core runner) can push one request's latency past them; a policy that is
# broken fails every attempt (scripts/mutation-check.sh runs them once). Each test that needed a
# second attempt is named in the summary.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
build=${GPUSLICE_BUILD_DIR:-build}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j"$(nproc)"
results=$(cd "$build" && pwd)/Testing
mkdir -p "$results"
rm -f "$results"/ctest-junit*.xml "$results"/timing-attempts.log
status=0
(cd "$build" && ctest --output-on-failure -j"$(nproc)" --timeout 600 -LE timing \
  --output-junit "$results/ctest-junit.xml" "$@") || status=$?
(cd "$build" && ctest --output-on-failure --timeout 600 -L timing --repeat until-pass:3 \
  --output-junit "$results/ctest-junit-timing.xml" "$@") 2>&1 | tee "$results/timing-attempts.log" ||
  status=$((status ? status : 1))  # pipefail: ctest's status, not tee's
echo
# A failure ctest did not report (a missing program) still counts.
scripts/ctest-summary.py --retry-log "$results/timing-attempts.log" "$results"/ctest-junit*.xml ||
  status=$((status ? status : 1))
exit "$status"
