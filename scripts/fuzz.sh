#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/, with clang, ASan + UBSan, in build-fuzz) and runs each for
# a bounded time over its seed corpus (fuzz/corpus/<name>; what a run discovers goes to a scratch
# directory, never into the repository). A crash, leak, sanitizer report or hang (an input that
# takes over 10 s) fails the script, and the input that did it is left in build-fuzz/artifacts.
#   scripts/fuzz.sh [seconds per target, default 30] [target ...]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-30}
shift || true
targets=("$@")
((${#targets[@]})) || targets=(quantity_fuzzer memory_limit_fuzzer options_fuzzer state_file_fuzzer pods_file_fuzzer
  pod_resources_fuzzer dra_claim_fuzzer)
scripts/install-deps.sh
build=build-fuzz
CC=clang CXX=clang++ cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGPUSLICE_FUZZ=ON \
  -DGPUSLICE_BUILD_TESTS=OFF -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" \
  -DGPUSLICE_BUILD_ONLY="$(IFS=';'; echo "${targets[*]}")" >/dev/null
cmake --build "$build" -j"$(nproc)" --target gpuslice_build_only  # the targets, in parallel
mkdir -p "$build/artifacts"
# One target's run: new inputs go to its scratch corpus (first directory); the seeds are read only.
run_target() {
  local target=$1 name=${1%_fuzzer} scratch dict=()
  scratch=$(mktemp -d)
  [ -f "fuzz/$name.dict" ] && dict=(-dict="fuzz/$name.dict")
  local rc=0
  "$build/fuzz/$target" "$scratch" "fuzz/corpus/$name" "${dict[@]}" -max_total_time="$seconds" -timeout=10 \
    -max_len=4096 -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$build/artifacts/$target-" \
    2>"$build/artifacts/$target.log" || rc=$?
  rm -rf "$scratch"
  return $rc
}
# The targets run side by side, one per core (each is one single-threaded process): the pass
# takes about seconds × targets / cores, not seconds × targets.
jobs=$(nproc)
pids=() names=()
status=0
report() {  # waits for the oldest running target and reports it
  local rc=0
  wait "${pids[0]}" || rc=$?
  local target=${names[0]}
  pids=("${pids[@]:1}") names=("${names[@]:1}")
  if ((rc)); then
    echo "fuzz: $target FAILED (exit $rc); its input is in $build/artifacts/$target-*:"
    tail -40 "$build/artifacts/$target.log"
    status=1
  else
    echo "fuzz: $target ran ${seconds}s: $(grep -E '^stat::number_of_executed_units|^stat::peak_rss_mb' \
      "$build/artifacts/$target.log" | tr '\n' ' ')"
  fi
}
for target in "${targets[@]}"; do
  ((${#pids[@]} < jobs)) || report
  run_target "$target" &
  pids+=($!) names+=("$target")
done
while ((${#pids[@]})); do report; done
((status == 0)) || exit 1
echo "fuzz: every target ran ${seconds}s without a finding"
