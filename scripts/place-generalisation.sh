#!/usr/bin/env bash
# Every openb pod list of the FGD artifact at 50, 70, 90, 100, 110 and 130% arrived GPU demand,
# FGD against ours, 10 seeds each, then FGD against ours in the FIFO replay; prints a Markdown
# report (docs/results/2026-12-02-placement-generalisation.md and -12-06- were made with it).
#
#   scripts/place-generalisation.sh DATA_DIR [OUT_DIR]
#
# DATA_DIR holds openb_node_list_gpu_node.csv and openb_pod_list_*.csv (the artifact's data/csv;
# read in place, never copied into the repository). Environment: PLACE (the binary, default
# build/bin/gpuslice-place), OURS (default FGD-BF-G), BASE (default FGD), SEEDS (10), JOBS (2),
# LEVELS (50,70,90,100,110,130), REPLAY_SEEDS (10). The replay runs on every list with the
# trace's times (the 11-column ones; not multigpu*). Progress goes to stderr, the report to stdout and OUT_DIR/report.md.
set -euo pipefail
data=${1:?usage: $0 DATA_DIR [OUT_DIR]}
out=${2:-/tmp/place-generalisation}
place=${PLACE:-build/bin/gpuslice-place}
ours=${OURS:-FGD-BF-G}
base=${BASE:-FGD}
seeds=${SEEDS:-10}
jobs=${JOBS:-2}
levels=${LEVELS:-50,70,90,100,110,130}
replay_seeds=${REPLAY_SEEDS:-10}
nodes=$data/openb_node_list_gpu_node.csv
[[ -x $place ]] || { echo "$0: $place not built (cmake --build build --target gpuslice-place)" >&2; exit 2; }
[[ -f $nodes ]] || { echo "$0: $nodes missing: DATA_DIR must be the artifact's data/csv" >&2; exit 2; }
mkdir -p "$out"
lists=()
for f in "$data"/openb_pod_list_*.csv; do lists+=("$(basename "$f" .csv | sed 's/^openb_pod_list_//')"); done
start=$SECONDS
i=0
for list in "${lists[@]}"; do
  i=$((i + 1))
  printf '\r%s: %d/%d %-12s %4d s' "$(basename "$0")" "$i" "${#lists[@]}" "$list" $((SECONDS - start)) >&2
  "$place" --nodes "$nodes" --pods "$data/openb_pod_list_$list.csv" --policies "$base,$ours" --seeds "$seeds" \
    --jobs "$jobs" --quiet --no-chart --out "$out/$list" >/dev/null 2>"$out/$list.stderr"
done
replay_lists=()
for list in "${lists[@]}"; do
  head -1 "$data/openb_pod_list_$list.csv" | grep -q creation_time && replay_lists+=("$list")
done
replay_rows=""
for list in "${replay_lists[@]}"; do
  printf '\r%s: replay %-12s %4d s      ' "$(basename "$0")" "$list" $((SECONDS - start)) >&2
  "$place" --nodes "$nodes" --pods "$data/openb_pod_list_$list.csv" --policies "$base,$ours" --seeds "$replay_seeds" \
    --jobs "$jobs" --quiet --no-chart --replay --replay-speedup 1000 --replay-duration-scale 100 \
    --out "$out/replay-$list" >/dev/null 2>"$out/replay-$list.stderr"
  # The summary's columns: Policy, Seeds, Mean wait, p95 wait, Big-job mean wait, ...
  replay_rows+=$(awk -F'|' -v list="$list" -v base="$base" -v ours="$ours" '
    { gsub(/ /, "", $2) } $2 == base { bw = $4; bb = $6 } $2 == ours { ow = $4; ob = $6 }
    END { gsub(/ /, "", bw); gsub(/ /, "", ow); gsub(/ /, "", bb); gsub(/ /, "", ob)
          print "| " list " | " bw " | " (ow + 0 > bw + 0 ? "**" ow "**" : ow) " | " bb " | " (ob + 0 > bb + 0 ? "**" ob "**" : ob) " |" }' \
    "$out/replay-$list/replay-summary.md")$'\n'
done
elapsed=$((SECONDS - start))
printf '\r%s: done in %d s%30s\n' "$(basename "$0")" "$elapsed" "" >&2
{
  echo "Unallocated GPU % (of the cluster's GPUs) when arrived GPU demand reaches each level; mean of $seeds seeds;"
  echo "$base / $ours; **bold** where $ours is above $base by more than 0.05 points."
  echo
  header="| List |"; rule="|---|"
  for l in ${levels//,/ }; do header+=" $l% |"; rule+="---:|"; done
  echo "$header ours ≤ base at | seeds ours < base at 100% |"; echo "$rule---:|---:|"
  for list in "${lists[@]}"; do
    awk -F, -v base="$base" -v ours="$ours" -v levels="$levels" -v list="$list" '
      NR == 1 { next }
      $5 !~ /^-?[0-9.]+$/ { next }  # a level no arrival fell near (a tiny cluster): no value
      { key = $1 SUBSEP $3; sum[key] += $5; n[key]++; if ($3 == 100) at100[$1, $2] = $5 }
      END {
        k = split(levels, L, ","); row = "| " list " |"; ok = 0; valid = 0
        for (j = 1; j <= k; j++) {
          if (!n[base, L[j]] || !n[ours, L[j]]) { row = row " – |"; continue }
          valid++
          b = sum[base, L[j]] / n[base, L[j]]; o = sum[ours, L[j]] / n[ours, L[j]]
          cell = sprintf("%.2f / %.2f", b, o)
          if (o > b + 0.05) cell = "**" cell "**"; else ok++
          row = row " " cell " |"
        }
        wins = 0; seeds = 0
        for (key in at100) { split(key, p, SUBSEP); if (p[1] == base) { seeds++; if (at100[ours, p[2]] < at100[key]) wins++ } }
        print row " " ok " of " valid " | " wins " of " seeds " |"
      }' "$out/$list/metrics.csv"
  done
  echo
  if [[ -n $replay_rows ]]; then
    echo "FIFO replay (\`--replay --replay-speedup 1000 --replay-duration-scale 100 --seeds $replay_seeds\`), mean wait in"
    echo "seconds, $base / $ours; **bold** where $ours waits longer:"
    echo
    echo "| List | all pods: $base | $ours | big jobs (≥ 4 GPUs): $base | $ours |"
    echo "|---|---:|---:|---:|---:|"
    printf '%s' "$replay_rows"
    echo
  fi
  echo "Wall time: $elapsed s ($(nproc) CPUs, --jobs $jobs, load average $(cut -d' ' -f1 /proc/loadavg) at the end)."
  warnings=$(for list in "${lists[@]}"; do sed "s#$data/##" "$out/$list.stderr"; done)
  if [[ -n $warnings ]]; then
    echo
    echo "Pods no node can hold (gpuslice-place's warnings):"
    echo
    sed 's/^/- /' <<<"$warnings"
  fi
} | tee "$out/report.md"
