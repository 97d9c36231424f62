"""Every test count the reference docs quote is the build's.

A count is a number followed by "tests" or "test" (up to two words between,
as in "58 input tests" or "the 51 tests labelled `concurrent`"). It must be
exact and name what it counts: the nearest `ctest ... -N ...` selector in
the same paragraph (in a fenced block, on the same line, before any `#`
comment), whose options are run against the build directory
(KMT_BUILD_DIR) and must list exactly that many
tests. "about 290 tests", or a count with no selector, fails. Dated runs
belong in docs/notes/, which are not checked."""
import os
import re
import shlex
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True  # the checkout stays as git has it
from docs_links_test import FENCE, ROOT, markdown_files  # noqa: E402

COUNT = re.compile(r"(?<![\w.,×⁰-⁹])(\d{1,3}(?:,\d{3})*|\d+)((?:\s+[\w`'-]+){0,2}?)\s+tests?\b")
APPROXIMATE = re.compile(r"\b(about|around|roughly|some|over|nearly|almost|~)\s*$")
SELECTOR = re.compile(r"\bctest\b[^`#\n]*?\s-N\b[^`#\n]*")


def reference_files():
    """The tree's Markdown files without the dated notes."""
    return [path for path in markdown_files() if not path.startswith("docs/notes/")]


def paragraphs(path):
    """(first line number, text) of each prose paragraph; each line of a
    fenced block is a paragraph of its own."""
    fenced = False
    start, lines = None, []
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if FENCE.match(line):
                if lines:
                    yield start, "".join(lines)
                start, lines = None, []
                fenced = not fenced
                continue
            if fenced or line.startswith("    "):
                if lines:
                    yield start, "".join(lines)
                start, lines = None, []
                yield number, line
                continue
            if not line.strip():
                if lines:
                    yield start, "".join(lines)
                start, lines = None, []
                continue
            if start is None:
                start = number
            lines.append(line)
    if lines:
        yield start, "".join(lines)


def nearest(selectors, count):
    """The selector closest to the count in its paragraph, the one after it
    on a tie."""
    def distance(selector):
        if selector.start() >= count.end():
            return (selector.start() - count.end(), 0)
        return (count.start() - selector.end(), 1)
    return min(selectors, key=distance, default=None)


def listed(build, selector):
    """How many tests `ctest -N` with the selector's options lists. `build`
    is a directory whose CTestTestfile.cmake reads the build's (see main)."""
    words = shlex.split(selector)[1:]
    options = []
    skip = False
    for word in words:
        if skip:
            skip = False
            continue
        if word == "--test-dir":
            skip = True
            continue
        if word.startswith("--test-dir=") or word == "-N":
            continue
        options.append(word)
    # A ctest running beside this one in the same build can be rewriting a
    # test program's discovered list, which fails a listing: list again.
    for _ in range(3):
        result = subprocess.run(["ctest", "--test-dir", build, "-N"] + options,
                                capture_output=True, text=True)
        match = re.search(r"Total Tests: (\d+)", result.stdout)
        if result.returncode == 0 and match:
            break
    if result.returncode != 0 or not match:
        first = (result.stderr.strip() or result.stdout.strip() or "no output").splitlines()[0]
        raise RuntimeError(f"`{selector}` did not list its tests: {first[:200]}")
    return int(match.group(1))


def main():
    build = os.environ.get("KMT_BUILD_DIR", "")
    if not build or not os.path.isfile(os.path.join(build, "CTestTestfile.cmake")):
        print("docs_counts_test: set KMT_BUILD_DIR to a configured build directory", file=sys.stderr)
        return 2
    # ctest -N writes its logs into the directory it lists, where the ctest
    # running this test keeps its own: list the build through a directory
    # of this test's that includes it.
    with tempfile.TemporaryDirectory(prefix="docs-counts-") as lister:
        with open(os.path.join(lister, "CTestTestfile.cmake"), "w", encoding="utf-8") as f:
            f.write(f'subdirs("{os.path.abspath(build)}")\n')
        return check(lister)


def check(build):
    problems = []
    checked = 0
    cache = {}
    for path in reference_files():
        for number, text in paragraphs(path):
            for match in COUNT.finditer(text):
                line = number + text.count("\n", 0, match.start())
                quoted = int(match.group(1).replace(",", ""))
                where = f"{path}:{line}: \"{' '.join(match.group(0).split())}\""
                if APPROXIMATE.search(text[:match.start()]):
                    problems.append(f"{where}: an approximate count; quote the exact one with its selector")
                    continue
                selector = nearest(SELECTOR.finditer(text), match)
                if not selector:
                    problems.append(f"{where}: no `ctest ... -N ...` selector in its paragraph")
                    continue
                command = selector.group(0).strip()
                try:
                    if command not in cache:
                        cache[command] = listed(build, command)
                except RuntimeError as error:
                    problems.append(f"{where}: {error}")
                    continue
                checked += 1
                if cache[command] != quoted:
                    problems.append(f"{where}: `{command}` lists {cache[command]} tests, not {quoted}")
    for problem in problems:
        print(problem, file=sys.stderr)
    if problems:
        print(f"docs_counts_test: {len(problems)} quoted test counts wrong or unchecked",
              file=sys.stderr)
        return 1
    print(f"docs_counts_test: {checked} quoted test counts match the build")
    return 0


if __name__ == "__main__":
    sys.exit(main())
