#!/usr/bin/env bash
# The compute core's figures, in one run: what the launch path costs with the simulated driver
# charging real per-call costs (`gpuslice-bench launch-bound`, the default and the double
# profile), the latency class on randomly drawn pairs (`gpuslice-bench latency-sweep`, three
# seeds, fresh unless given), the README demo five times (the latency service's p99 and the
# device's busy time against unmanaged), and the shim's own cost per call against the null
# driver (`shim_overhead_bench`). About two hours on a 2-core machine (a sweep's pair takes
# 20-50 s): run it with nothing else running, or the figures measure the machine's load.
#
#   scripts/compute-core-figures.sh [--seeds "S1 S2 S3"] [--pairs N] [--demo-runs N] [--out DIR]
#
# Writes every tool's report under DIR (default report/compute-core/) and prints the summaries.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${GPUSLICE_BUILD_DIR:-build}
out=report/compute-core
seeds=
pairs=40
demo_runs=5
while [ $# -gt 0 ]; do
  case $1 in
    --seeds) seeds=$2; shift 2 ;;
    --pairs) pairs=$2; shift 2 ;;
    --demo-runs) demo_runs=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    -h | --help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "compute-core-figures: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
if [ -z "$seeds" ]; then
  seeds="$(for _ in 1 2 3; do od -An -N4 -tu4 /dev/urandom | tr -d ' ' | awk '{print $1 % 2147483647 + 1}'; done)"
fi
for tool in gpuslice-bench shim_overhead_bench; do
  if [ ! -x "$build/bin/$tool" ]; then
    echo "compute-core-figures: $build/bin/$tool is not built (cmake --build $build)" >&2
    exit 2
  fi
done
mkdir -p "$out"
bench="$build/bin/gpuslice-bench"
step() { printf '\n=== %s (%s)\n' "$1" "$(date -u +%H:%M:%S)"; }

step "machine"
{ uname -srm; nproc; grep -m1 'model name' /proc/cpuinfo || true; uptime; git log -1 --format='%h %s' | cut -c1-100; } |
  tee "$out/machine.txt"

for costs in default double; do
  step "launch-bound, call costs $costs"
  "$bench" launch-bound --costs "$costs" --repeats 3 --quiet --report "$out/$costs" | tee "$out/launch-bound-$costs.txt"
done

for seed in $seeds; do
  step "latency-sweep, seed $seed"
  "$bench" latency-sweep --seed "$seed" --pairs "$pairs" --quiet --report "$out" |
    tee "$out/latency-sweep-$seed.txt"
done

step "the README demo, $demo_runs runs"
for run in $(seq 1 "$demo_runs"); do
  "$bench" bench/scenarios/inference-beside-training.yaml --sim --modes solo,unmanaged,gpuslice --duration 12 \
    --table brief --report "$out/demo-$run" >"$out/demo-$run.txt" 2>&1
  printf 'run %s: ' "$run"
  grep -E 'p99|busy' "$out/demo-$run.txt" | tr -s ' ' | paste -sd ';' -
done

step "shim_overhead_bench, null driver"
for args in "" "--gpuslice-tracked"; do
  LD_LIBRARY_PATH="$build/nulldriver" "$build/bin/shim_overhead_bench" $args \
    --benchmark_filter='LaunchKernel' --benchmark_repetitions=5 --benchmark_report_aggregates_only=true \
    2>&1 | tee "$out/overhead${args:+-tracked}.txt" | grep -E 'median' || true
done
printf '\nreports: %s/\n' "$out"
