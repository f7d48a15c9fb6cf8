#!/usr/bin/env python3
"""Generates the cuGetProcAddress table of the simulated driver from cudaTypedefs.h.

Usage: gen_proc_table.py <path/to/cudaTypedefs.h> <output.inc> [--cuda-h <path/to/cuda.h>]

cuGetProcAddress names a base symbol ("cuMemAlloc") and a CUDA version; the driver returns the
entry point of the largest PFN_<base>_v<NNNN> typedef version <= the requested one. The k-th
version of a base (from 0, ascending) is exported as <base> for k = 0 and <base>_v{k+1} otherwise.
A PFN_<base>_v<N>_ptsz/_ptds typedef is the per-thread-default-stream twin of the highest plain
version <= N and is exported as <that export name>_ptsz/_ptds. Every typedef counts, including
the old ones that cudaTypedefs.h only declares under __CUDA_API_VERSION_INTERNAL: they are real
versions in the sequence (cuMemAlloc: v2000 -> cuMemAlloc, v3020 -> cuMemAlloc_v2).

The output is an include file of X-macro rows; each section is emitted only where the includer
defines its macro:

  GPUSLICE_PROC(base, version, export_name, per_thread_export_name, pfn_type)
      One row per plain PFN_<base>_v<version> typedef, sorted by base (strcmp order) and then
      version, so that it can be binary-searched as it is. per_thread_export_name is "" when the
      version has no _ptsz/_ptds twin.
  GPUSLICE_PROC_PER_THREAD(base, typedef_version, suffix, per_thread_export_name, pfn_type)
      One row per PFN_<base>_v<typedef_version>_ptsz/_ptds typedef.
  GPUSLICE_PROC_DECLARED(export_name, pfn_type)
      Every generated export name (plain or per-thread) that cuda.h declares when compiled with
      __CUDA_API_VERSION_INTERNAL, with the typedef its signature must match exactly. Names are
      bare identifiers so that tests can static_assert on decltype(&export_name).

The output file is only rewritten when its content changes, so that dependents do not rebuild.
"""

import argparse
import os
import re
import sys

_TYPEDEF_RE = re.compile(r"typedef\s+CUresult\s*\(\s*CUDAAPI\s*\*\s*"
                         r"PFN_(?P<base>\w+?)_v(?P<version>\d+)(?P<suffix>_ptsz|_ptds)?\s*\)\s*\(")
_ANY_PFN_TYPEDEF_RE = re.compile(r"\(\s*CUDAAPI\s*\*\s*(PFN_\w+)\s*\)")
_DECLARATION_RE = re.compile(r"\bCUresult\s+CUDAAPI\s+(\w+)\s*\(")
_DIRECTIVE_RE = re.compile(r"^\s*#\s*(\w+)\s*(.*)$")
_DEFINE_RE = re.compile(r"^(\w+)(\(\s*(\w+)\s*\))?\s*(.*)$")


def strip_comments(text):
    """Removes /* */ and // comments, keeping newlines so that directives stay on their lines."""
    def blank(match):
        return "\n" * match.group(0).count("\n")
    return re.sub(r"/\*.*?\*/|//[^\n]*", blank, text, flags=re.S)


def join_continuations(text):
    return re.sub(r"\\\n", " ", text)


class Typedef:
    def __init__(self, base, version, suffix):
        self.base = base
        self.version = version
        self.suffix = suffix  # "" for a plain version, "_ptsz" or "_ptds" for a per-thread one

    @property
    def pfn(self):
        return f"PFN_{self.base}_v{self.version}{self.suffix}"


def parse_typedefs(text):
    """Every PFN_<base>_v<N>[_ptsz|_ptds] typedef, whatever preprocessor block holds it."""
    text = strip_comments(text)
    typedefs = [Typedef(m.group("base"), int(m.group("version")), m.group("suffix") or "")
                for m in _TYPEDEF_RE.finditer(text)]
    # A typedef the pattern missed would silently drop a version and shift every export name
    # after it, so insist that every function-pointer typedef was understood.
    parsed = {t.pfn for t in typedefs}
    missed = sorted(set(_ANY_PFN_TYPEDEF_RE.findall(text)) - parsed)
    if missed:
        raise ValueError("cudaTypedefs.h typedefs not understood: " + ", ".join(missed))
    if len(parsed) != len(typedefs):
        raise ValueError("cudaTypedefs.h declares a PFN typedef twice")
    return typedefs


class Row:
    def __init__(self, base, version, export_name, pfn):
        self.base = base
        self.version = version
        self.export_name = export_name
        self.pfn = pfn
        self.per_thread = None  # the Typedef of its _ptsz/_ptds twin
        self.per_thread_export_name = ""


def build_rows(typedefs):
    """Applies the version rule; returns (plain rows sorted by base and version, per-thread rows)."""
    by_base = {}
    for t in typedefs:
        if not t.suffix:
            by_base.setdefault(t.base, []).append(t)
    rows_by_base = {}
    for base, versions in by_base.items():
        versions.sort(key=lambda t: t.version)
        rows_by_base[base] = [Row(base, t.version, base if k == 0 else f"{base}_v{k + 1}", t.pfn)
                              for k, t in enumerate(versions)]

    per_thread_rows = []
    for t in sorted((t for t in typedefs if t.suffix), key=lambda t: (t.base, t.version, t.suffix)):
        candidates = [r for r in rows_by_base.get(t.base, []) if r.version <= t.version]
        if not candidates:
            raise ValueError(f"{t.pfn} has no plain version <= {t.version} to be the twin of")
        twin_of = candidates[-1]
        if twin_of.per_thread is not None:
            raise ValueError(f"{t.pfn} and {twin_of.per_thread.pfn} are both twins of {twin_of.pfn}")
        twin_of.per_thread = t
        twin_of.per_thread_export_name = twin_of.export_name + t.suffix
        per_thread_rows.append((t, twin_of.per_thread_export_name))

    # Python orders ASCII strings as strcmp does, which the C++ binary search relies on.
    rows = [row for base in sorted(rows_by_base) for row in rows_by_base[base]]
    return rows, per_thread_rows


class MiniPreprocessor:
    """Just enough of the C preprocessor to list the functions cuda.h declares.

    cuda.h renames most entry points with object-like macros (#define cuMemAlloc cuMemAlloc_v2,
    __CUDA_API_PTSZ(...)) in its body and declares the old names after #undef-ing them in its
    __CUDA_API_VERSION_INTERNAL tail, so the declared names are the declarations' names after
    macro expansion, in the active conditional branches only.
    """

    def __init__(self, predefined):
        self.macros = dict(predefined)  # name -> (param or None, body)

    def declared_functions(self, text):
        names = set()
        stack = []  # per open #if: [this branch active, some branch already taken, parent active]
        chunk = []  # the active lines since the last directive: a declaration may span lines

        def flush():
            names.update(self._expand(m.group(1)) for m in _DECLARATION_RE.finditer("\n".join(chunk)))
            chunk.clear()

        for line in join_continuations(strip_comments(text)).split("\n"):
            active = all(frame[0] for frame in stack)
            directive = _DIRECTIVE_RE.match(line)
            if directive:
                flush()  # with the macros as they were before this directive
                self._directive(directive.group(1), directive.group(2).strip(), stack, active)
            elif active:
                chunk.append(line)
        flush()
        return names

    def _directive(self, kind, rest, stack, active):
        if kind in ("if", "ifdef", "ifndef"):
            if kind == "ifdef":
                taken = active and rest.split()[0] in self.macros
            elif kind == "ifndef":
                taken = active and rest.split()[0] not in self.macros
            else:
                taken = active and self._evaluate(rest)
            stack.append([taken, taken, active])
        elif kind == "elif":
            frame = stack[-1]
            frame[0] = frame[2] and not frame[1] and self._evaluate(rest)
            frame[1] = frame[1] or frame[0]
        elif kind == "else":
            frame = stack[-1]
            frame[0] = not frame[1]
            frame[1] = True
        elif kind == "endif":
            stack.pop()
        elif active and kind == "define":
            m = _DEFINE_RE.match(rest)
            if m:
                self.macros[m.group(1)] = (m.group(3), m.group(4).strip())
        elif active and kind == "undef":
            self.macros.pop(rest.split()[0], None)

    def _evaluate(self, condition):
        expr = re.sub(r"defined\s*\(\s*(\w+)\s*\)|defined\s+(\w+)",
                      lambda m: "1" if (m.group(1) or m.group(2)) in self.macros else "0", condition)
        expr = re.sub(r"\b(\d+)[uUlL]+\b", r"\1", expr)

        def identifier(m):
            macro = self.macros.get(m.group(0))
            if macro and macro[0] is None and re.fullmatch(r"\d+", macro[1]):
                return macro[1]
            return "0"  # as in C: an unknown identifier in #if is 0
        expr = re.sub(r"\b[A-Za-z_]\w*\b", identifier, expr)
        expr = expr.replace("&&", " and ").replace("||", " or ")
        expr = re.sub(r"!(?!=)", " not ", expr)
        try:
            return bool(eval(expr, {"__builtins__": {}}))  # only digits and operators are left
        except (SyntaxError, TypeError, ZeroDivisionError) as error:
            raise ValueError(f"cannot evaluate '#if {condition}' in cuda.h ({error})") from error

    def _expand(self, name):
        seen = set()
        while name in self.macros and name not in seen:
            seen.add(name)
            param, body = self.macros[name]
            if param is not None:
                break
            call = re.fullmatch(r"(\w+)\s*\(\s*(\w+)\s*\)", body)
            if call and call.group(1) in self.macros and self.macros[call.group(1)][0] is not None:
                inner_param, inner_body = self.macros[call.group(1)]
                body = re.sub(rf"\b{inner_param}\b", call.group(2), inner_body)
                body = re.sub(r"\s*##\s*", "", body)
            if not re.fullmatch(r"\w+", body):
                break
            name = body
        return name


def declared_in_cuda_h(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        text = f.read()
    predefined = {name: (None, "1") for name in ("__CUDA_API_VERSION_INTERNAL", "__GNUC__", "__LP64__")}
    predefined["__cplusplus"] = (None, "202002")
    return MiniPreprocessor(predefined).declared_functions(text)


def c_string(s):
    return '"' + s + '"'


def render(rows, per_thread_rows, declared, source_name):
    out = [
        f"// Generated by tools/gen_proc_table.py from {source_name}. Do not edit.",
        "// The cuGetProcAddress version rule: see the generator's docstring for the row formats.",
        "",
        "#ifdef GPUSLICE_PROC",
        "// GPUSLICE_PROC(base, version, export_name, per_thread_export_name, pfn_type)",
    ]
    out += [f"GPUSLICE_PROC({c_string(r.base)}, {r.version}, {c_string(r.export_name)}, "
            f"{c_string(r.per_thread_export_name)}, {r.pfn})" for r in rows]
    out += ["#endif  // GPUSLICE_PROC", "", "#ifdef GPUSLICE_PROC_PER_THREAD",
            "// GPUSLICE_PROC_PER_THREAD(base, typedef_version, suffix, per_thread_export_name, pfn_type)"]
    out += [f"GPUSLICE_PROC_PER_THREAD({c_string(t.base)}, {t.version}, {c_string(t.suffix)}, "
            f"{c_string(name)}, {t.pfn})" for t, name in per_thread_rows]
    out += ["#endif  // GPUSLICE_PROC_PER_THREAD", "", "#ifdef GPUSLICE_PROC_DECLARED",
            "// GPUSLICE_PROC_DECLARED(export_name, pfn_type): export names cuda.h declares."]
    exports = [(r.export_name, r.pfn) for r in rows]
    exports += [(name, t.pfn) for t, name in per_thread_rows]
    out += [f"GPUSLICE_PROC_DECLARED({name}, {pfn})" for name, pfn in sorted(exports) if name in declared]
    out += ["#endif  // GPUSLICE_PROC_DECLARED", ""]
    undeclared = sorted(name for name, _ in exports if name not in declared)
    out += [f"// Export names cuda.h does not declare ({len(undeclared)}):"]
    out += [f"//   {name}" for name in undeclared]
    return "\n".join(out) + "\n"


def write_if_changed(path, content):
    try:
        with open(path, encoding="utf-8") as f:
            if f.read() == content:
                return
    except FileNotFoundError:
        pass
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(content)
    os.replace(tmp, path)  # atomic: a concurrent build never reads half a file


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("typedefs_h", help="path to cudaTypedefs.h")
    parser.add_argument("output", help="the .inc file to write")
    parser.add_argument("--cuda-h", help="path to cuda.h (default: next to cudaTypedefs.h)")
    args = parser.parse_args(argv)
    cuda_h = args.cuda_h or os.path.join(os.path.dirname(args.typedefs_h), "cuda.h")
    try:
        with open(args.typedefs_h, encoding="utf-8", errors="replace") as f:
            rows, per_thread_rows = build_rows(parse_typedefs(f.read()))
        declared = declared_in_cuda_h(cuda_h)
    except (OSError, ValueError) as error:
        print(f"gen_proc_table.py: {error}", file=sys.stderr)
        return 1
    write_if_changed(args.output, render(rows, per_thread_rows, declared, os.path.basename(args.typedefs_h)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
