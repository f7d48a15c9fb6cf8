#!/usr/bin/env bash
# Every test under a sanitizer: `address` (ASan + UBSan, built in build-asan) or `thread` (TSan,
# built in build-tsan). The tests pass the sanitizer's options and suppressions (tests/lsan.supp,
# tests/tsan.supp) to every process they start. Extra arguments go to ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in
  address) build=build-asan ;;
  thread) build=build-tsan ;;
  *) echo "usage: scripts/test-sanitized.sh address|thread [ctest arguments]" >&2; exit 2 ;;
esac
sanitizer=$1
shift
scripts/install-deps.sh
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGPUSLICE_SANITIZE="$sanitizer" >/dev/null
cmake --build "$build" -j"$(nproc)"
cd "$build"
ctest --output-on-failure -j"$(nproc)" --timeout 600 "$@"
