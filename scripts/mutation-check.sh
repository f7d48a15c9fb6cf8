#!/usr/bin/env bash
# Does the suite notice when gpuslice stops doing what it promises? Copies the tree to a scratch
# directory, applies one deliberate sabotage at a time to the copy, rebuilds, runs the tests that
# should notice, and reports which of them failed — the tests that "catch" the sabotage. Every
# sabotage must be caught by at least one test.
#
# The sabotages are listed in scripts/sabotages.txt: for each, what it breaks, the tests that
# should catch it and its edit, a perl substitution applied to one line of code, the line below
# the comment `// sabotage-point: NAME`, wherever in the C and C++ sources (but tests/) that line
# now is. Every run first checks the markers against the list, and stops, naming each, on a
# marker missing, a marker with no entry in the list, two markers of one name, or an edit that
# leaves its line as it was.
#
# Not part of CI: it rebuilds once per sabotage and runs timing-sensitive tests; expect an hour
# for the whole list on 2 cores (the recorded runs in docs/results/ say what was run).
#
#   scripts/mutation-check.sh [--list] [--dry-run] [--jobs N] [--scratch DIR] [--no-baseline]
#                             [--tests REGEX] [NAME...]
#
#   NAME...        only these sabotages (default: all; --list shows them)
#   --dry-run      only check the markers and the edits, and show each edit (no build); the
#                  ctest SabotageMarkersCheck
#   --scratch DIR  where the copy and its build go (default: $TMPDIR/gpuslice-mutation; kept, so
#                  that a second run rebuilds little)
#   --no-baseline  skip the run of the same tests on the unsabotaged copy (a test that fails
#                  there proves nothing when it fails under a sabotage)
#   --tests REGEX  run these tests (a ctest -R regex) for every sabotage instead of its own list:
#                  a quicker check that one test notices
#
# Exit status: 0 when every sabotage selected was applied and caught; 1 when one was not, or when
# the markers and the list disagree; 2 on a bad command line; 77 (ctest's skip) when the tree is
# not a git checkout, where the markers cannot be searched (git grep).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
scratch=${TMPDIR:-/tmp}/gpuslice-mutation
jobs=2
baseline=1
list=0
dry_run=0
only_tests=
selected=()
while (($#)); do
  case $1 in
    --list) list=1 ;;
    --dry-run) dry_run=1 ;;
    --jobs) jobs=$2; shift ;;
    --scratch) scratch=$2; shift ;;
    --no-baseline) baseline=0 ;;
    --tests) only_tests=$2; shift ;;
    -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
    -*) echo "mutation-check: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) selected+=("$1") ;;
  esac
  shift
done

# ---------------------------------------------------------------------------------------------
# The list, scripts/sabotages.txt (its header says how it is written). Sabotage i: names[i],
# whys[i], tests[i] (ctest names or their beginnings, A|B|C) and points[i], the indexes of its
# edits. Edit j: point_names[j], the marker it applies to (NAME or NAME.SITE); point_edits[j], its
# perl substitution; point_at[j], where the list gives it; point_files[j] and point_lines[j], where
# its marker is (filled in by find_markers).
list_file=scripts/sabotages.txt
names=() whys=() tests=() points=()
point_names=() point_edits=() point_at=() point_files=() point_lines=()
declare -A point_index=()
problems=()

read_list() {
  local n=0 i=-1 line at point other continues=0
  local name_re='^([a-z0-9][a-z0-9-]*)$'
  local field_re='^  (why|tests) +(.*[^ ]) *$'
  local edit_re='^  edit(\.[a-z0-9][a-z0-9-]*)? +(.*[^ ]) *$'
  local more_re='^    +(.*[^ ]) *$'
  while IFS= read -r line || [[ -n $line ]]; do
    n=$((n + 1)) at="$list_file:$n"
    if [[ $line =~ ^[[:space:]]*(#.*)?$ ]]; then
      continues=0
    elif [[ $line =~ $name_re ]]; then
      for other in "${names[@]}"; do
        [[ $other == "${BASH_REMATCH[1]}" ]] && problems+=("$at: a second sabotage named $other")
      done
      i=${#names[@]} continues=0
      names+=("${BASH_REMATCH[1]}") whys+=("") tests+=("") points+=("")
    elif ((i >= 0)) && [[ $line =~ $field_re ]]; then
      if [[ ${BASH_REMATCH[1]} == why ]]; then whys[i]=${BASH_REMATCH[2]} continues=1; else tests[i]=${BASH_REMATCH[2]} continues=0; fi
    elif ((i >= 0)) && [[ $line =~ $edit_re ]]; then
      point=${names[$i]}${BASH_REMATCH[1]} continues=0
      if [[ -n ${point_index[$point]:-} ]]; then
        problems+=("$at: a second edit of $point (the first: ${point_at[${point_index[$point]}]})")
        continue
      fi
      point_index[$point]=${#point_names[@]}
      points[i]+="${#point_names[@]} "
      point_names+=("$point") point_edits+=("${BASH_REMATCH[2]}") point_at+=("$at") point_files+=("") point_lines+=("")
    elif ((continues)) && [[ $line =~ $more_re ]]; then
      whys[i]+=" ${BASH_REMATCH[1]}"
    else
      problems+=("$at: neither a sabotage's name nor its why, tests or edit (the file's header says how): $line")
    fi
  done <"$root/$list_file"
  for i in "${!names[@]}"; do
    [[ -n ${whys[$i]} ]] || problems+=("$list_file: ${names[$i]} has no why")
    [[ -n ${tests[$i]} ]] || problems+=("$list_file: ${names[$i]} has no tests")
    [[ -n ${points[$i]} ]] || problems+=("$list_file: ${names[$i]} has no edit")
  done
}

# Every line of the C and C++ sources (*.cc, *.h, *.c, *.cpp, *.inc) of every folder but tests/, as
# git sees them (untracked files included), that names a sabotage point must be a marker on a line
# of its own, of a point the list names, and the only one of that point; every point must have one.
find_markers() {
  local hit file rest line text point j
  local marker_re='^[[:space:]]*// sabotage-point: ([a-z0-9][a-z0-9.-]*)$'
  if ! git -C "$root" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    echo "mutation-check: $root is not a git checkout: the sabotage markers are found with git grep" >&2
    exit 77
  fi
  while IFS= read -r hit; do
    file=${hit%%:*} rest=${hit#*:}
    line=${rest%%:*} text=${rest#*:}
    if ! [[ $text =~ $marker_re ]]; then
      problems+=("$file:$line: not a marker as $list_file describes it (a line of its own, \`// sabotage-point: NAME\`): $text")
      continue
    fi
    point=${BASH_REMATCH[1]} j=${point_index[${BASH_REMATCH[1]}]:-}
    if [[ -z $j ]]; then
      problems+=("$file:$line: the marker of $point, which $list_file does not list: add its entry there or remove the marker")
    elif [[ -n ${point_files[$j]} ]]; then
      problems+=("$file:$line: a second marker of $point (the first: ${point_files[$j]}:${point_lines[$j]}); a point marks one line")
    else
      point_files[j]=$file point_lines[j]=$line
    fi
  done < <(git -C "$root" grep -n -I --untracked -e 'sabotage-point' -- \
    '*.cc' '*.h' '*.c' '*.cpp' '*.inc' ':!tests' || true)
  for j in "${!point_names[@]}"; do
    [[ -n ${point_files[$j]} ]] ||
      problems+=("${point_at[$j]}: no marker \`// sabotage-point: ${point_names[$j]}\` in the C and C++ sources: put it back above the line its edit changes")
  done
}

# Prints `file` (relative to the root) with the edits given (their indexes j) applied, each to the
# line below its marker (and below any other marker stacked there). Fails, naming the point, when
# a marker is not above a line of code, an edit is not perl, or an edit leaves its line as it was.
read -r -d '' apply_edits_pl <<'PL' || true
use strict;
use warnings;
my $file = shift;
open(my $in, '<', $file) or die "mutation-check: cannot read $file: $!\n";
my @lines = <$in>;
my $failed = 0;
while (@ARGV) {
  my ($at, $point, $edit) = splice(@ARGV, 0, 3);
  my $i = $at;  # the line after the marker (line $at is $lines[$at - 1])
  $i++ while $i < @lines && $lines[$i] =~ m{^\s*// sabotage-point: };
  if ($i >= @lines || $lines[$i] !~ /\S/) {
    warn "mutation-check: $file:$at: the marker of $point is not directly above a line of code\n";
    $failed = 1;
    next;
  }
  my $apply = eval "sub { $edit }";
  if (!$apply) {
    warn "mutation-check: $point: its edit is not a perl substitution ($edit): $@";
    $failed = 1;
    next;
  }
  my ($text, $end) = $lines[$i] =~ /^(.*?)(\n?)\z/s;
  local $_ = $text;
  $apply->();
  if ($_ eq $text) {
    warn "mutation-check: $point: its edit ($edit) leaves the line it marks as it was, $file:", $i + 1, ": $text\n";
    $failed = 1;
    next;
  }
  $lines[$i] = $_ . $end;
}
exit 1 if $failed;
print @lines;
PL
apply_edits() {
  local file=$1 args=() j
  shift
  for j in "$@"; do args+=("${point_lines[$j]}" "${point_names[$j]}" "${point_edits[$j]}"); done
  perl -e "$apply_edits_pl" "$root/$file" "${args[@]}"
}
# Sets edited_files to the files sabotage i edits, and edits_in[file] to the indexes of its edits
# there (without a subshell per sabotage: --dry-run runs in the suite).
edited_files=()
declare -A edits_in=()
group_edits() {
  local j file
  edited_files=() edits_in=()
  for j in ${points[$1]}; do
    file=${point_files[$j]}
    [[ -n ${edits_in[$file]:-} ]] || edited_files+=("$file")
    edits_in[$file]+="$j "
  done
}

read_list
find_markers
if ((${#problems[@]})); then
  printf 'mutation-check: %s\n' "${problems[@]}" >&2
  echo "mutation-check: ${#problems[@]} problem(s) with the sabotages' markers or $list_file; nothing was run" >&2
  exit 1
fi

# A regex written `^(Suite|...)` also matches the suites' parameterized instances, whose names
# carry their instantiation's prefix (EveryFamily/ShimMemoryQuotaFamilyTest.X/alloc).
# tests_regex makes the ctest regex of one or several lists of alternatives (A|B|C): CMake's
# regular expressions allow only a few groups, so the union of every sabotage's tests must be one
# group, not one group per sabotage.
tests_regex() { printf '(^|/)(%s)' "$(printf '%s\n' "$@" | tr '|' '\n' | sort -u | paste -sd'|')"; }
# The ctest regex of sabotage i's tests (--tests: the one given, as it is).
regex_of() { if [[ -n $only_tests ]]; then printf '%s' "$only_tests"; else tests_regex "${tests[$1]}"; fi; }
if ((list)); then
  for i in "${!names[@]}"; do
    group_edits "$i"
    printf '%-38s %-30s %s\n' "${names[$i]}" "${edited_files[*]}" "${whys[$i]}"
  done
  exit 0
fi
chosen=()
if ((${#selected[@]})); then
  for want in "${selected[@]}"; do
    found=0
    for i in "${!names[@]}"; do [[ ${names[$i]} == "$want" ]] && { chosen+=("$i"); found=1; }; done
    ((found)) || { echo "mutation-check: no sabotage named $want (see --list)" >&2; exit 2; }
  done
else
  chosen=("${!names[@]}")
fi

if ((dry_run)); then
  status=0
  out=${TMPDIR:-/tmp}/mutation-dry.$$
  for i in "${chosen[@]}"; do
    label=${names[$i]}
    group_edits "$i"
    for file in "${edited_files[@]}"; do
      # shellcheck disable=SC2086  # the indexes of the edits, one word each
      if apply_edits "$file" ${edits_in[$file]} >"$out"; then
        printf '%-38s applies to %s:\n' "$label" "$file"
        { diff "$root/$file" "$out" || true; } | sed -n 's/^< /    -/p; s/^> /    +/p'
      else
        printf '%-38s NOT APPLIED to %s (above: why)\n' "$label" "$file"
        status=1
      fi
      label=
    done
  done
  rm -f "$out"
  exit $status
fi

# ---------------------------------------------------------------------------------------------
copy=$scratch/gpuslice
build=$copy/build
log=$scratch/log
mkdir -p "$copy" "$log"
say() { printf '%s\n' "$*" | tee -a "$log/summary.txt"; }
: >"$log/summary.txt"

# The working tree as it is (committed or not), without what git ignores. Into a staging
# directory first, then into the copy only the files whose content differs, with the time of the
# copy: a file restored after the previous run's last sabotage has an older time than the objects
# built from the sabotaged file, and copied with its own time it would not be rebuilt.
stage=$scratch/stage
rm -rf "$stage"
mkdir -p "$stage"
git -C "$root" ls-files -z --cached --others --exclude-standard |
  (cd "$root" && tar --null -T - -cf -) | tar -C "$stage" -xf -
python3 - "$stage" "$copy" <<'PY'
import filecmp, os, shutil, sys
stage, copy = sys.argv[1:]
for top, _, files in os.walk(stage):
    for name in files:
        src = os.path.join(top, name)
        dst = os.path.join(copy, os.path.relpath(src, stage))
        if os.path.islink(src):
            if not os.path.islink(dst) or os.readlink(dst) != os.readlink(src):
                if os.path.lexists(dst):
                    os.remove(dst)
                os.makedirs(os.path.dirname(dst), exist_ok=True)
                os.symlink(os.readlink(src), dst)
        elif os.path.islink(dst) or not os.path.exists(dst) or not filecmp.cmp(src, dst, shallow=False):
            if os.path.lexists(dst):
                os.remove(dst)
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            shutil.copyfile(src, dst)
            shutil.copymode(src, dst)
PY
rm -rf "$stage"

# ccache: the copy's paths are not the tree's, so hash neither the directory nor absolute paths.
export CCACHE_BASEDIR=/ CCACHE_NOHASHDIR=1
# The test programs share a precompiled header (tests/CMakeLists.txt): ccache caches them only so.
export CCACHE_SLOPPINESS=pch_defines,time_macros
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
cmake -S "$copy" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo "${launcher[@]}" >"$log/configure.txt"

build_all() { nice -n 15 cmake --build "$build" -j"$jobs" >"$1" 2>&1; }
# Rebuilds what the tests of `regex` run: their programs (whose dependencies bring the shim, the
# simulated driver and the tools), not every test program of the tree.
build_for() {
  local regex=$1 out=$2 targets
  # A check run from scripts/ (ThreadSafetyCheck) builds nothing of its own.
  targets=$( (cd "$build" && ctest -N -R "$regex" --show-only=json-v1) | python3 -c '
import json, os, sys
tests = json.load(sys.stdin)["tests"]
scripts = os.path.join(sys.argv[1], "scripts") + os.sep
print(" ".join(sorted({os.path.basename(t["command"][0]) for t in tests
                       if t.get("command") and not t["command"][0].startswith(scripts)})))' "$copy")
  nice -n 15 cmake --build "$build" -j"$jobs" --target gpuslice $targets >"$out" 2>&1
}
# The tests of `regex` that failed, one per line (ctest's "The following tests FAILED" list).
run_tests() {
  local regex=$1 out=$2
  (cd "$build" && nice -n 15 ctest -R "$regex" -j"$jobs" --timeout 300 >"$out" 2>&1) || true
  # "  361 - Suite.Name/Param  # GetParam() = ... (Failed)": the name is the first word.
  sed -n '/The following tests FAILED:/,$p' "$out" | sed -nE 's/^[[:space:]]*[0-9]+ - ([^ ]+).*$/\1/p'
}

if [[ -n $only_tests ]]; then
  union=$only_tests
else
  union=$(tests_regex $(for i in "${chosen[@]}"; do printf '%s\n' "${tests[$i]}"; done))
fi
say "mutation check of $root ($(git -C "$root" rev-parse --short HEAD)$(git -C "$root" diff --quiet HEAD || echo ', with uncommitted changes')), $(date -u '+%Y-%m-%d %H:%M UTC')"
# Everything once (ctest must know every test program), then only what the tests run.
if ! build_all "$log/build-baseline.txt"; then
  say "the unsabotaged copy does not build: see $log/build-baseline.txt"
  exit 1
fi

# A regex that selected nothing (or that ctest could not compile) stops the check: every test
# would seem to pass.
require_tests_ran() {
  grep -qE 'tests passed, [0-9]+ tests failed out of [1-9]' "$1" && return 0
  say "ctest ran no test for $2 (see $1): fix its tests in $list_file"
  exit 1
}

declare -A flaky=()
if ((baseline)); then
  while read -r t; do [[ -n $t ]] && flaky[$t]=1; done < <(run_tests "$union" "$log/tests-baseline.txt")
  require_tests_ran "$log/tests-baseline.txt" "the baseline"
  if ((${#flaky[@]})); then
    say "baseline: these tests fail without any sabotage and are not counted as catching one: ${!flaky[*]}"
  else
    say "baseline: every selected test passes on the unsabotaged copy"
  fi
fi

missed=0
for i in "${chosen[@]}"; do
  name=${names[$i]} applied=1
  group_edits "$i"
  for file in "${edited_files[@]}"; do
    # shellcheck disable=SC2086  # the indexes of the edits, one word each
    apply_edits "$file" ${edits_in[$file]} >"$copy/$file.sabotaged" || applied=0
  done
  if ((!applied)); then
    for file in "${edited_files[@]}"; do rm -f "$copy/$file.sabotaged"; done
    say "$(printf '%-38s NOT APPLIED: an edit leaves its line as it was (above); update it in %s' "$name" "$list_file")"
    missed=1
    continue
  fi
  : >"$log/$name.diff"
  for file in "${edited_files[@]}"; do
    mv "$copy/$file.sabotaged" "$copy/$file"
    diff -u "$root/$file" "$copy/$file" >>"$log/$name.diff" || true
  done
  if ! build_for "$(regex_of "$i")" "$log/$name-build.txt"; then
    say "$(printf '%-38s BUILD FAILED (see %s)' "$name" "$log/$name-build.txt")"
    missed=1
  else
    caught=()
    while read -r t; do [[ -n $t && -z ${flaky[$t]:-} ]] && caught+=("$t"); done \
      < <(run_tests "$(regex_of "$i")" "$log/$name-tests.txt")
    require_tests_ran "$log/$name-tests.txt" "$name"
    ran=$(sed -nE 's/.*tests passed, [0-9]+ tests failed out of ([0-9]+).*/\1/p' "$log/$name-tests.txt")
    if ((${#caught[@]})); then
      say "$(printf '%-38s CAUGHT by %d of %s tests run: %s' "$name" "${#caught[@]}" "${ran:-?}" "${caught[*]}")"
    else
      say "$(printf '%-38s MISSED: all %s tests of %s pass' "$name" "${ran:-?}" "$(regex_of "$i")")"
      missed=1
    fi
  fi
  for file in "${edited_files[@]}"; do
    cp -p "$root/$file" "$copy/$file"
    touch "$copy/$file"  # newer than the sabotaged build: the next build restores it
  done
done
say "logs: $log"
exit $missed
