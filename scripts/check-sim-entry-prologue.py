#!/usr/bin/env python3
"""Checks that every entry point the simulated driver and NVML define begins with
GPUSLICE_SIM_ENTRY() (sim/call_model.h): an entry point without it would cost nothing and be
counted by no one, and a benchmark of driver calls would not see it.

Usage: check-sim-entry-prologue.py <source root>. Prints each entry point without the prologue
and exits 1 when there is one; prints how many it checked otherwise.
"""
import pathlib
import re
import sys

SIGNATURE = re.compile(r"^(?:CUresult CUDAAPI (cu\w+)|nvmlReturn_t (nvml\w+)|const char\* (nvml\w+))\(", re.M)


def definitions(text):
    """(name, body) of every function definition (not declaration) matching SIGNATURE."""
    for match in SIGNATURE.finditer(text):
        name = next(g for g in match.groups() if g)
        i, depth = match.end() - 1, 0
        while True:
            depth += {"(": 1, ")": -1}.get(text[i], 0)
            if depth == 0:
                break
            i += 1
        rest = text[i + 1:].lstrip()
        if rest.startswith("{"):
            yield name, rest[1:].lstrip()


def main():
    root = pathlib.Path(sys.argv[1])
    files = sorted((root / "sim" / "driver").glob("api_*.cc")) + sorted((root / "sim" / "nvml").glob("*.cc"))
    checked, missing = 0, []
    for path in files:
        for name, body in definitions(path.read_text()):
            checked += 1
            if not body.startswith("GPUSLICE_SIM_ENTRY();"):
                missing.append(f"{path.relative_to(root)}: {name} does not begin with GPUSLICE_SIM_ENTRY();")
    for line in missing:
        print(line)
    if checked == 0:
        print("no entry point found: the pattern no longer matches the sources")
        return 1
    print(f"{checked} entry points checked, {len(missing)} without the prologue")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
