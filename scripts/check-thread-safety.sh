#!/usr/bin/env bash
# Clang's thread-safety analysis over the product: each translation unit of shim/, broker/,
# common/, gpu/, ctl/, deviceplugin/, dra/, exporter/ and place/ in the build's
# compile_commands.json that includes common/thread_annotations.h (directly or through another
# header of the tree) is compiled with clang++-14 -fsyntax-only -Wthread-safety
# -Werror=thread-safety (its include paths and definitions as the build has them; the GCC build's
# warning, optimisation and output flags left out). A member declared GUARDED_BY a Mutex
# (common/thread_annotations.h, common/mutex.h) that is read or written without its lock fails
# the check, with Clang's diagnostic. A unit that does not include the header cannot see an
# annotation, so leaving it out loses nothing; it more than halves the time (33 units: about
# 100 s of CPU; all 106: about 260 s). Needs a configured and built tree (generated headers).
# Prints one summary line; exits 1 on a violation or a unit Clang cannot compile.
# Run by ctest (ThreadSafetyCheck) and by hand: scripts/check-thread-safety.sh [BUILD_DIR].
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
clang=${GPUSLICE_CLANGXX:-clang++-14}
if ! command -v "$clang" >/dev/null; then
  echo "gpuslice thread safety: $clang not found (scripts/install-deps.sh installs the clang-14 package)"
  exit 1
fi
if [ ! -f "$build/compile_commands.json" ]; then
  echo "gpuslice thread safety: no $build/compile_commands.json (configure the build with cmake first)"
  exit 1
fi
exec python3 - "$root" "$build/compile_commands.json" "$clang" <<'EOF'
import concurrent.futures, json, os, re, shlex, subprocess, sys, time

root, database, clang = sys.argv[1:]
product = ("shim", "broker", "common", "gpu", "ctl", "deviceplugin", "dra", "exporter", "place")
# Flags with a separate argument that are dropped with it (outputs, dependency files, GCC's --param).
dropped_with_argument = {"-o", "-MF", "-MT", "-MQ", "--param"}
# GCC-only or irrelevant to a syntax check.
dropped_prefixes = ("-W", "-O", "-g", "-M", "-flto", "-fsanitize", "-fprofile", "-fcoverage", "-fanalyzer",
                    "-fconcepts-diagnostics-depth", "-fno-gnu-unique", "-fdiagnostics-color", "-fmax-errors")
analysis = ["-fsyntax-only", "-Qunused-arguments", "-Wno-everything", "-Wthread-safety", "-Werror=thread-safety"]


def clang_command(entry):
    args = entry["arguments"] if "arguments" in entry else shlex.split(entry["command"])
    kept, skip = [clang], False
    for arg in args[1:]:
        if skip:
            skip = False
        elif arg in dropped_with_argument:
            skip = True
        elif arg == "-c" or arg.startswith(dropped_prefixes):
            pass
        else:
            kept.append(arg)
    return kept + analysis


# Whether `path` includes the annotations, following the tree's quoted includes (from the file's
# folder, then the -I folders); a file no folder holds (a system header) is not followed.
annotations = os.path.join(root, "common", "thread_annotations.h")
quoted = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)
direct = {}


def includes_annotations(path, include_dirs):
    seen, todo = {path}, [path]
    while todo:
        current = todo.pop()
        if current not in direct:
            with open(current, errors="replace") as text:
                direct[current] = quoted.findall(text.read())
        for name in direct[current]:
            for folder in [os.path.dirname(current)] + include_dirs:
                found = os.path.normpath(os.path.join(folder, name))
                if os.path.isfile(found):
                    if found == annotations:
                        return True
                    if found not in seen:
                        seen.add(found)
                        todo.append(found)
                    break
    return False


def include_dirs_of(directory, command):
    dirs = []
    for flag, value in zip(command, command[1:] + [""]):
        if flag.startswith("-I"):
            dirs.append(os.path.join(directory, flag[2:] or value))
    return dirs


units, product_units = {}, set()
for entry in json.load(open(database)):
    path = os.path.normpath(os.path.join(entry["directory"], entry["file"]))
    relative = os.path.relpath(path, root)
    if relative.split(os.sep)[0] not in product or relative in product_units:  # one target's flags per file
        continue
    product_units.add(relative)
    command = clang_command(entry)
    if includes_annotations(path, include_dirs_of(entry["directory"], command)):
        units[relative] = (entry["directory"], command)
if not units:
    print(f"gpuslice thread safety: no product translation unit in {database} includes {annotations}")
    sys.exit(1)


def check(item):
    relative, (directory, command) = item
    run = subprocess.run(command, cwd=directory, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return relative, run.returncode, run.stdout


start = time.monotonic()
with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
    results = sorted(pool.map(check, units.items()))
seconds = time.monotonic() - start

# A header's diagnostic comes once per unit that includes it: each is shown and counted once.
seen, violations, broken = set(), [], []
diagnostic = re.compile(r"^(\S+:\d+:\d+): error: (.*)\[-Werror,-Wthread-safety[-\w]*\]$")
for relative, code, output in results:
    if code == 0:
        continue
    block, own = [], False
    for line in output.splitlines():
        found = diagnostic.match(line)
        if found:
            own = found.group(0) not in seen
            seen.add(found.group(0))
            if own:
                violations.append(line)
        elif re.match(r"^\S+:\d+:\d+: (error|fatal error):", line):
            own = True
            broken.append(relative)
        if own and not re.match(r"^\d+ errors? generated\.$", line):
            block.append(line)
    if block:
        print("\n".join(block))
for relative in sorted(set(broken)):
    print(f"gpuslice thread safety: clang could not compile {relative} (above)")

summary = (f"{len(units)} of {len(product_units)} product translation units checked (those that include "
           f"common/thread_annotations.h) in {seconds:.0f} s")
if violations or broken:
    failures = []
    if violations:
        failures.append(f"{len(violations)} access(es) without the lock their GUARDED_BY or REQUIRES names")
    if broken:
        failures.append(f"{len(set(broken))} unit(s) Clang could not compile")
    print(f"gpuslice thread safety: FAILED: {', '.join(failures)}; {summary}")
    sys.exit(1)
print(f"gpuslice thread safety: no guarded member is touched without its lock; {summary}")
EOF
