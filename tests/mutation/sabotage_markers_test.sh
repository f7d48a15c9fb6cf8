#!/usr/bin/env bash
# shellcheck disable=SC2016  # the backquotes of the messages expected are text
# scripts/mutation-check.sh refuses a list and markers that disagree, and follows a marker where
# its code moves: a fixture tree (its own git checkout, holding a copy of the script) with two
# sabotages, one of two lines, checked with --dry-run as it is and after each break.
#
# Usage: tests/mutation/sabotage_markers_test.sh [WORK_DIR]
set -euo pipefail
script=$(cd "$(dirname "$0")/../.." && pwd)/scripts/mutation-check.sh
work=${1:-${TMPDIR:-/tmp}}/sabotage-markers-test.$$
trap 'rm -rf "$work"' EXIT
failures=0

# A fresh fixture: src/quota.cc with three marked lines, and the list of their sabotages.
fixture() {
  rm -rf "$work"
  mkdir -p "$work/scripts" "$work/src" "$work/docs"
  cp "$script" "$work/scripts/"
  cat >"$work/scripts/sabotages.txt" <<'LIST'
# A fixture's list.
quota-ignored
  why    a reservation is granted whatever the quota
  tests  QuotaTest
  edit   s|^|// |

credit-skipped
  why    freeing memory returns nothing
         to the tenant
  tests  QuotaTest|FreeTest
  edit.free     s/\Qused -= bytes;\E/(void)bytes;/
  edit.release  s/return true;/return false;/
LIST
  cat >"$work/src/quota.cc" <<'CODE'
bool Reserve(long used, long bytes, long quota) {
  // sabotage-point: quota-ignored
  if (used + bytes > quota) return false;
  return true;
}

bool Release(long& used, long bytes) {
  // sabotage-point: credit-skipped.free
  used -= bytes;
  // sabotage-point: credit-skipped.release
  return true;
}
CODE
  printf 'The markers look like `// sabotage-point: NAME`.\n' >"$work/docs/markers.md"
  git -C "$work" init -q
}

# expect NAME STATUS TEXT: the dry run exits with STATUS and prints TEXT (a fixed string).
expect() {
  local name=$1 want=$2 text=$3 got=0
  "$work/scripts/mutation-check.sh" --dry-run >"$work/out.txt" 2>&1 || got=$?
  if [[ $got != "$want" ]] || ! grep -qF -- "$text" "$work/out.txt"; then
    echo "FAIL $name: exit $got (want $want), output (want \"$text\" in it):"
    sed 's/^/  | /' "$work/out.txt"
    failures=$((failures + 1))
  else
    echo "ok   $name: exit $got, \"$text\""
  fi
}

fixture
expect "as written" 0 'credit-skipped                         applies to src/quota.cc:'
expect "a line commented out" 0 '    +//   if (used + bytes > quota) return false;'

fixture
sed -i '/sabotage-point: quota-ignored/d' "$work/src/quota.cc"
expect "marker removed" 1 'scripts/sabotages.txt:5: no marker `// sabotage-point: quota-ignored` in the C and C++ sources'

fixture
sed -i '/sabotage-point: credit-skipped.release/d' "$work/src/quota.cc"
expect "one marker of two removed" 1 'no marker `// sabotage-point: credit-skipped.release`'

fixture
sed -i 's|^  return true;$|  // sabotage-point: quota-clamped\n  return true;|' "$work/src/quota.cc"
expect "orphan marker" 1 'src/quota.cc:4: the marker of quota-clamped, which scripts/sabotages.txt does not list'

fixture
printf '// sabotage-point: quota-ignored\nint x;\n' >"$work/src/other.cc"
expect "duplicated marker" 1 'a second marker of quota-ignored (the first: src/'

fixture
sed -i 's/return false;/return false;  \/\/ sabotage-point: credit-skipped/' "$work/src/quota.cc"
expect "marker after code" 1 'src/quota.cc:3: not a marker'

fixture
sed -i 's/used -= bytes;/used = used - bytes;/' "$work/src/quota.cc"
expect "edit that no longer changes its line" 1 'credit-skipped.free: its edit (s/\Qused -= bytes;\E/(void)bytes;/) leaves the line it marks as it was'

fixture
sed -i '3d' "$work/src/quota.cc"
sed -i '2s/$/\n/' "$work/src/quota.cc"
expect "marker above a blank line" 1 'the marker of quota-ignored is not directly above a line of code'

fixture
sed -i 's/^  tests  QuotaTest$/  test   QuotaTest/' "$work/scripts/sabotages.txt"
expect "list line not understood" 1 "scripts/sabotages.txt:4: neither a sabotage's name nor its why, tests or edit"

fixture
mkdir -p "$work/tests"
printf '// sabotage-point: quota-ignored\nint x;\n' >"$work/tests/quota_test.cc"
expect "markers in tests/ and Markdown are not counted" 0 'quota-ignored                          applies to src/quota.cc:'

# Code moved to another file takes its marker along.
fixture
sed -n '7,12p' "$work/src/quota.cc" >"$work/src/release.cc"
sed -i '6,12d' "$work/src/quota.cc"
expect "code moved" 0 'credit-skipped                         applies to src/release.cc:'

if ((failures)); then
  echo "$failures case(s) failed"
  exit 1
fi
echo "all cases passed"
