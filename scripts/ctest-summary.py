#!/usr/bin/env python3
"""Counts what a ctest run really did, from its JUnit file (ctest --output-junit FILE).

Usage: ctest-summary.py FILE

ctest's own summary says "100% tests passed" with tests skipped among them. This prints each
skipped test with its reason (the GTEST_SKIP message), each failed one, and then, alone on the
last line, the counts CI reads:

    N passed, N failed, N skipped

A test ctest did not run for another reason than a skip (executable missing, a fixture failed)
counts as failed, as ctest counts it. Exit status: 1 when any test failed, else 0.
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


def main(argv):
    if len(argv) != 2:
        sys.stderr.write(__doc__)
        return 2
    try:
        cases = ET.parse(argv[1]).getroot().iter("testcase")
    except (OSError, ET.ParseError) as error:
        print(f"ctest-summary: cannot read {argv[1]}: {error}")
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
    for name in sorted(failed):
        print(f"FAILED: {name}")
    print(f"{len(passed)} passed, {len(failed)} failed, {len(skipped)} skipped")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
