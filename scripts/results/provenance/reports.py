"""The reports under results/ and what they record of how they were made.

Only a report carries the provenance (commit, a clean tree, machine, broker) that lets a
figure stand as evidence; every other rule asks this module which reports a cited path names
and what they record, so that what counts as a report is decided in one place.

ROOT is read at call time (tests point it at a tree of their own).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from fnmatch import fnmatch
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent.parent
HEADER_LINES = 20
DIRTY = "(with uncommitted changes)"
TITLE = re.compile(r"^# (Benchmark run|Tuning sweep|goharvest side by side) (\S+)")
MACHINE = re.compile(r"^(\d+) cores \((.*)\), (\d+) GiB$")


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
        if path.suffix == ".md" and path.name != "README.md":  # a write-up, never a report
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
