#!/usr/bin/env python3
"""Inventory of the bench reports under results/ and a check of RESULTS.md's citations.

RESULTS.md is only evidence where a report of a committed tree backs each figure, on the machine
and broker the report records; this script makes that checkable instead of a matter of trust.

A report is a file the bench wrote with its provenance: a Markdown report whose header carries
`- commit:` and `- machine:` lines (`bench run`, `bench tune`, `bench versus`), or a JSON-lines
report whose first line is `{"provenance": ...}` and which has no Markdown report of the same run
beside it. Everything else under results/ (plots, logs, console captures, scenario files) carries
no provenance of its own and cannot back a figure.

RESULTS.md cites its evidence with lines of this form, one or more per section:

    Source: `results/DIR/RUN.md` (commit C; 2 cores, CPU; broker B)

A cited path may be a directory (ending in `/`): every report in it, recursively. The check
fails (exit 1) when a Source line cites a path that is missing, holds no report, holds a report
made from a tree with uncommitted changes, or does not name each cited report's commit, CPU,
cores and broker as the report records them. A section whose figures no clean report backs
carries a line starting `> Unbacked:` instead; the paths it names need only exist, and a
section that names a dirty report anywhere must carry one. Every `##` and `###` section needs a
Source line, an Unbacked line, or `> No figures.` of its own.

Usage:
    scripts/results-provenance.py            # inventory, summary, then the check
    scripts/results-provenance.py --check    # the check only
    scripts/results-provenance.py --cite PATH...   # the Source line for PATH
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from dataclasses import dataclass
from fnmatch import fnmatch
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HEADER_LINES = 20
DIRTY = "(with uncommitted changes)"
TITLE = re.compile(r"^# (Benchmark run|Tuning sweep|goharvest side by side) (\S+)")
MACHINE = re.compile(r"^(\d+) cores \((.*)\), (\d+) GiB$")
CITED = re.compile(r"`(results/[^`\s]*)`")


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
    """A `##` or `###` section of RESULTS.md and the markers found in it."""

    line: int
    title: str
    marked: bool = False
    unbacked: bool = False
    dirty_mentions: tuple[str, ...] = ()


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


def check(results_md: Path, reports: list[Report]) -> list[str]:
    """Problems with RESULTS.md's citations, and its Source and Unbacked counts."""
    by_path = {r.path: r for r in reports}
    problems: list[str] = []
    sections: list[Section] = []
    sources = 0
    for number, line in enumerate(results_md.read_text().splitlines(), 1):
        where = f"RESULTS.md:{number}"
        if re.match(r"^#{2,3} ", line):
            sections.append(Section(number, line.lstrip("# ")))
            continue
        section = sections[-1] if sections else Section(0, "preamble")
        if line.startswith("Source:"):
            section.marked, sources = True, sources + 1
            problems += check_source(line, where, by_path)
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
    for s in sections:
        if not s.marked:
            problems.append(f"RESULTS.md:{s.line}: section '{s.title}' has no Source, "
                            "Unbacked or 'No figures.' line")
        if s.dirty_mentions and not s.unbacked:
            problems.append(f"RESULTS.md:{s.line}: section '{s.title}' names reports made from "
                            f"a dirty tree ({s.dirty_mentions[0]}, ...) without an Unbacked line")
    unbacked = sum(s.unbacked for s in sections)
    print(f"RESULTS.md: {len(sections)} sections, {sources} Source lines, "
          f"{unbacked} sections with an Unbacked line")
    return problems


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
    parser.add_argument("--cite", nargs="+", metavar="PATH", help="print Source lines")
    args = parser.parse_args()
    reports, others, companions = inventory()
    if args.cite:
        by_path = {r.path: r for r in reports}
        for cited in args.cite:
            print(cite(cited, reports_at(cited, by_path)))
        return 0
    if not args.check:
        print_inventory(reports, others, companions)
        print()
    problems = check(ROOT / "RESULTS.md", reports)
    for problem in problems:
        print(problem)
    print(f"{len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
