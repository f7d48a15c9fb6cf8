#!/usr/bin/env bash
# README command 1: installs what is missing, builds, and runs the demo scenario: an inference
# service beside a trainer that also grabs memory, unmanaged (no sharing layer) and under
# gpuslice, each tenant also alone as the baseline; about a minute. Prints who got what share
# of the GPU, the service's p99 latency and the refused allocations, and writes a report folder
# (report/inference-beside-training/). On the simulated GPU unless --real-gpu is given; any
# other option goes to gpuslice-bench (--duration 30, --report DIR, ...).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
build=${GPUSLICE_BUILD_DIR:-build}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j"$(nproc)" --target gpuslice-bench
where=--sim
for arg in "$@"; do
  [ "$arg" = --real-gpu ] && where=
done
exec "$build/bin/gpuslice-bench" bench/scenarios/inference-beside-training.yaml \
  --modes solo,unmanaged,gpuslice --duration 12 --table brief $where "$@"
