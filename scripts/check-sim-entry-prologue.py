#!/usr/bin/env python3
"""Checks the form of every entry point the simulated driver and NVML define:

- it is a function-try-block whose handler is `return ...EntryFailed<its return type>(...)`
  (sim/entry_failure.h): no C++ exception crosses the C API, whatever the body does;
- its body begins with GPUSLICE_SIM_ENTRY() (sim/call_model.h): an entry point without it would
  cost nothing and be counted by no one, and a benchmark of driver calls would not see it.

Entry points a macro defines (the copies and memsets of sim/driver/api_memory.cc) are checked for
the handler only: they have never been charged, and charging them would change the call-cost
model.

Usage: check-sim-entry-prologue.py <source root>. Prints each entry point out of form and exits 1
when there is one; prints how many it checked otherwise.
"""
import pathlib
import re
import sys

SIGNATURE = re.compile(r"^(?:(CUresult) CUDAAPI (cu\w+)|(nvmlReturn_t) (nvml\w+)|(const char\*) (nvml\w+))\(", re.M)
# In a #define: `CUresult CUDAAPI NAME PARAMS try {` or `CUresult CUDAAPI NAME##_ptds(...) try {`.
MACRO_SIGNATURE = re.compile(r"(CUresult) CUDAAPI ([A-Z_]\w*(?:##\w+)?)\s*(?:\(|PARAMS)")
HANDLER = re.compile(r"^\s*catch\s*\(\.\.\.\)\s*\{\s*(?:\\\s*)?return\s+(?:gpuslice::sim::)?EntryFailed<([^>]+)>\(")


def skip(text, i):
    """Index past the string, character literal or comment starting at i (else i)."""
    if text.startswith("//", i):
        return text.index("\n", i)
    if text.startswith("/*", i):
        return text.index("*/", i) + 2
    if text[i] in "\"'":
        quote, i = text[i], i + 1
        while text[i] != quote:
            i += 2 if text[i] == "\\" else 1
        return i + 1
    return i


def matching(text, i, opening, closing):
    """Index of the bracket closing the one at i."""
    depth = 0
    while True:
        j = skip(text, i)
        if j != i:
            i = j
            continue
        depth += {opening: 1, closing: -1}.get(text[i], 0)
        if depth == 0:
            return i
        i += 1


def definitions(text, pattern):
    """(name, return type, text after the parameters) of every definition (not declaration)."""
    for match in pattern.finditer(text):
        returns = next(g for g in match.groups()[0::2] if g)
        name = next(g for g in match.groups()[1::2] if g)
        at = match.end() if match.group(0).endswith("PARAMS") else matching(text, match.end() - 1, "(", ")") + 1
        rest = text[at:].lstrip(" \\\n")
        if rest.startswith("{") or rest.startswith("try"):
            yield name, returns, rest


def problems(name, returns, rest, charged):
    if not rest.startswith("try"):
        return [f"{name} is not a function-try-block (`) try {{ ... }} catch (...) {{ return EntryFailed<...> }}`)"]
    body_at = rest.index("{")
    body_end = matching(rest, body_at, "{", "}")
    found = []
    if charged and not rest[body_at + 1:].lstrip().startswith("GPUSLICE_SIM_ENTRY();"):
        found.append(f"{name} does not begin with GPUSLICE_SIM_ENTRY();")
    handler = HANDLER.match(rest[body_end + 1:])
    if not handler:
        found.append(f"{name}'s handler is not `catch (...) {{ return EntryFailed<{returns}>(...); }}`")
    elif handler.group(1).strip() != returns:
        found.append(f"{name} returns {returns} but its handler EntryFailed<{handler.group(1)}>")
    return found


def main():
    root = pathlib.Path(sys.argv[1])
    files = sorted((root / "sim" / "driver").glob("api_*.cc")) + sorted((root / "sim" / "nvml").glob("*.cc"))
    checked, missing = 0, []
    for path in files:
        text = path.read_text()
        for pattern, charged in ((SIGNATURE, True), (MACRO_SIGNATURE, False)):
            for name, returns, rest in definitions(text, pattern):
                checked += 1
                missing += [f"{path.relative_to(root)}: {p}" for p in problems(name, returns, rest, charged)]
    for line in missing:
        print(line)
    if checked == 0:
        print("no entry point found: the pattern no longer matches the sources")
        return 1
    print(f"{checked} entry points checked, {len(missing)} out of form")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
