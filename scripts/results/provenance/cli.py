"""The command line of scripts/results/results-provenance.py: what it prints and its exit status, kept
apart from the rules so that the rules can be imported (by the unit tests) without running
anything.
"""

from __future__ import annotations

import argparse
import io
import sys
import unittest
from collections import Counter
from pathlib import Path

from .readme import check_readme
from .reports import ROOT, Report, inventory, reports_at
from .sections import check, write_ups


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


def unit_tests() -> list[str]:
    """scripts/results/test_results_provenance.py, run quietly; a failure is a problem of the check."""
    tests = Path(__file__).resolve().parent.parent / "test_results_provenance.py"
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


def main(description: str) -> int:
    """The command line; `description` is the first line of the entry point's doc."""
    parser = argparse.ArgumentParser(description=description)
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
    problems, sections = check(write_ups(), reports)
    problems += check_readme(ROOT / "README.md", sections, args.figures)
    # docs/reference/ is generated from the code: its numbers are settings, not measurements.
    for page in sorted((ROOT / "docs").rglob("*.md")):
        if page.parent.name != "reference":
            problems += check_readme(page, sections, args.figures, str(page.relative_to(ROOT)))
    problems += unit_tests()
    for problem in problems:
        print(problem)
    print(f"{len(problems)} problems")
    return 1 if problems else 0
