"""RESULTS.md and the write-ups it indexes (results/**/README.md) read section by section: a
figure there is evidence only where the section says which clean reports it read (Source
lines), or says that none backs it (Unbacked), or that it states none. What a section may be
quoted for in README is decided here too, since it depends on the same lines.

Every path a Source, Figure or other line cites (`results/...`) is relative to the repository's
root, in the index and in a write-up alike, so that a section reads the same wherever it is.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from . import reports
from .figures import check_figure
from .links import check_links
from .reports import Report, exists, reports_at

CITED = re.compile(r"`(results/[^`\s]*)`")


@dataclass
class Section:
    """A `##` or `###` section of RESULTS.md or of a write-up: its markers, which reports its
    clean Source lines cite (what its Figure lines may read), its text apart from its Unbacked
    and Withdrawn quotes (what README may quote from it), and the file that holds it."""

    line: int
    title: str
    marked: bool = False
    unbacked: bool = False
    withdrawn: bool = False
    clean_sources: int = 0
    dirty_mentions: tuple[str, ...] = ()
    sourced: set = field(default_factory=set)
    backed: list = field(default_factory=list)
    unbacked_text: list = field(default_factory=list)
    figures: list = field(default_factory=list)
    file: str = "RESULTS.md"

    def citable(self) -> str | None:
        """Why README may not quote this section, or None when it may."""
        if self.withdrawn:
            return "is withdrawn"
        if not self.clean_sources:
            return "has no clean Source line"
        return None


def check_source(line: str, where: str, by_path: dict[str, Report]) -> list[str]:
    problems = []
    paths = CITED.findall(line)
    if not paths:
        problems.append(f"{where}: a Source line cites no `results/...` path")
    for cited in paths:
        if not exists(cited):
            problems.append(f"{where}: {cited} is missing")
            continue
        found = reports_at(cited, by_path)
        if not found:
            problems.append(f"{where}: {cited} holds no report with provenance")
        for r in found:
            if r.dirty:
                problems.append(f"{where}: {r.path} was made from a tree with uncommitted "
                                "changes")
            for fact in (r.commit, r.machine(), r.broker):
                if fact not in line:
                    problems.append(f"{where}: {r.path} records '{fact}', not named on its "
                                    "Source line")
    return problems


def note_line(section: Section, line: str, quote: str | None) -> str | None:
    """Files a section's line as backed text or as an Unbacked/Withdrawn quote's, and returns
    the quote the next line continues (a blockquote runs while its lines start with `>`)."""
    if not line.startswith(">"):
        quote = None
    elif line.startswith("> Unbacked:"):
        quote = "unbacked"
    elif line.startswith("> **Withdrawn"):
        quote, section.withdrawn = "withdrawn", True
    if quote:
        section.unbacked_text.append(line)
    else:
        section.backed.append(line)
    return quote


def write_ups() -> list[Path]:
    """The files the check reads section by section: RESULTS.md, the index, then every
    write-up under results/ (a README.md), in path order."""
    found = sorted(p for p in (reports.ROOT / "results").rglob("README.md") if p.is_file())
    return [reports.ROOT / "RESULTS.md"] + found


def parse_results(results_md: Path, by_path: dict[str, Report]) -> tuple[list[Section],
                                                                           list[str], int]:
    """A file's sections with what they cite (the first, "preamble", is the text before its
    first section), the problems of its Source lines and paths, and how many Source lines it
    has."""
    problems: list[str] = []
    name = str(results_md.relative_to(reports.ROOT))
    sections: list[Section] = [Section(0, "preamble", file=name)]
    sources, quote = 0, None
    for number, line in enumerate(results_md.read_text().splitlines(), 1):
        where = f"{name}:{number}"
        if re.match(r"^#{2,3} ", line):
            sections.append(Section(number, line.lstrip("# ").strip(), file=name))
            sections[-1].backed.append(sections[-1].title)
            quote = None
            continue
        section = sections[-1]
        quote = note_line(section, line, quote)
        if line.startswith("Source:"):
            section.marked, sources = True, sources + 1
            found = check_source(line, where, by_path)
            problems += found
            if not found:
                section.clean_sources += 1
                for cited in CITED.findall(line):
                    section.sourced.update(r.path for r in reports_at(cited, by_path))
            continue
        if line.startswith("Figure:"):
            section.figures.append((number, line))
            continue
        if line.startswith("> Unbacked:"):
            section.marked = section.unbacked = True
        elif line.startswith("> No figures."):
            section.marked = True
        for cited in CITED.findall(line):
            if not exists(cited):
                problems.append(f"{where}: {cited} is missing")
            dirty = tuple(r.path for r in reports_at(cited, by_path) if r.dirty)
            section.dirty_mentions += dirty
    return sections, problems, sources


def check_file(path: Path, by_path: dict[str, Report]) -> tuple[list[str], list[Section],
                                                                 int, int]:
    """Problems with one file's citations, Figure lines and links; its sections; how many
    Source lines and links it has."""
    sections, problems, sources = parse_results(path, by_path)
    sections = sections[1:]
    for s in sections:
        where = f"{s.file}:{s.line}: section '{s.title}'"
        if not s.marked:
            problems.append(f"{where} has no Source, Unbacked or 'No figures.' line")
        if s.dirty_mentions and not s.unbacked:
            problems.append(f"{where} names reports made from a dirty tree "
                            f"({s.dirty_mentions[0]}, ...) without an Unbacked line")
        for number, line in s.figures:
            problems += check_figure(line, f"{s.file}:{number}: section '{s.title}'", s,
                                     by_path)
    broken, links = check_links(path)
    return problems + broken, sections, sources, links


def summary(label: str, sections: list[Section], sources: int, links: int) -> str:
    unbacked = sum(s.unbacked for s in sections)
    figures = sum(len(s.figures) for s in sections)
    return (f"{label}: {len(sections)} sections, {sources} Source lines, {unbacked} sections "
            f"with an Unbacked line, {figures} Figure lines compared with their reports, "
            f"{links} links")


def check(files: list[Path], found: list[Report]) -> tuple[list[str], list[Section]]:
    """Problems with the citations, Figure lines and links of RESULTS.md and the write-ups
    (`files`, RESULTS.md first) against the reports `found`, and all their sections,
    RESULTS.md's first."""
    by_path = {r.path: r for r in found}
    problems, sections, sources, links = [], [], 0, 0
    for number, path in enumerate(files):
        in_problems, in_file, file_sources, file_links = check_file(path, by_path)
        if number == 0:
            print(summary(path.name, in_file, file_sources, file_links))
        problems, sections = problems + in_problems, sections + in_file
        sources, links = sources + file_sources, links + file_links
    print(summary(f"RESULTS.md and the {len(files) - 1} README.md files under results/ "
                  "(write-ups)", sections, sources, links))
    return problems, sections
