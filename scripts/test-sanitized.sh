#!/usr/bin/env bash
# Every test under a sanitizer: `address` (ASan + UBSan, built in build-asan) or `thread` (TSan,
# built in build-tsan). The tests pass the sanitizer's options and suppressions (tests/lsan.supp,
# tests/tsan.supp) to every process they start. Extra arguments go to ctest. With
# GPUSLICE_SANITIZED_TARGETS (space-separated build targets, e.g. some test programs), only those
# are built: pair it with a ctest -R that selects their tests, or -E '_NOT_BUILT' (a program not
# built is listed by ctest as one test <program>_NOT_BUILT that fails).
# Ends with the counts, as scripts/test.sh does.
set -euo pipefail
cd "$(dirname "$0")/.."
flags=()
case "${1:-}" in
  # Line tables only (-g1): enough for the reports' stack traces, and with UBSan full debug
  # information doubles the build time. -O1, as the sanitizers' own docs advise: the build is
  # the longest part of the pass (UBSan's checks make -O2 slow to compile), and the reports are
  # the same.
  address) build=build-asan flags=(-DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG") ;;
  thread) build=build-tsan flags=(-DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG") ;;
  *) echo "usage: scripts/test-sanitized.sh address|thread [ctest arguments]" >&2; exit 2 ;;
esac
sanitizer=$1
shift
scripts/install-deps.sh
# The selected targets are built through one target that depends on them all (GPUSLICE_BUILD_ONLY
# in CMakeLists.txt), so they build in parallel; an empty list builds everything.
only=$(echo ${GPUSLICE_SANITIZED_TARGETS:-} | tr ' ' ';')
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGPUSLICE_SANITIZE="$sanitizer" "${flags[@]}" \
  -DGPUSLICE_BUILD_ONLY="$only" >/dev/null
targets=()
[ -n "$only" ] && targets=(--target gpuslice_build_only)
cmake --build "$build" -j"$(nproc)" "${targets[@]}"
junit=$(cd "$build" && pwd)/Testing/ctest-junit.xml
rm -f "$junit"
status=0
(cd "$build" && ctest --output-on-failure -j"$(nproc)" --timeout 600 --output-junit "$junit" "$@") || status=$?
echo
# Each skipped test with its reason, then "N passed, N failed, N skipped" (as scripts/test.sh).
scripts/ctest-summary.py "$junit" || status=$((status ? status : 1))
exit "$status"
