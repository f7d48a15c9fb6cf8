#!/usr/bin/env python3
"""Counts what a ctest run really did, from its JUnit files (ctest --output-junit FILE).

Usage: ctest-summary.py [--retry-log LOG] FILE [FILE...]

ctest's own summary says "100% tests passed" with tests skipped among them. This prints each
skipped test with its reason (the GTEST_SKIP message), each failed one, and then, alone on the
last line, the counts CI reads:

    N passed, N failed, N skipped

A test ctest did not run for another reason than a skip (executable missing, a fixture failed)
counts as failed, as ctest counts it. Exit status: 1 when any test failed, else 0.

Several files (scripts/test.sh runs the timing-sensitive tests in a second ctest run) are
counted together. --retry-log names the output of a `ctest --repeat until-pass:N` run: each test
that failed an attempt there and passed a later one is listed as "passed on retry", so a flake
is seen even when it does not fail the run.
"""
import re
import sys
import xml.etree.ElementTree as ET

# gtest prints "<file>:<line>: Skipped\n<message>\n...[  SKIPPED ] Suite.Case" for GTEST_SKIP().
_SKIP_MESSAGE = re.compile(r"Skipped\n(.*?)\n(?:\[  SKIPPED \]|\Z)", re.S)


def skip_reason(case):
    out = case.findtext("system-out") or ""
    match = _SKIP_MESSAGE.search(out)
    if match and match.group(1).strip():
        return " ".join(match.group(1).split())
    skipped = case.find("skipped")
    return (skipped.get("message") if skipped is not None else "") or "no reason given"


# ctest prints "    Test  #12: Suite.Case .....***Failed" for each failed attempt.
_FAILED_ATTEMPT = re.compile(r"Test +#\d+: (\S+) \.+\*\*\*")


def retried(log_path, passed):
    """Tests that failed an attempt in the retry run's output and passed in the end."""
    try:
        with open(log_path, encoding="utf-8", errors="replace") as log:
            failed_once = {m.group(1) for m in _FAILED_ATTEMPT.finditer(log.read())}
    except OSError as error:
        print(f"ctest-summary: cannot read {log_path}: {error}")
        return []
    return sorted(failed_once & set(passed))


def main(argv):
    args = argv[1:]
    retry_log = None
    if len(args) >= 2 and args[0] == "--retry-log":
        retry_log, args = args[1], args[2:]
    if not args or any(a.startswith("-") for a in args):
        sys.stderr.write(__doc__)
        return 2
    cases = []
    for path in args:
        try:
            cases.extend(ET.parse(path).getroot().iter("testcase"))
        except (OSError, ET.ParseError) as error:
            print(f"ctest-summary: cannot read {path}: {error}")
            print("0 passed, 1 failed, 0 skipped")
            return 1
    passed, failed, skipped = [], [], []
    for case in cases:
        name, status = case.get("name"), case.get("status")
        skip = case.find("skipped")
        message = skip.get("message", "") if skip is not None else ""
        if status == "run":
            passed.append(name)
        elif status == "disabled" or (status == "notrun" and message.startswith("SKIP_")):
            skipped.append((name, skip_reason(case)))
        else:
            failed.append(name)
    for name, reason in sorted(skipped):
        print(f"skipped: {name}: {reason}")
    for name in retried(retry_log, passed) if retry_log else []:
        print(f"passed on retry: {name} (a timing test that failed an attempt: see its output above)")
    for name in sorted(failed):
        print(f"FAILED: {name}")
    print(f"{len(passed)} passed, {len(failed)} failed, {len(skipped)} skipped")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
