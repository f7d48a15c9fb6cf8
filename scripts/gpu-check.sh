#!/usr/bin/env bash
# On a machine with an NVIDIA GPU and driver: builds, then runs in one go every GPU-labelled
# test, the demo, the launch-bound shapes (launch cost with and without the shim, alone and
# shared; the calls it adds are counted on the simulated driver, which counts every call) and
# every bundled benchmark scenario (reduced form) against the real driver,
# and prints a short record of what the GPU is.
# Everything it prints is also written to $OUT (or ./gpu-check-out) for the record.
# It never changes the GPU's settings (no nvidia-smi -c/-mig/-pm calls).
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-gpu-check-out}
mkdir -p "$out"
build=${GPUSLICE_BUILD_DIR:-build-gpu}
{
  echo "== gpu-check $(date -u +%FT%TZ)"
  nvidia-smi --query-gpu=name,uuid,driver_version,memory.total,mig.mode.current,compute_mode --format=csv 2>&1
  scripts/install-deps.sh
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null && cmake --build "$build" -j"$(nproc)" 2>&1 | tail -3
  echo "== GPU-labelled tests"
  (cd "$build" && ctest -L gpu --output-on-failure -V 2>&1 | grep -vE '^[0-9]+: (Note|Test command|Working)')
  echo "== simulator tests on this machine too"
  (cd "$build" && ctest -L sim -j"$(nproc)" 2>&1 | tail -4)
  echo "== demo on the real GPU"
  "$build/bin/gpuslice-bench" inference-beside-training --real-gpu --modes solo,unmanaged,gpuslice,mps --duration 8 \
    --table brief --report "$out/demo"
  echo "== launch-bound shapes on the real GPU: launches per second with and without gpuslice, alone and shared"
  "$build/bin/gpuslice-bench" launch-bound --real-gpu --duration 4 --report "$out/report"
  echo "== the same shapes on the simulated driver with its call costs: the driver calls gpuslice adds per launch"
  "$build/bin/gpuslice-bench" launch-bound --duration 2 --report "$out/report-sim"
  echo "== every bundled scenario on the real GPU, reduced form (reports in $out/report)"
  "$build/bin/gpuslice-bench" all --real-gpu --quick --report "$out/report"
} 2>&1 | tee "$out/gpu-check.log"
