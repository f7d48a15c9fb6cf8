#!/usr/bin/env bash
# The measurements of docs/results/2026-12-06-placement-generalisation.md, as one Markdown file:
# FGD-BF-M and FGD-BF-G against FGD on 20 random clusters (the evaluation set, cluster seed 1000)
# and on the 10 clusters and 9 lists FGD-BF-G's terms were chosen on (the tuning set, cluster seed
# 2000), each with the artifact's all-node list; FGD-BF-G against FGD on 20 more random clusters
# drawn after its terms were fixed (the fresh set, cluster seed 3000, 2 seeds a cell); then
# FGD-BF-G against FGD and against FGD-BF-M on the trace's own cluster, every openb list, with the
# FIFO replay.
#
#   scripts/place-generalisation-report.sh DATA_DIR [OUT_DIR]
#
# DATA_DIR is the FGD artifact's data/csv (read in place). Environment: PLACE (the binary, default
# build/bin/gpuslice-place), EVAL_SEED (1000), TUNE_SEED (2000), FRESH_SEED (3000), JOBS (2).
# Progress goes to stderr, the report to stdout and OUT_DIR/report.md; each part's runs stay in
# OUT_DIR, and a rerun with the same OUT_DIR reuses the random clusters' runs and the trace
# cluster's reports already written (delete OUT_DIR/openb*.md after changing the binary). On a
# 2-core machine it takes about two hours, most of it the evaluation set.
set -euo pipefail
data=${1:?usage: $0 DATA_DIR [OUT_DIR]}
out=${2:-/tmp/place-generalisation-report}
place=${PLACE:-build/bin/gpuslice-place}
eval_seed=${EVAL_SEED:-1000}
tune_seed=${TUNE_SEED:-2000}
fresh_seed=${FRESH_SEED:-3000}
jobs=${JOBS:-2}
tune_lists=default,cpu050,cpu300,gpushare40,gpushare100,gpuspec10,gpuspec33,multigpu20,multigpu50
mkdir -p "$out"
random="scripts/place-random-clusters.py $data --place $place --jobs $jobs --ours FGD-BF-M,FGD-BF-G --resume"
eval_args="--cluster-seed $eval_seed --out $out/eval"
tune_args="--cluster-seed $tune_seed --clusters 10 --seeds 2 --lists $tune_lists --out $out/tune"
$random $eval_args >"$out/eval.md"
$random $tune_args >"$out/tune.md"
fresh="scripts/place-random-clusters.py $data --place $place --jobs $jobs --ours FGD-BF-G --clusters 10 --seeds 2 --no-all-node"
$fresh --resume --cluster-seed "$fresh_seed" --out "$out/fresh" >"$out/fresh.md"
# The trace's cluster: a report already in OUT_DIR is kept (place-generalisation.sh has no resume).
trace_report() {  # NAME BASE
  [[ -s $out/$1.md ]] && return
  PLACE=$place JOBS=$jobs BASE=$2 OURS=FGD-BF-G scripts/place-generalisation.sh "$data" "$out/$1" >"$out/$1.md.tmp"
  mv "$out/$1.md.tmp" "$out/$1.md"
}
trace_report openb FGD
trace_report openb-m FGD-BF-M
{
  echo "## Random clusters: the evaluation set"
  echo
  echo '```sh'
  echo "scripts/place-random-clusters.py DATA_DIR --ours FGD-BF-M,FGD-BF-G --cluster-seed $eval_seed"
  echo '```'
  echo
  cat "$out/eval.md"
  echo
  echo "## Random clusters: the tuning set (where FGD-BF-G's terms were chosen)"
  echo
  echo '```sh'
  echo "scripts/place-random-clusters.py DATA_DIR --ours FGD-BF-M,FGD-BF-G --cluster-seed $tune_seed --clusters 10 \\"
  echo "    --seeds 2 --lists $tune_lists"
  echo '```'
  echo
  cat "$out/tune.md"
  echo
  echo "## Random clusters: the fresh set (drawn after FGD-BF-G's terms were fixed)"
  echo
  echo '```sh'
  echo "scripts/place-random-clusters.py DATA_DIR --ours FGD-BF-G --clusters 10 --seeds 2 --no-all-node --cluster-seed $fresh_seed"
  echo '```'
  echo
  cat "$out/fresh.md"
  echo
  echo "## The trace's cluster: FGD-BF-G against FGD"
  echo
  echo '```sh'
  echo "OURS=FGD-BF-G scripts/place-generalisation.sh DATA_DIR"
  echo '```'
  echo
  cat "$out/openb.md"
  echo
  echo "## The trace's cluster: FGD-BF-G against FGD-BF-M"
  echo
  echo '```sh'
  echo "BASE=FGD-BF-M OURS=FGD-BF-G scripts/place-generalisation.sh DATA_DIR"
  echo '```'
  echo
  cat "$out/openb-m.md"
} | tee "$out/report.md"
