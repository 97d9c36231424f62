#!/usr/bin/env python3
"""Fails when a reference may outlive the temporary it reads.

A range-for binds its range to a reference, `auto&& __range = EXPR;`, and
a temporary in EXPR lives as long as that reference only if EXPR is the
temporary itself or one of its members (`for (x : f().member)` is safe). A
temporary reached through what a call returns dies at the end of EXPR,
before the loop body runs:

    for (const Model& m : snapshot()->models)   // the shared_ptr is gone
    for (const Row& r : *Load(path))            // so is the StatusOr
    for (int v : Table()[3])                    // and the vector

The same holds for a reference declared from such an expression
(`const auto& info = registry.Find(name)->info;`). GCC 12 and clang 14 warn
of neither, so this check reads the sources: in every range-for range and
every reference initialised by `=`, it refuses a call's result followed by
`->`, `[`, `.value()`, `.front()`, `.back()` or `.at(`, or dereferenced
with a leading `*`, unless the call returns an iterator (begin, end, find,
lower_bound, upper_bound: the element lives in the container named before
it). Hold the call's result in a local first. Where the call returns a raw
pointer or a reference to something that outlives the statement, say so
with a `// lifetime: why` comment on the line or the line above.

Usage: lifetime_lint.py [ROOT]   (default: this checkout; only files git
tracks, or the files given after --files).
"""

import pathlib
import re
import subprocess
import sys

ITERATOR_CALLS = {"begin", "end", "rbegin", "rend", "cbegin", "cend", "find", "lower_bound",
                  "upper_bound", "next", "prev"}
REFERENCE_ACCESSORS = r"\.\s*(?:value|front|back)\s*\(\s*\)|\.\s*at\s*\("
PROSE = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)


def blank(text):
    """The text with comments and literals replaced by spaces, lines kept."""
    return PROSE.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)


def closing(text, open_at):
    """The index just past the bracket that closes the one at open_at."""
    depth = 0
    for i in range(open_at, len(text)):
        if text[i] in "([{":
            depth += 1
        elif text[i] in ")]}":
            depth -= 1
            if depth == 0:
                return i + 1
    return len(text)


def ranges(code):
    """(offset, expression) of every range-for range and reference initialiser."""
    for m in re.finditer(r"\bfor\s*\(", code):
        end = closing(code, m.end() - 1)
        depth, i = 0, m.end()
        while i < end - 1:
            c = code[i]
            if c in "([{":
                depth += 1
            elif c in ")]}":
                depth -= 1
            elif c == ";" and depth == 0:
                break
            elif c == ":" and depth == 0 and code[i - 1] != ":" and code[i + 1] != ":":
                yield i + 1, code[i + 1:end - 1]
                break
            i += 1
    # `T& name = expr;` and `T&& name = expr;`, not `a & b == c` nor `&&` in a condition.
    for m in re.finditer(r"[\w>]\s*&&?\s*(\w+)\s*=(?!=)", code):
        start = m.end()
        semicolon = code.find(";", start)
        if semicolon < 0:
            continue
        yield start, code[start:semicolon]


def calls(expression):
    """(name, end) of each call in the expression: the callee's last name and
    the index just past its closing parenthesis."""
    for m in re.finditer(r"(\w+)\s*(?:<[^;(){}]*>)?\s*\(", expression):
        yield m.group(1), closing(expression, m.end() - 1)


def findings(code):
    for offset, expression in ranges(code):
        for name, end in calls(expression):
            if name in ("if", "for", "while", "switch", "return", "sizeof", "static_cast",
                        "reinterpret_cast", "const_cast", "dynamic_cast", "decltype"):
                continue
            after = expression[end:]
            reads_through = re.match(r"\s*(->|\[)", after) or re.match(REFERENCE_ACCESSORS, after)
            if reads_through and not (reads_through.group(0).strip() == "->" and
                                      name in ITERATOR_CALLS):
                yield offset, expression
                break
        else:
            if re.match(r"\s*\*\s*(?:[\w:]+\s*(?:<[^;]*>)?\s*\(|\()", expression):
                yield offset, expression


def check(path, text):
    code = blank(text)
    lines = text.split("\n")
    for offset, expression in findings(code):
        line = code.count("\n", 0, offset)
        if "// lifetime:" in lines[line] or (line > 0 and "// lifetime:" in lines[line - 1]):
            continue
        yield f"{path}:{line + 1}: {' '.join(expression.split())[:100]}"


def main(argv):
    if len(argv) > 2 and argv[1] == "--files":
        paths = [pathlib.Path(p) for p in argv[2:]]
    else:
        root = pathlib.Path(argv[1] if len(argv) > 1 else pathlib.Path(__file__).parent.parent)
        listed = subprocess.run(["git", "-C", str(root), "ls-files", "*.cc", "*.h"],
                                check=True, capture_output=True, text=True).stdout.split()
        paths = [root / p for p in listed]
    if not paths:
        print("lifetime_lint: no sources found", file=sys.stderr)
        return 1
    found = [f for p in paths for f in check(p, p.read_text())]
    for f in found:
        print(f"{f}\n    a call's result is read through after the call: hold it in a local "
              "(or say why it lives on with // lifetime:)", file=sys.stderr)
    if found:
        return 1
    print(f"lifetime_lint: {len(paths)} files, no reference outliving a temporary")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
