#!/usr/bin/env bash
# Formats the C++ sources in place with clang-format and the repository's .clang-format: every
# *.h, *.cc, *.cpp and *.inc that git tracks, or only those under the PATHs given. Prints one line
# saying how many files it changed. scripts/check-format.sh is this script with --check: it changes
# nothing, prints each file that is not formatted and exits 1 when there is one.
#
# Usage: scripts/format.sh [--check] [PATH...]
#
# Which clang-format: $CLANG_FORMAT if set, else clang-format-14, else clang-format if it is
# version 14 (.clang-format was measured with 14, Debian 12's; another version lays out some
# constructs differently, so the check would fail on code formatted by this one). Exits 77 (ctest's
# skip, SKIP_RETURN_CODE), with one line, when there is none or this is not a git checkout; 2 when
# clang-format fails.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)

check=false
if [ "${1:-}" = --check ]; then
  check=true
  shift
fi
me="gpuslice format"
$check && me="gpuslice format check"

fail() {
  echo "$me: $*" >&2
  exit 2
}
cannot() {
  echo "$me: $*" >&2
  exit 77
}

if [ -n "${CLANG_FORMAT:-}" ]; then
  command -v "$CLANG_FORMAT" >/dev/null || cannot "CLANG_FORMAT=$CLANG_FORMAT is not an executable"
  clang_format=$CLANG_FORMAT
elif command -v clang-format-14 >/dev/null; then
  clang_format=clang-format-14
elif command -v clang-format >/dev/null; then
  clang_format=clang-format
else
  cannot "clang-format is not installed (scripts/install-deps.sh installs Debian 12's clang-format 14)"
fi
version=$("$clang_format" --version | sed -nE 's/.*version ([0-9.]+).*/\1/p')
if [ -z "${CLANG_FORMAT:-}" ] && [ "${version%%.*}" != 14 ]; then
  cannot "$clang_format is version ${version:-unknown}, not 14: install clang-format-14, or set CLANG_FORMAT=$clang_format to use it anyway"
fi

# The files: every C++ source and header git tracks, but under build*/ (generated tables are
# written there, and nothing tracked is generated or third-party). The one list, for both modes.
git -C "$root" rev-parse --is-inside-work-tree >/dev/null 2>&1 || cannot "not a git checkout (it formats the files git tracks)"
tracked() {
  if (($#)); then git ls-files -z --full-name -- "$@"; else git -C "$root" ls-files -z; fi  # PATHs: from here
}
mapfile -d '' listed < <(tracked "$@" | grep -zE '\.(h|cc|cpp|inc)$' | grep -zvE '^build[^/]*/' || true)
cd "$root"
files=()
for f in "${listed[@]}"; do
  [ -f "$f" ] && files+=("$f")
done
((${#files[@]})) || fail "no C++ files tracked under ${*:-.}"

# Sets `unformatted` to the files clang-format would change. One process for all the files: about
# 3 s for the whole tree.
find_unformatted() {
  local out rc=0
  out=$("$clang_format" --style=file --dry-run -Werror --ferror-limit=1 "$@" 2>&1) || rc=$?
  unformatted=()
  while IFS= read -r f; do
    [ -n "$f" ] && unformatted+=("$f")
  done < <(sed -nE 's/^(.+):[0-9]+:[0-9]+: error: code should be clang-formatted \[-Wclang-format-violations\]$/\1/p' \
             <<<"$out" | sort -u)
  if ((rc != 0 && ${#unformatted[@]} == 0)) || grep -qiE '^error' <<<"$out"; then
    echo "$out" >&2
    fail "$clang_format failed (above)"
  fi
}

find_unformatted "${files[@]}"
if $check; then
  for f in "${unformatted[@]}"; do echo "$me: not formatted: $f"; done
  if ((${#unformatted[@]})); then
    echo "$me: ${#unformatted[@]} of ${#files[@]} files are not formatted (clang-format $version); run scripts/format.sh"
    exit 1
  fi
  echo "$me: all ${#files[@]} files are formatted (clang-format $version)"
  exit 0
fi

changed=("${unformatted[@]}")
((${#changed[@]} == 0)) || "$clang_format" --style=file -i "${changed[@]}"
# clang-format is meant to reach a fixed point in one pass; make sure, or the check would fail.
((${#changed[@]} == 0)) || find_unformatted "${changed[@]}"
if ((${#unformatted[@]})); then
  for f in "${unformatted[@]}"; do echo "$me: still not formatted after one pass: $f"; done
  echo "$me: run scripts/format.sh again; if a file never settles, fence its lines with // clang-format off/on"
  exit 1
fi
echo "$me: formatted ${#changed[@]} of ${#files[@]} files (clang-format $version)"
