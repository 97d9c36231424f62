"""Every relative link of the project's Markdown files resolves: the file or
folder it names exists, and a #fragment names a heading of the target as
GitHub renders its anchor. Links inside code (fenced blocks, `spans`) are
text, not links, and are not checked; nor are links to other sites."""
import os
import re
import subprocess
import sys

ROOT = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                       os.path.join(os.path.dirname(__file__), ".."))

LINK = re.compile(r"!?\[(?:[^\]\\]|\\.)*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
FENCE = re.compile(r"^\s*(```|~~~)")
HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
CODE_SPAN = re.compile(r"(`+)(.+?)\1")


def markdown_files():
    """The tree's Markdown files as git lists them (build trees are ignored);
    outside a checkout, every one but those under build*/ folders."""
    git = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "*.md"],
        cwd=ROOT, capture_output=True, text=True)
    if git.returncode == 0:
        listed = git.stdout.split()
    else:
        listed = []
        for folder, subfolders, names in os.walk(ROOT):
            subfolders[:] = [s for s in subfolders if not s.startswith((".", "build"))]
            listed += [os.path.relpath(os.path.join(folder, n), ROOT)
                       for n in names if n.endswith(".md")]
    return sorted(path for path in listed if os.path.isfile(os.path.join(ROOT, path)))


def prose_lines(path):
    """The lines of a Markdown file outside fenced code blocks, numbered."""
    fenced = False
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if FENCE.match(line):
                fenced = not fenced
                continue
            if not fenced:
                yield number, line


def slug(heading):
    """GitHub's anchor of a heading: its text lowercased, code marks and
    punctuation dropped (hyphens and underscores kept), spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = text.replace("`", "").lower()
    text = "".join(c for c in text if c.isalnum() or c in "-_ ")
    return text.replace(" ", "-")


def anchors(path):
    seen = {}
    found = set()
    for _, line in prose_lines(path):
        match = HEADING.match(line)
        if not match:
            continue
        base = slug(match.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def main():
    files = markdown_files()
    if not files:
        print("docs_links_test: no Markdown files found", file=sys.stderr)
        return 1
    anchor_cache = {}
    broken = []
    links = 0
    for name in files:
        path = os.path.join(ROOT, name)
        for number, line in prose_lines(path):
            for target in LINK.findall(CODE_SPAN.sub("", line)):
                if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):
                    continue  # another site, or mail
                links += 1
                file_part, _, fragment = target.partition("#")
                resolved = (os.path.normpath(os.path.join(os.path.dirname(path), file_part))
                            if file_part else path)
                where = f"{name}:{number}: {target}"
                if not resolved.startswith(ROOT + os.sep) and resolved != ROOT:
                    broken.append(f"{where}: outside the repository")
                elif not os.path.exists(resolved):
                    broken.append(f"{where}: no such file")
                elif fragment and resolved.endswith(".md"):
                    if resolved not in anchor_cache:
                        anchor_cache[resolved] = anchors(resolved)
                    if fragment not in anchor_cache[resolved]:
                        broken.append(f"{where}: no heading with anchor #{fragment}")
    for line in broken:
        print(line, file=sys.stderr)
    if broken:
        print(f"docs_links_test: {len(broken)} of {links} relative links broken", file=sys.stderr)
        return 1
    print(f"docs_links_test: {links} relative links in {len(files)} files resolve")
    return 0


if __name__ == "__main__":
    sys.exit(main())
