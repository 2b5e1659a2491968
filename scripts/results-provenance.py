#!/usr/bin/env python3
"""Inventory of the bench reports under results/, and a check that RESULTS.md and README.md
state only figures a report of a committed tree backs.

RESULTS.md is only evidence where a report of a committed tree backs each figure, on the machine
and broker the report records; README.md quotes RESULTS.md. This script makes both checkable
instead of a matter of trust.

A report is a file the bench wrote with its provenance: a Markdown report whose header carries
`- commit:` and `- machine:` lines (`bench run`, `bench tune`, `bench versus`, and command logs
recorded with `scripts/record.sh`), or a JSON-lines report whose first line is
`{"provenance": ...}` and which has no Markdown report of the same run beside it. Everything else
under results/ (plots, logs, console captures, scenario files) carries no provenance of its own
and cannot back a figure.

RESULTS.md cites its evidence with lines of this form, one or more per section:

    Source: `results/DIR/RUN.md` (commit C; 2 cores, CPU; broker B)

A cited path may be a directory (ending in `/`): every report in it, recursively. The check
fails (exit 1) when a Source line cites a path that is missing, holds no report, holds a report
made from a tree with uncommitted changes, or does not name each cited report's commit, CPU,
cores and broker as the report records them. A section whose figures no clean report backs
carries a line starting `> Unbacked:` instead; the paths it names need only exist, and a
section that names a dirty report anywhere must carry one. Every `##` and `###` section needs a
Source line, an Unbacked line, or `> No figures.` of its own.

A section states a figure machine-checkably with a Figure line, which the check compares with
the report's own value (a Source line only says which reports a section read):

    Figure: VALUE [UNIT] = [AGG of ]SELECTOR in `PATH`[ (N reports)][; note]

    AGG       median | min | max | range   over every report under PATH that has the value;
                                           `range` states "LOW-HIGH"; N, the number of
                                           reports, is required with an AGG and checked
    SELECTOR  "COLUMN" of ROW        the cell of a Markdown table in the report: the column
                                     headed COLUMN, the row whose first cells are ROW (cells
                                     separated by commas, each a word or "quoted"; a cell
                                     matches its whole text or its start)
              .FIELD.PATH of ROW     a field of the report's JSON line whose "scenario" is ROW
              /REGEX/                the first group of REGEX in the report's text (for logs
                                     recorded with scripts/record.sh: counts, exit status)

for example `Figure: 6.2 ms = median of "p50 ms" of latency-500 in
`results/latency-47e6bdc/20261202-*.md` (3 reports)`. PATH is a report, a directory or a glob,
as on Source lines; its reports must be clean and cited by the section's Source lines. VALUE
matches within the rounding of its printed decimals (34,934 within 0.5; 0.67 within 0.005).

README.md is read too. Its blocks (a paragraph, a list item, a table row, a heading; fenced code
is not read) that state a measured figure must cite a RESULTS.md section as `RESULTS.md "Title"`
(the title or its start, unique among the `##`/`###` titles), and each such figure must appear
in the text of one of the sections cited (its title, body, Source and Figure lines) and not in
its Unbacked lines; a cited section must have a clean Source line and must not be withdrawn.
A figure is found as written after normalising thousands separators, `×`/`x`, dashes and the
minus sign; a range ("8.5-9.0 s") as written or by both its ends; an integer below 100 only
beside its unit ("3 %"), and an abbreviation ("27.9k") also as the number it rounds. The count
of figures a cited section's Figure lines state is printed (`--figures` lists each).

A measured figure is a number, outside inline code and HTML comments, with a unit only
measurements carry: a rate (rec/s, records/s, rows/s, events/s), a cost per record (µs, or
B/ms per record or row), a ratio (`2.4x`, `15.6×`, or a decimal below 1 such as `0.72`), a
count of runs (`3 of 9`), a percentage, a percentile's value (`p99 58 ms`); or a duration (ms,
s, min) written as a range (`8.5-9.0 s`), to the second (`10 min 23 s`), as approximate (`~10
ms`, `about 2 minutes`), of a commit (`138 s at 0cff770`), or in a sentence that says it was
`measured`, `took`, `passed` or `recorded`. A number right after `at least`, `at most`, `up
to`, `within`, `every`, `default`, `≤` or `≥` is a limit, not a measurement. A block whose
numbers are inputs or settings that these rules take for measurements says so with an HTML
comment `<!-- not measured: REASON -->` (sparingly: how many blocks do is printed).

`--check` also runs the unit tests in scripts/test_results_provenance.py.

Usage:
    scripts/results-provenance.py            # inventory, summary, then the check
    scripts/results-provenance.py --check    # the check only
    scripts/results-provenance.py --figures  # the check, listing README's figures and backing
    scripts/results-provenance.py --cite PATH...   # the Source line for PATH
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import re
import statistics
import sys
import unittest
from collections import Counter
from dataclasses import dataclass, field
from fnmatch import fnmatch
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HEADER_LINES = 20
DIRTY = "(with uncommitted changes)"
TITLE = re.compile(r"^# (Benchmark run|Tuning sweep|goharvest side by side) (\S+)")
MACHINE = re.compile(r"^(\d+) cores \((.*)\), (\d+) GiB$")
CITED = re.compile(r"`(results/[^`\s]*)`")
OPT_OUT = re.compile(r"<!--\s*not measured:\s*\S.*?-->", re.S)
CITATION = re.compile(r'(?<!`)RESULTS\.md,?\s+"([^"]+)"')  # in backticks: an example


@dataclass
class Report:
    path: str
    run_id: str
    commit: str
    dirty: bool
    cores: str
    cpu: str
    broker: str
    scope: str

    def machine(self) -> str:
        return f"{self.cores} cores, {self.cpu}"


@dataclass
class Section:
    """A `##` or `###` section of RESULTS.md: its markers, which reports its clean Source lines
    cite (what its Figure lines may read), and its text apart from its Unbacked and Withdrawn
    quotes (what README may quote from it)."""

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

    def citable(self) -> str | None:
        """Why README may not quote this section, or None when it may."""
        if self.withdrawn:
            return "is withdrawn"
        if not self.clean_sources:
            return "has no clean Source line"
        return None


@dataclass
class FigureLine:
    """A parsed `Figure:` line of RESULTS.md."""

    value: str
    unit: str
    agg: str | None
    column: str | None
    field_path: str | None
    regex: str | None
    row: list
    path: str
    count: int | None


@dataclass
class Block:
    """A README block (paragraph, list item, table row, heading) and its first line."""

    line: int
    text: str


@dataclass
class Figure:
    """A measured figure found in README prose: its canonical token ("8.5-9.0", "0.72",
    "20 of 20") and the unit that made it one."""

    token: str
    unit: str


# --- the inventory of reports -------------------------------------------------------------


def broker_label(sentence: str) -> str:
    """A broker sentence from a report in a few words, as the report names it."""
    if not sentence:
        return "broker unrecorded"
    if "mock cluster" in sentence:
        return "embedded mock broker (librdkafka)"
    kafka = re.match(r"Apache Kafka (\S+?)[,\s]", sentence)
    if kafka:
        nodes = "1 node" if "1 node" in sentence or "one KRaft node" in sentence else "nodes ?"
        return f"Apache Kafka {kafka.group(1)}, {nodes}"
    external = re.match(r"external cluster at (\S+)", sentence)
    if external:
        return f"external cluster at {external.group(1).rstrip(';,')}"
    return sentence.split(";")[0][:60]


def scope_of(command: str) -> str:
    """The profile or scenarios a command ran."""
    words = command.strip("`").split()
    verb = next((w for w in words if w in ("run", "tune", "versus")), "?")
    picks = [v for f, v in zip(words, words[1:]) if f in ("--profile", "--scenario", "--workload")]
    if verb == "run":
        return ",".join(picks) or "default profile"
    return " ".join([verb, ",".join(picks)]).strip()


def parse_provenance(prov: dict) -> tuple[str, bool, str, str]:
    commit = prov.get("commit", "")
    machine = MACHINE.match(prov.get("machine", ""))
    cores, cpu = (machine.group(1), machine.group(2)) if machine else ("?", "?")
    return commit.split()[0] if commit else "?", DIRTY in commit, cores, cpu


def jsonl_provenance(path: Path) -> dict | None:
    try:
        with path.open() as f:
            first = json.loads(f.readline())
    except (OSError, ValueError):
        return None
    prov = first.get("provenance") if isinstance(first, dict) else None
    return prov if isinstance(prov, dict) else None


def markdown_report(path: Path) -> Report | None:
    lines = path.read_text(errors="replace").splitlines()[:HEADER_LINES]
    facts = {}
    run_id = ""
    for line in lines:
        title = TITLE.match(line)
        if title:
            run_id = title.group(2)
        for key in ("command", "commit", "machine", "broker"):
            if line.startswith(f"- {key}: "):
                facts[key] = line[len(key) + 4 :]
    if "commit" not in facts or "machine" not in facts:
        return None
    broker = facts.get("broker", "")
    if not broker:
        prov = jsonl_provenance(path.with_name(f"{run_id}.jsonl"))
        broker = prov.get("broker", "") if prov else ""
    commit, dirty, cores, cpu = parse_provenance(facts)
    rel = str(path.relative_to(ROOT))
    return Report(rel, run_id, commit, dirty, cores, cpu, broker_label(broker),
                  scope_of(facts.get("command", "")))


def inventory() -> tuple[list[Report], list[str], int]:
    """Every report under results/, the files that carry no provenance, and how many JSON-lines
    files are the companions of a Markdown report."""
    reports, others, md_runs, companions = [], [], set(), 0
    files = sorted(p for p in (ROOT / "results").rglob("*") if p.is_file())
    for path in files:
        if path.suffix == ".md":
            report = markdown_report(path)
            if report:
                reports.append(report)
                md_runs.add((path.parent, report.run_id))
                continue
        if path.suffix != ".jsonl":
            others.append(str(path.relative_to(ROOT)))
    for path in files:
        if path.suffix != ".jsonl":
            continue
        prov = jsonl_provenance(path)
        if prov is None:
            others.append(str(path.relative_to(ROOT)))
            continue
        if (path.parent, prov.get("run_id", path.stem)) in md_runs:
            companions += 1
            continue
        commit, dirty, cores, cpu = parse_provenance(prov)
        reports.append(Report(str(path.relative_to(ROOT)), prov.get("run_id", ""), commit,
                              dirty, cores, cpu, broker_label(prov.get("broker", "")),
                              scope_of(prov.get("command", ""))))
    reports.sort(key=lambda r: r.path)
    return reports, sorted(others), companions


def print_inventory(reports: list[Report], others: list[str], companions: int) -> None:
    print("| commit | dirty | CPU | cores | broker | profile/scenario | file |")
    print("|---|---|---|---:|---|---|---|")
    for r in reports:
        print(f"| {r.commit} | {'DIRTY' if r.dirty else 'clean'} | {r.cpu} | {r.cores} "
              f"| {r.broker} | {r.scope} | {r.path} |")
    dirty = sum(r.dirty for r in reports)
    print(f"\n{len(reports)} reports: {len(reports) - dirty} clean, {dirty} dirty "
          f"(with uncommitted changes)")
    for kind, label in (("machine", Report.machine), ("broker", lambda r: r.broker)):
        for value, count in Counter(label(r) for r in reports).most_common():
            dirty_here = sum(r.dirty for r in reports if label(r) == value)
            print(f"  {kind} {value}: {count} ({dirty_here} dirty)")
    exts = Counter(Path(o).suffix or Path(o).name for o in others)
    print(f"{companions} JSON-lines files beside their Markdown report; {len(others)} other "
          "files without provenance: " + ", ".join(f"{n} {e}" for e, n in exts.most_common()))


def reports_at(cited: str, by_path: dict[str, Report]) -> list[Report]:
    """The reports a cited path names: a file, a directory (every report under it) or a glob."""
    if "*" in cited:
        return [r for p, r in by_path.items() if fnmatch(p, cited)]
    if cited.endswith("/") or (ROOT / cited).is_dir():
        prefix = cited.rstrip("/") + "/"
        return [r for p, r in by_path.items() if p.startswith(prefix)]
    return [by_path[cited]] if cited in by_path else []


def exists(cited: str) -> bool:
    if "*" in cited:
        return any(ROOT.glob(cited))
    return (ROOT / cited.rstrip("/")).exists()


# --- RESULTS.md: Source lines ---------------------------------------------------------------


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


def parse_results(results_md: Path, by_path: dict[str, Report]) -> tuple[list[Section],
                                                                           list[str], int]:
    """RESULTS.md's sections with what they cite, the problems of its Source lines and paths,
    and how many Source lines it has."""
    problems: list[str] = []
    sections: list[Section] = [Section(0, "preamble")]
    sources, quote = 0, None
    for number, line in enumerate(results_md.read_text().splitlines(), 1):
        where = f"RESULTS.md:{number}"
        if re.match(r"^#{2,3} ", line):
            sections.append(Section(number, line.lstrip("# ").strip()))
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


def check(results_md: Path, reports: list[Report]) -> tuple[list[str], list[Section]]:
    """Problems with RESULTS.md's citations and Figure lines, and its sections."""
    by_path = {r.path: r for r in reports}
    sections, problems, sources = parse_results(results_md, by_path)
    sections = sections[1:]
    for s in sections:
        if not s.marked:
            problems.append(f"RESULTS.md:{s.line}: section '{s.title}' has no Source, "
                            "Unbacked or 'No figures.' line")
        if s.dirty_mentions and not s.unbacked:
            problems.append(f"RESULTS.md:{s.line}: section '{s.title}' names reports made from "
                            f"a dirty tree ({s.dirty_mentions[0]}, ...) without an Unbacked line")
        for number, line in s.figures:
            problems += check_figure(line, f"RESULTS.md:{number}: section '{s.title}'", s,
                                     by_path)
    unbacked = sum(s.unbacked for s in sections)
    figures = sum(len(s.figures) for s in sections)
    print(f"RESULTS.md: {len(sections)} sections, {sources} Source lines, "
          f"{unbacked} sections with an Unbacked line, {figures} Figure lines compared with "
          "their reports")
    return problems, sections


# --- RESULTS.md: Figure lines ---------------------------------------------------------------

FIGURE_HEAD = re.compile(r"^Figure:\s*(?P<value>~?\d[\d,]*(?:\.\d+)?(?:\s*[-–]\s*\d[\d,]*"
                         r"(?:\.\d+)?)?)\s*(?P<unit>[^=]*?)\s*=\s*(?P<rhs>.*)$")
FIGURE_TAIL = re.compile(r"\s+in\s+`(?P<path>results/[^`]+)`\s*(?:\((?P<count>\d+) "
                         r"reports?\))?(?P<rest>.*)$")


def parse_row(text: str) -> list[str]:
    """A row's leading cells as a Figure line names them: comma-separated, each a word or
    "quoted" (quotes keep a cell's own commas)."""
    return [c.strip() for c in next(csv.reader([text.strip()], skipinitialspace=True)) if c]


def parse_selector(text: str) -> tuple[str | None, str | None, str | None, list[str]] | str:
    """(column, JSON field, regex, row) of a Figure line's selector, or why it does not parse."""
    if len(text) > 1 and text.startswith("/") and text.endswith("/"):
        return None, None, text[1:-1], []
    quoted = re.match(r'^"([^"]+)"\s+of\s+(.+)$', text)
    if quoted:
        return quoted.group(1), None, None, parse_row(quoted.group(2))
    dotted = re.match(r"^\.([\w.]+)\s+of\s+(.+)$", text)
    if dotted:
        return None, dotted.group(1), None, parse_row(dotted.group(2))
    return 'not "COLUMN" of ROW, .FIELD of ROW or /REGEX/'


def parse_figure(line: str) -> FigureLine | str:
    """A Figure line's parts, or why it does not follow the grammar in this module's doc."""
    head = FIGURE_HEAD.match(line)
    if not head:
        return "a Figure line must read 'Figure: VALUE [UNIT] = ...'"
    rhs = head.group("rhs")
    tail = FIGURE_TAIL.search(rhs)
    if not tail:
        return "a Figure line must end its selector with: in `results/...`"
    selector, agg = rhs[: tail.start()].strip(), None
    aggregated = re.match(r"^(median|min|max|range) of\s+(.+)$", selector)
    if aggregated:
        agg, selector = aggregated.group(1), aggregated.group(2)
    parsed = parse_selector(selector)
    if isinstance(parsed, str):
        return parsed
    column, field_path, regex, row = parsed
    count = int(tail.group("count")) if tail.group("count") else None
    return FigureLine(head.group("value"), head.group("unit"), agg, column, field_path, regex,
                      row, tail.group("path"), count)


def number_in(text: str) -> float | None:
    """The first number of a report's cell or match ("≤50" -> 50, "15.6x" -> 15.6,
    "499 (500 / 500)" -> 499), or None for "-" and empty cells."""
    found = re.search(r"-?\d[\d,]*(?:\.\d+)?", text)
    return float(found.group(0).replace(",", "")) if found else None


def table_cells(line: str) -> list[str]:
    return [c.strip().replace("**", "") for c in line.strip().strip("|").split("|")]


def md_tables(text: str) -> list[tuple[list[str], list[list[str]]]]:
    """Every Markdown table of a report: its header cells and rows of cells."""
    tables, lines, i = [], text.splitlines(), 0
    while i < len(lines) - 1:
        if lines[i].startswith("|") and re.match(r"^\|[\s:|-]+$", lines[i + 1].strip()):
            header, rows, i = table_cells(lines[i]), [], i + 2
            while i < len(lines) and lines[i].startswith("|"):
                rows.append(table_cells(lines[i]))
                i += 1
            tables.append((header, rows))
            continue
        i += 1
    return tables


def cell_matches(cell: str, want: str) -> bool:
    """A row's cell is named by its whole text or by its start, up to a space, comma, colon
    or parenthesis (so `drain` names "drain" but not "drain-transactional")."""
    return cell == want or (cell.startswith(want) and cell[len(want)] in " ,:(")


def table_value(text: str, column: str, row: list[str]) -> list[str]:
    """The cells under COLUMN of the rows whose first cells are ROW, in every table."""
    found = []
    for header, rows in md_tables(text):
        if column not in header:
            continue
        j = header.index(column)
        for cells in rows:
            if len(cells) > j and len(cells) >= len(row) and all(
                    cell_matches(c, w) for c, w in zip(cells, row)):
                found.append(cells[j])
    return found


def json_value(path: Path, field_path: str, row: list[str]) -> list[str]:
    """The field of the JSON lines whose "scenario" is ROW, in a report or its companion."""
    jsonl = path if path.suffix == ".jsonl" else path.with_suffix(".jsonl")
    found = []
    if not jsonl.exists() or len(row) != 1:
        return found
    for line in jsonl.read_text().splitlines()[1:]:
        item = json.loads(line)
        if item.get("scenario") != row[0]:
            continue
        for key in field_path.split("."):
            item = item.get(key) if isinstance(item, dict) else None
        if isinstance(item, (int, float)) and not isinstance(item, bool):
            found.append(str(item))
    return found


def report_value(fig: FigureLine, path: str) -> float | None | str:
    """The figure's value in one report, None where the report lacks it, or why it is
    ambiguous (two different values for one selector)."""
    text = (ROOT / path).read_text(errors="replace")
    if fig.regex is not None:
        match = re.search(fig.regex, text, re.M)
        cells = [match.group(1) if match and match.groups() else match.group(0)] if match else []
    elif fig.column is not None:
        cells = table_value(text, fig.column, fig.row)
    else:
        cells = json_value(ROOT / path, fig.field_path, fig.row)
    values = {v for v in (number_in(c) for c in cells) if v is not None}
    if len(values) > 1:
        return f"reads {sorted(values)} in {path}: name its row more fully"
    return values.pop() if values else None


def tolerance(printed: str) -> float:
    """Half a unit of the printed value's last decimal: 34,934 -> 0.5, 0.67 -> 0.005."""
    decimals = printed.split(".")[1] if "." in printed else ""
    return 0.5 * 10 ** -len(decimals) + 1e-9


def agrees(printed: str, value: float) -> bool:
    return abs(float(printed.strip("~").replace(",", "")) - value) <= tolerance(printed)


def aggregate(agg: str | None, values: list[float]) -> list[float]:
    """The value a Figure line states: a single report's, or the median, min, max or range
    (low, high) of several."""
    if agg == "range":
        return [min(values), max(values)]
    pick = {"median": statistics.median, "min": min, "max": max}.get(agg or "", lambda v: v[0])
    return [pick(values)]


def figure_values(fig: FigureLine, reports: list[Report]) -> tuple[list[float], list[str]]:
    """Each report's value for a Figure line, and the problems of reading them."""
    values, problems = [], []
    for r in reports:
        value = report_value(fig, r.path)
        if isinstance(value, str):
            problems.append(value)
        elif value is not None:
            values.append(value)
    return values, problems


def describe(fig: FigureLine) -> str:
    """A Figure line's selector as the line names it, for its problems."""
    if fig.regex is not None:
        return f"/{fig.regex}/"
    what = f'"{fig.column}"' if fig.column is not None else f".{fig.field_path}"
    return f"{what} of {', '.join(fig.row)}"


def figure_count_problem(fig: FigureLine, found: int) -> str | None:
    """Why the number of values read does not fit the line: one value without an AGG, the
    stated number of reports with one."""
    if not found:
        return f"no report under it has {describe(fig)}"
    if fig.agg is None and found != 1:
        return f"{found} reports have it: state median/min/max/range of them and (N reports)"
    if fig.agg is not None and fig.count != found:
        return f"{found} reports have it, the line says ({fig.count} reports)"
    return None


def check_figure(line: str, where: str, section: Section,
                 by_path: dict[str, Report]) -> list[str]:
    """A Figure line against its reports: parsed, clean, among the section's Source lines,
    and the stated value equal to the report's within its printed rounding."""
    fig = parse_figure(line)
    if isinstance(fig, str):
        return [f"{where}: {fig}: {line}"]
    found = reports_at(fig.path, by_path)
    problems = [f"{where}: Figure {fig.value}: {r.path} was made from a dirty tree"
                for r in found if r.dirty]
    problems += [f"{where}: Figure {fig.value}: {r.path} is on no clean Source line of the "
                 "section" for r in found if r.path not in section.sourced]
    values, reading = figure_values(fig, found)
    problems += [f"{where}: Figure {fig.value}: {p}" for p in reading]
    count = figure_count_problem(fig, len(values))
    if count:
        return problems + [f"{where}: Figure {fig.value} in {fig.path}: {count}"]
    stated = re.split(r"\s*[-–]\s*", fig.value) if fig.agg == "range" else [fig.value]
    actual = aggregate(fig.agg, values)
    if len(stated) != len(actual) or not all(map(agrees, stated, actual)):
        shown = "-".join(f"{v:g}" for v in actual)
        problems.append(f"{where}: Figure {fig.value} {fig.unit}".rstrip() +
                        f" reads {shown} in {fig.path} ({fig.agg or 'value'} of "
                        f"{len(values)} report{'s' if len(values) > 1 else ''})")
    return problems


# --- README.md: its measured figures and what they cite -------------------------------------

DASHES = "\u2010\u2011\u2012\u2013\u2014\u2212"
NUM = r"\d+(?:\.\d+)?k?"
RNG = rf"{NUM}(?: ?- ?{NUM})?"
LIST = rf"~?{RNG}(?:\s*(?:,|and|or|against|to|/|vs\.?)\s*~?{RNG})*"
DURATION_UNITS = r"(?:ms|s|sec|seconds?|min|minutes?|h|hours?)"
# (name, pattern, unit): the order matters, an earlier match masks its text from later ones.
UNIT_PATTERNS = [
    ("duration", r"(?P<list>\d+ min \d+ s)\b", "min"),
    ("rate", rf"(?P<list>{LIST}) ?(?:rec|records|rows|events|messages|msgs|inserts)"
             r"(?:/s\b| per second)", "rec/s"),
    ("cost", rf"(?P<list>{LIST}) ?(?:µs|us|ns|ms|B|KiB|bytes)(?: of \w+)?"
             r"(?:/(?:rec|record|row)\b| per (?:delivered )?(?:record|row|rec)s?\b)", "/rec"),
    ("cost", rf"(?P<list>{LIST}) ?µs\b", "µs"),
    ("ratio", rf"(?<![\w.])(?P<list>{NUM})x(?!\w)", "x"),
    ("runs", r"(?<![\w.])(?P<list>\d+ of \d+)(?![\d.])", "of"),
    ("percentile", rf"\bp(?:50|90|99|99\.9|999) (?:of )?(?P<list>{LIST}) ?{DURATION_UNITS}\b",
     "ms"),
    ("percent", rf"(?P<list>{LIST}) ?%", "%"),
    ("duration", rf"(?P<list>{LIST}) ?{DURATION_UNITS}\b", "s"),
    ("ratio", r"(?<![\w.-])(?P<list>0\.\d+(?: ?- ?0?\.\d+)?)(?![\d.]|\.\d| ?- ?\d)", ""),
]
LIMIT = re.compile(r"(?:at least|at most|up to|no more than|within|every|default|defaults to"
                   r"|[≤≥<>])\s*~?\s*$", re.I)
MEASURED = re.compile(r"\b(?:measured|took|passed|recorded)\b", re.I)
AT_COMMIT = re.compile(r"^ ?(?:\w+ )?at [0-9a-f]{7}\b")
APPROXIMATE = re.compile(r"(?:~|\babout |\baround |\broughly )\s*$")


def canon(text: str) -> str:
    """Text as figures are compared: one dash for ranges and minus, `x` for `×`, no thousands
    separators (12,000 -> 12000), single spaces."""
    text = re.sub(f"[{DASHES}]", "-", text).replace("×", "x")
    text = re.sub(r"[\u00a0\u2009\u202f]", " ", text)
    text = re.sub(r"(?<=\d),(?=\d{3}(?!\d))", "", text)
    return re.sub(r"\s+", " ", text)


def prose(text: str) -> str:
    """A block's text without what carries no figure of its own: HTML comments, inline code,
    link targets and the titles it cites."""
    text = re.sub(r"<!--.*?-->", " ", text, flags=re.S)
    text = re.sub(r"`[^`]*`", " ", text)
    text = re.sub(r"\]\([^)]*\)", "]", text)
    return canon(CITATION.sub(" ", canon(text)))


def readme_blocks(text: str) -> list[Block]:
    """README's blocks outside fenced code: paragraphs, list items (each item, nested ones
    too), table rows and headings, with the line each starts on."""
    blocks: list[Block] = []
    fenced, current = False, None
    for number, line in enumerate(text.splitlines(), 1):
        if re.match(r"^\s*(```|~~~)", line):
            fenced, current = not fenced, None
            continue
        if fenced or not line.strip():
            current = None
            continue
        starts = re.match(r"^\s*(?:[-*+]|\d+[.)])\s|^\s*\||^#", line)
        if current is None or starts or current.text.lstrip().startswith(("|", "#")):
            current = Block(number, line)
            blocks.append(current)
        else:
            current.text += "\n" + line
    return blocks


def measured_duration(sentence: str, start: int, end: int, token: str) -> bool:
    """A duration is a measurement when written as a range, to the second ("10 min 23 s"), as
    approximate, or of a commit ("138 s at 0cff770"), or when its sentence says it was
    measured; otherwise it is a setting or a bound."""
    return "-" in token or " min " in token or bool(APPROXIMATE.search(sentence[:start])) \
        or bool(AT_COMMIT.match(sentence[end:])) or bool(MEASURED.search(sentence))


def match_tokens(kind: str, unit: str, listed: str) -> list[str]:
    """The figures of one match: a phrase ("20 of 20", "10 min 23 s") whole, else each number
    or range of its list, without spaces ("8.5 - 9.0" -> "8.5-9.0")."""
    if kind == "runs" or unit == "min":
        return [listed]
    return [t.replace(" ", "") for t in re.findall(RNG, listed)]


def sentence_figures(sentence: str) -> list[Figure]:
    """The measured figures of one sentence, by UNIT_PATTERNS, skipping limits."""
    found, masked = [], sentence
    for kind, pattern, unit in UNIT_PATTERNS:
        for match in re.finditer(pattern, masked):
            start = match.start("list") + len(match.group("list")) - len(
                match.group("list").lstrip("~"))
            masked = masked[: match.start()] + " " * len(match.group(0)) + masked[match.end():]
            if LIMIT.search(sentence[:start].rstrip("~")):
                continue
            for token in match_tokens(kind, unit, match.group("list").lstrip("~")):
                if kind != "duration" or measured_duration(sentence, start, match.end(),
                                                           token):
                    found.append(Figure(token, unit))
    return found


def block_figures(text: str) -> list[Figure]:
    """The measured figures of a README block (see this module's doc for what counts)."""
    figures = []
    for sentence in re.split(r"(?<=[.;!?])\s+(?=[A-Z(*])", prose(text)):
        figures += sentence_figures(sentence)
    return figures


def number_pattern(number: str) -> str:
    return rf"(?<![\d.]){re.escape(number)}(?!\d|\.\d)"


def k_found(token: str, text: str) -> bool:
    """An abbreviated figure ("27.9k") is found as written or as the number it rounds."""
    if re.search(number_pattern(token), text):
        return True
    digits = len(token[:-1].split(".")[1]) if "." in token else 0
    want = float(token[:-1])
    return any(round(float(n) / 1000, digits) == want
               for n in re.findall(r"(?<![\d.])\d{4,7}(?![\d.])", text))


def single_found(token: str, unit: str, text: str) -> bool:
    """A number is found as written; a small integer (under 100) only beside its unit, so
    that "3 %" is not found in "3 cores"."""
    if token.endswith("k"):
        return k_found(token, text)
    if re.fullmatch(r"\d{1,2}", token) and unit in ("%", "x", "s", "ms", "min", "µs"):
        return bool(re.search(number_pattern(token) + rf" ?{re.escape(unit)}", text))
    return bool(re.search(number_pattern(token), text))


def figure_found(figure: Figure, text: str) -> bool:
    """A figure is in a section's text: a phrase ("20 of 20", "10 min 23 s") as written, a
    range as written or by both its ends, a number as `single_found` says."""
    token = figure.token.lstrip("~")
    if " " in token:
        return re.search(rf"(?<![\d.]){re.escape(token)}(?![\d.])", text) is not None
    ends = re.fullmatch(rf"({NUM})-({NUM})", token)
    if ends:
        whole = rf"{number_pattern(ends.group(1))} ?- ?{re.escape(ends.group(2))}(?!\d)"
        return bool(re.search(whole, text)) or all(
            single_found(e, figure.unit, text) for e in ends.groups())
    return single_found(token, figure.unit, text)


def resolve(cited: str, sections: list[Section]) -> Section | str:
    """The section a README citation names: its whole title, or the one title it starts."""
    cited = canon(cited).strip()
    exact = [s for s in sections if canon(s.title) == cited]
    starts = [s for s in sections if canon(s.title).startswith(cited)
              and not canon(s.title)[len(cited):][:1].isalnum()]
    if exact or len(starts) == 1:
        return (exact or starts)[0]
    if not starts:
        return "names no section of RESULTS.md"
    return "names " + " and ".join(f"'{s.title}'" for s in starts) + ": cite more of one title"


def figure_lines_of(section: Section) -> str:
    """The values a section's Figure lines state, canonical and one a line, for README's count
    of figures a Figure line states."""
    values = []
    for _, line in section.figures:
        fig = parse_figure(line)
        if not isinstance(fig, str):
            values.append(canon(fig.value).replace(" ", "").lstrip("~"))
    return "\n".join(values)


def stated(figure: Figure, section: Section) -> bool:
    """Whether a Figure line of the section states the figure: its value, a range's two ends,
    or the number an abbreviation ("90.0k") rounds."""
    return figure_found(Figure(figure.token, ""), figure_lines_of(section))


def opted_out(text: str) -> bool:
    """Whether a block says its numbers are not measurements (an example in inline code does
    not count)."""
    return bool(OPT_OUT.search(re.sub(r"`[^`]*`", " ", text)))


def citations(block: Block, sections: list[Section]) -> tuple[list[Section], list[str]]:
    """The RESULTS.md sections a README block cites, and the citations that name none."""
    cited, problems = [], []
    for title in CITATION.findall(canon(block.text)):
        section = resolve(title, sections)
        if isinstance(section, str):
            problems.append(f'README.md:{block.line}: RESULTS.md "{title}" {section}')
        else:
            cited.append(section)
    return cited, problems


def figure_problem(where: str, fig: Figure, cited: list[Section],
                   listing: list[str]) -> tuple[str | None, bool]:
    """Why one README figure is not backed by the sections its block cites (or None), and
    whether a Figure line of one of them states it; notes the figure in `listing`."""
    usable = [s for s in cited if not s.citable()]
    backed = [s for s in usable if figure_found(fig, canon("\n".join(s.backed)))]
    doubted = [s for s in backed if figure_found(fig, canon("\n".join(s.unbacked_text)))]
    by_line = any(stated(fig, s) for s in backed)
    listing.append(f"{where}: {fig.token} {fig.unit}: " +
                   (", ".join(f"'{s.title[:50]}'" for s in backed) or "NOT FOUND") +
                   (" (Figure line)" if by_line else ""))
    if not backed:
        return (f"{where}: {fig.token} {fig.unit}".rstrip() + " is in none of the cited "
                "sections: " + "; ".join(f"'{s.title}'" for s in cited)), by_line
    if len(doubted) == len(backed):
        return f"{where}: {fig.token} is among the Unbacked figures of '{doubted[0].title}'", \
            by_line
    return None, by_line


def check_block(block: Block, sections: list[Section], listing: list[str]) -> tuple[list[str],
                                                                                    int, int]:
    """A README block's citations and figures: (problems, figures, figures a Figure line of a
    cited section states)."""
    where = f"README.md:{block.line}"
    cited, problems = citations(block, sections)
    figures = [] if opted_out(block.text) else block_figures(block.text)
    if not figures:
        return problems, 0, 0
    problems += [f"{where}: cites '{s.title}', which {s.citable()}" for s in cited if s.citable()]
    if not cited:
        shown = ", ".join(f.token for f in figures[:6])
        return problems + [f"{where}: measured figures ({shown}) cite no RESULTS.md "
                           'section (RESULTS.md "Title")'], len(figures), 0
    covered = 0
    for fig in figures:
        problem, by_line = figure_problem(where, fig, cited, listing)
        problems += [problem] if problem else []
        covered += by_line
    return problems, len(figures), covered


def check_readme(readme: Path, sections: list[Section], show: bool) -> list[str]:
    """Every README block with a measured figure cites a backed RESULTS.md section that holds
    the figure; prints how many figures, opt-outs and Figure-line coverage."""
    problems, listing, total, covered, blocks = [], [], 0, 0, 0
    marked = 0
    for block in readme_blocks(readme.read_text()):
        marked += opted_out(block.text)
        found, count, by_lines = check_block(block, sections, listing)
        problems += found
        total, covered, blocks = total + count, covered + by_lines, blocks + (count > 0)
    if show:
        print("\n".join(listing))
    print(f"README.md: {total} measured figures in {blocks} blocks, {covered} of them stated "
          f"by a Figure line of the cited section; {marked} blocks marked 'not measured'")
    return problems


# --- the unit tests and the command line ----------------------------------------------------


def unit_tests() -> list[str]:
    """scripts/test_results_provenance.py, run quietly; a failure is a problem of the check."""
    tests = Path(__file__).with_name("test_results_provenance.py")
    if not tests.exists():
        return [f"{tests.name} is missing"]
    sys.dont_write_bytecode = True  # no scripts/__pycache__ left in the checkout
    suite = unittest.defaultTestLoader.discover(str(tests.parent), pattern=tests.name)
    result = unittest.TextTestRunner(stream=io.StringIO(), verbosity=0).run(suite)
    print(f"unit tests: {result.testsRun} run, {len(result.failures) + len(result.errors)} failed")
    return [f"unit test {t.id()} failed:\n{trace}" for t, trace in
            result.failures + result.errors]


def cite(cited: str, found: list[Report]) -> str:
    """The Source line for a cited path, naming what its reports record."""
    if not found:
        return f"{cited}: no report with provenance"
    commits = sorted({r.commit for r in found})
    facts = [f"commit{'s' if len(commits) > 1 else ''} {', '.join(commits)}",
             " and ".join(sorted({r.machine() for r in found})),
             " and ".join(sorted({r.broker for r in found}))]
    line = f"Source: `{cited}` ({'; '.join(facts)})."
    dirty = [r.path for r in found if r.dirty]
    return line + (f"  NOT CLEAN: {', '.join(dirty)}" if dirty else "")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="the check only")
    parser.add_argument("--figures", action="store_true",
                        help="the check, listing README's figures and the sections backing them")
    parser.add_argument("--cite", nargs="+", metavar="PATH", help="print Source lines")
    args = parser.parse_args()
    reports, others, companions = inventory()
    if args.cite:
        by_path = {r.path: r for r in reports}
        for cited in args.cite:
            print(cite(cited, reports_at(cited, by_path)))
        return 0
    if not (args.check or args.figures):
        print_inventory(reports, others, companions)
        print()
    problems, sections = check(ROOT / "RESULTS.md", reports)
    problems += check_readme(ROOT / "README.md", sections, args.figures)
    problems += unit_tests()
    for problem in problems:
        print(problem)
    print(f"{len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
