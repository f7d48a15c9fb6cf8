#!/usr/bin/env bash
# Product code never includes the simulator's or the tests' headers: shim/, broker/, common/,
# gpu/, ctl/, deviceplugin/, dra/, exporter/ and place/ may include each other, never sim/,
# tests/ or the simulator's public header (gpuslice/sim_query.h). The link graph is checked at
# configure time (cmake/CheckLayering.cmake). Prints each offending line; exits 1 when there is
# one. Run by ctest (LayeringCheck) and by hand: scripts/check-layering.sh [SOURCE_DIR].
set -euo pipefail
cd "${1:-$(dirname "$0")/..}"
dirs=()
for d in shim broker common gpu ctl deviceplugin dra exporter place; do
  [ -d "$d" ] && dirs+=("$d")
done
if found=$(grep -rnE '^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"](sim/|tests/|gpuslice/sim_query\.h)' \
             --include='*.h' --include='*.cc' --include='*.inc' "${dirs[@]}"); then
  echo "gpuslice layering: product code includes the simulator or the tests (move what it needs to gpu/ or common/):"
  echo "$found"
  exit 1
fi
echo "gpuslice layering: ${#dirs[@]} product folders include nothing of sim/ or tests/"
