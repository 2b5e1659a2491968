"""The Markdown links of RESULTS.md and of the write-ups under results/: the index leads to the
write-ups and each write-up back to the index and to what supersedes it, so a link that names
a missing file or heading is a broken path to the evidence, and the check says so.

A link is resolved from the directory of the file that holds it (as a Markdown viewer does);
`http(s):` and `mailto:` links are not followed. A `#fragment` must name a heading of the
target file, by the slug GitHub gives it (`slug`).
"""

from __future__ import annotations

import re
from pathlib import Path

from . import reports

LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6} (.+?)\s*#*\s*$")


def slug(title: str) -> str:
    """A heading's anchor as GitHub makes it: lower case, punctuation and symbols dropped
    (letters, digits, `_`, `-` and spaces kept), spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", title.strip().lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """The anchors of a Markdown file's headings (outside fenced code), a repeated slug
    numbered as GitHub numbers it."""
    seen: dict[str, int] = {}
    found, fenced = set(), False
    for line in path.read_text(errors="replace").splitlines():
        if re.match(r"^\s*(```|~~~)", line):
            fenced = not fenced
        heading = None if fenced else HEADING.match(line)
        if heading:
            base = slug(heading.group(1))
            count = seen.get(base, 0)
            found.add(f"{base}-{count}" if count else base)
            seen[base] = count + 1
    return found


def check_links(path: Path) -> tuple[list[str], int]:
    """Problems with a file's relative links (a missing target or heading), and how many it
    has. Links in inline code or fenced code are examples, not links."""
    problems, count, fenced = [], 0, False
    rel = path.relative_to(reports.ROOT)
    for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
        if re.match(r"^\s*(```|~~~)", line):
            fenced = not fenced
            continue
        if fenced:
            continue
        for target in LINK.findall(re.sub(r"`[^`]*`", "``", line)):
            if re.match(r"^(https?:|mailto:)", target):
                continue
            count += 1
            file, _, fragment = target.partition("#")
            resolved = (path.parent / file).resolve() if file else path
            if not resolved.exists():
                problems.append(f"{rel}:{number}: link to {target}: {file} is missing")
            elif fragment and resolved.suffix == ".md" and fragment not in anchors(resolved):
                problems.append(f"{rel}:{number}: link to {target}: no heading "
                                f"#{fragment} in {file or rel.name}")
    return problems, count
