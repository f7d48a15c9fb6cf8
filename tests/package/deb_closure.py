#!/usr/bin/env python3
"""Checks that the programs and libraries of Debian packages need no library their
dependencies do not bring: what a slim Debian image that installs only these packages (and what
apt pulls in for their Depends) will have.

  deb_closure.py ROOT PACKAGE.deb...

ROOT: the packages unpacked together (dpkg-deb -x). For every ELF file in ROOT, each library
`ldd` resolves must be a file of the packages themselves or of an installed Debian package in
the closure of their Depends (followed through Depends and Pre-Depends of the installed
packages, as apt would install them). The NVIDIA driver's libcuda.so.1 and libnvidia-ml.so.1 are
the node's, mounted into containers by the NVIDIA container toolkit, and are allowed. Prints one
line per problem; exit 1 when there is any.
"""
import os
import re
import subprocess
import sys

DRIVER_LIBRARIES = {"libcuda.so.1", "libnvidia-ml.so.1"}


def control_field(deb, field):
    out = subprocess.run(["dpkg-deb", "-f", deb, field], capture_output=True, text=True, check=True).stdout
    return out.strip()


def names(depends):
    """Package names of a Depends field ("a (>= 1), b | c" gives a, b, c)."""
    found = []
    for clause in depends.split(","):
        for alternative in clause.split("|"):
            name = re.sub(r"\(.*?\)|\[.*?\]", "", alternative).strip().split(":")[0]
            if name:
                found.append(name)
    return found


def installed_depends(package):
    r = subprocess.run(["dpkg-query", "-W", "-f=${Depends}, ${Pre-Depends}", package], capture_output=True, text=True)
    return names(r.stdout) if r.returncode == 0 else None


def closure(roots, own):
    seen, todo, missing = set(), list(roots), []
    while todo:
        p = todo.pop()
        if p in seen or p in own:
            continue
        seen.add(p)
        deps = installed_depends(p)
        if deps is None:
            missing.append(p)
            continue
        todo += deps
    return seen, missing


def files_of(packages):
    files = set()
    for p in packages:
        r = subprocess.run(["dpkg", "-L", p], capture_output=True, text=True)
        for line in r.stdout.splitlines():
            files.add(line)
            files.add(os.path.realpath(line))
    return files


def is_elf(path):
    with open(path, "rb") as f:
        return f.read(4) == b"\x7fELF"


def main():
    root, debs = sys.argv[1], sys.argv[2:]
    own = {control_field(d, "Package") for d in debs}
    roots = []
    for d in debs:
        roots += names(control_field(d, "Depends"))
    packages, missing = closure(roots, own)
    problems = ["dependency %s is not installed here, so its files cannot be checked" % m for m in missing]
    allowed = files_of(packages)
    checked = 0
    for directory, _, entries in os.walk(root):
        for entry in entries:
            path = os.path.join(directory, entry)
            if os.path.islink(path) or not is_elf(path):
                continue
            checked += 1
            r = subprocess.run(["ldd", path], capture_output=True, text=True)
            for line in r.stdout.splitlines():
                m = re.match(r"\s*(\S+) => (\S+)", line)
                if not m:
                    continue
                library, resolved = m.group(1), m.group(2)
                if library in DRIVER_LIBRARIES:
                    continue
                if resolved == "not":
                    problems.append("%s: %s is not found" % (path[len(root):], library))
                elif resolved not in allowed and os.path.realpath(resolved) not in allowed and \
                        not resolved.startswith(root):
                    problems.append("%s: %s (%s) comes from no package its Depends bring" % (path[len(root):],
                                                                                          library, resolved))
    print("\n".join(problems))
    print("checked %d ELF files against %d packages" % (checked, len(packages)), file=sys.stderr)
    return 1 if problems or checked == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
