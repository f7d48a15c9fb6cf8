#!/usr/bin/env bash
# Fails when a C++ source is not formatted as .clang-format says: prints each such file and a line
# saying to run scripts/format.sh, and exits 1; exits 0 with one line otherwise (77: no clang-format
# 14 here). The files and the clang-format are scripts/format.sh's (this is `scripts/format.sh --check`).
#
# Usage: scripts/check-format.sh [PATH...]
exec "$(dirname "$0")/format.sh" --check "$@"
