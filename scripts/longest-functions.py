#!/usr/bin/env python3
"""The longest C++ function bodies of gpuslice's product folders.

A function is a `{` block at namespace or class scope whose head is a signature ending in `)`,
possibly followed by const, noexcept, override, final, `-> type` or a constructor's initializer
list. Its length is the lines from its `{` to its `}`, both counted. Comments, string and
character literals and preprocessor lines are blanked before braces are matched; lambdas and
blocks inside a function count towards that function.

  scripts/longest-functions.py [--top N] [SOURCE_DIR]        prints `lines file:line name`, longest first
  scripts/longest-functions.py --check --max 120 [SOURCE_DIR] exits 1, naming each function over --max

Run by ctest (FunctionLengthCheck, label docs) in check mode. Python 3 standard library only.
"""

import argparse
import os
import re
import sys

PRODUCT_DIRS = ["shim", "broker", "common", "ctl", "deviceplugin", "exporter", "place", "dra", "gpu"]
EXTENSIONS = (".h", ".cc", ".cpp", ".inc")


def blank(text):
    """`text` with comments, literals and preprocessor lines turned into spaces (newlines kept)."""
    out = []
    i, n = 0, len(text)
    line_start = True  # only whitespace since the last newline
    while i < n:
        c = text[i]
        if line_start and c == "#":
            # A directive, with its backslash continuations (and any comment on it).
            j = i
            while j < n and text[j] != "\n":
                if text[j] == "\\" and j + 1 < n and text[j + 1] == "\n":
                    j += 2
                    continue
                if text.startswith("/*", j):
                    end = text.find("*/", j + 2)
                    j = n if end < 0 else end + 2
                    continue
                j += 1
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
            continue
        if c == "\n":
            out.append(c)
            line_start = True
            i += 1
            continue
        if not c.isspace():
            line_start = False
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
            continue
        if text.startswith("/*", i):
            end = text.find("*/", i + 2)
            j = n if end < 0 else end + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
            continue
        if c == '"':
            token = re.search(r"[A-Za-z0-9_]*$", text[max(0, i - 3):i]).group(0)
            if token.endswith("R") and token in ("R", "LR", "uR", "UR", "u8R"):
                m = re.match(r'"([^()\\\s]{0,16})\(', text[i:])
                if m:
                    close = ")" + m.group(1) + '"'
                    end = text.find(close, i + len(m.group(0)))
                    j = n if end < 0 else end + len(close)
                    out.append('"' + re.sub(r"[^\n]", " ", text[i + 1:j - 1]) + '"')
                    i = j
                    continue
            j = i + 1
            while j < n and text[j] != '"' and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append('"' + " " * max(0, j - i - 2) + '"')
            i = j
            continue
        if c == "'":
            token = re.search(r"[A-Za-z0-9_]*$", text[max(0, i - 32):i]).group(0)
            if token[:1].isdigit():  # a digit separator: 1'000'000
                out.append(c)
                i += 1
                continue
            j = i + 1
            while j < n and text[j] != "'" and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append("'" + " " * max(0, j - i - 2) + "'")
            i = j
            continue
        out.append(c)
        i += 1
    return "".join(out)


QUALIFIERS = re.compile(
    r"""^\s*(?:(?:const|volatile|noexcept|override|final|mutable|constexpr|try|&&|&)\s*
              |noexcept\s*\(.*?\)\s*
              |__attribute__\s*\(\(.*?\)\)\s*)*
           (?:->[^:]*?(?:::[^:]*?)*)?\s*   # a trailing return type (which may say A::B)
           (?::(?!:).*)?$                   # a constructor's initializer list
    """,
    re.X | re.S,
)
NAME_BEFORE_PAREN = re.compile(r"((?:~?[A-Za-z_][A-Za-z0-9_]*|operator\s*(?:\(\)|[^\sA-Za-z0-9_(]+|\s[A-Za-z_][\w:<>\s*&]*?))"
                               r"(?:\s*<[^;{}]*>)?(?:\s*::\s*~?[A-Za-z_]\w*|\s*::\s*operator\s*\S+?)*)\s*$")


def classify(head):
    """('namespace'|'class'|'function'|'other', name) for the head of a `{`."""
    h = " ".join(head.split())
    if not h:
        return "other", ""
    if re.match(r"^(inline\s+)?namespace\b", h) or re.match(r'^extern\s*"\s*"$', h):
        return "namespace", ""
    body = re.sub(r"^template\s*<.*?>\s*", "", h) if h.startswith("template") else h
    if re.match(r"^(class|struct|union)\b", body) and "(" not in body.split(":")[0]:
        return "class", ""
    if re.match(r"^(enum|if|for|while|switch|catch|do|else|return)\b", body):
        return "other", ""
    # Each top-level parenthesised group in turn: a function's parameter list is one whose tail
    # is only qualifiers, a trailing return or an initializer list, and which follows a name.
    depth = 0
    open_at = None
    for k, ch in enumerate(h):
        if ch == "(":
            if depth == 0:
                open_at = k
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0 and open_at is not None:
                before, tail = h[:open_at], h[k + 1:]
                if re.search(r"(^|[^=!<>])=(?!=)\s*[^=]*$", before) and "operator" not in before:
                    return "other", ""  # an initializer: `auto f = [](...) {`, `T x = T(...) {`
                m = NAME_BEFORE_PAREN.search(before)
                if m and QUALIFIERS.match(tail):
                    if re.match(r"^\s*(?:->[^:]*)?:(?!:)", tail) and not h.endswith((")", "}")):
                        return "other", ""  # a member's brace initializer in the list: `: x_{1}`
                    return "function", " ".join(m.group(1).split())
            if depth < 0:
                return "other", ""
    return "other", ""


def functions(path):
    """(lines, line of its signature, name) of each function of the file at `path`."""
    with open(path, encoding="utf-8", errors="replace") as f:
        text = blank(f.read())
    found = []
    stack = []  # (kind, line of its `{`, name)
    stmt_start = 0
    line = 1
    for pos, ch in enumerate(text):
        if ch == "\n":
            line += 1
        elif ch == ";":
            if not any(kind in ("function", "other") for kind, _, _ in stack):
                stmt_start = pos + 1
        elif ch == "{":
            inside_function = any(kind == "function" for kind, _, _ in stack)
            in_init = stack and stack[-1][0] == "other"
            if inside_function or in_init:
                stack.append(("other", line, ""))
                continue
            head = text[stmt_start:pos]
            if head.count("(") > head.count(")"):  # in an argument: `f(T{1})`, `x_([] { ... })`
                stack.append(("other", line, ""))
                continue
            kind, name = classify(head)
            if kind == "function":
                start = stmt_start + len(head) - len(head.lstrip())
                name = (name, text.count("\n", 0, start) + 1)
            stack.append((kind, line, name))
            if kind != "other":
                stmt_start = pos + 1
        elif ch == "}":
            if not stack:
                stmt_start = pos + 1
                continue
            kind, first, name = stack.pop()
            if kind == "function":
                found.append((line - first + 1, name[1], name[0]))
            if kind != "other":
                stmt_start = pos + 1
            elif not stack or stack[-1][0] in ("namespace", "class"):
                # A brace initializer or an enum's list at namespace or class scope: the
                # declaration goes on (`a_{1}, b_{2} {`, `} kX;`) until its `;` or `{`.
                pass
    return found


def product_files(root):
    for folder in PRODUCT_DIRS:
        top = os.path.join(root, folder)
        for dirpath, dirnames, filenames in os.walk(top):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
            for filename in sorted(filenames):
                if filename.endswith(EXTENSIONS):
                    yield os.path.join(dirpath, filename)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("source_dir", nargs="?", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    parser.add_argument("--top", type=int, default=10, help="how many to list (default 10)")
    parser.add_argument("--check", action="store_true", help="exit 1 when a function is longer than --max")
    parser.add_argument("--max", type=int, default=120, help="the most lines a function may have with --check")
    args = parser.parse_args()
    root = os.path.normpath(args.source_dir)
    rows = []
    for path in product_files(root):
        rel = os.path.relpath(path, root)
        rows += [(lines, rel, first, name) for lines, first, name in functions(path)]
    rows.sort(key=lambda r: (-r[0], r[1], r[2]))
    if args.check:
        over = [r for r in rows if r[0] > args.max]
        for lines, rel, first, name in over:
            print(f"{lines} {rel}:{first} {name}")
        if over:
            many = "functions are" if len(over) > 1 else "function is"
            print(f"gpuslice function length: {len(over)} product {many} longer than {args.max} lines "
                  "(split them into named steps)")
            return 1
        longest = f"; the longest has {rows[0][0]}" if rows else ""
        print(f"gpuslice function length: {len(rows)} product functions, none longer than {args.max} lines{longest}")
        return 0
    for lines, rel, first, name in rows[:args.top]:
        print(f"{lines} {rel}:{first} {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
