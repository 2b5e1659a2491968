#!/usr/bin/env python3
"""Inventory of the bench reports under results/, and a check that RESULTS.md, the write-ups it
indexes and README.md state only figures a report of a committed tree backs.

RESULTS.md is an index: the current claims, and a list of studies, each written up in the
README.md of the directory under results/ that holds its reports (results/notes-*/ and
results/history/ for text with no report directory of its own). The index and the write-ups are
only evidence where a report of a committed tree backs each figure, on the machine and broker
the report records; README.md quotes them. This script makes all three checkable instead of a
matter of trust.

A report is a file the bench wrote with its provenance: a Markdown report whose header carries
`- commit:` and `- machine:` lines (`bench run`, `bench tune`, `bench versus`, and command logs
recorded with `scripts/results/record.sh`), or a JSON-lines report whose first line is
`{"provenance": ...}` and which has no Markdown report of the same run beside it. Everything else
under results/ (plots, logs, console captures, scenario files, and every README.md: a write-up)
carries no provenance of its own and cannot back a figure.

RESULTS.md and each write-up (results/**/README.md) cite their evidence with lines of this form,
one or more per section; a path is relative to the repository's root wherever the line is (in
the index or in a write-up), as is every `results/...` path the check reads:

    Source: `results/DIR/RUN.md` (commit C; 2 cores, CPU; broker B)

A cited path may be a directory (ending in `/`): every report in it, recursively. The check
fails (exit 1) when a Source line cites a path that is missing, holds no report, holds a report
made from a tree with uncommitted changes, or does not name each cited report's commit, CPU,
cores and broker as the report records them (one line may cite several paths; it must then
name the facts of all their reports). A section whose figures no clean report backs carries a
line starting `> Unbacked:` instead; the paths it names need only exist, and a section that
names a dirty report anywhere must carry one. Every `##` and `###` section of the index and of
each write-up needs a Source line, an Unbacked line, or `> No figures.` of its own. A Markdown
link there is resolved from its file's directory, as a viewer resolves it, and must name a file
that exists and, with a `#fragment`, one of that file's headings (GitHub's anchor for it): the
index leads to the write-ups, and each write-up to the index and to what supersedes it.

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
                                     recorded with scripts/results/record.sh: counts, exit status)

for example `Figure: 6.2 ms = median of "p50 ms" of latency-500 in
`results/latency-47e6bdc/20261202-*.md` (3 reports)`. PATH is a report, a directory or a glob,
as on Source lines; its reports must be clean and cited by the section's Source lines. VALUE
matches within the rounding of its printed decimals (34,934 within 0.5; 0.67 within 0.005).

README.md and every page under docs/ (but docs/reference/, generated from the code, whose numbers
are settings) are read too. Their blocks (a paragraph, a list item, a table row, a heading; fenced code
is not read) that state a measured figure must cite a section as `RESULTS.md "Title"` (the title
or its start, unique among the `##`/`###` titles of the index and of every write-up: a section
keeps its title when it moves out of the index) or as `results/DIR/README.md "Title"` (among
that write-up's titles), and each such figure must appear in the text of one of the sections
cited (its title, body, Source and Figure lines) and not in its Unbacked lines; a cited section
must have a clean Source line and must not be withdrawn.
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

`--check` also runs the unit tests in scripts/results/test_results_provenance.py. The check itself is
in scripts/results/provenance/, one module per role; this file is its entry point and states its rules.

Usage:
    scripts/results/results-provenance.py            # inventory, summary, then the check
    scripts/results/results-provenance.py --check    # the check only
    scripts/results/results-provenance.py --figures  # the check, listing README's figures and backing
    scripts/results/results-provenance.py --cite PATH...   # the Source line for PATH
"""

import sys
from pathlib import Path

sys.dont_write_bytecode = True  # importing scripts/results/provenance/ leaves no __pycache__ behind
HERE = str(Path(__file__).resolve().parent)
if HERE not in sys.path:
    sys.path.insert(0, HERE)

from provenance.cli import main  # noqa: E402 (after the two lines above, which it needs)

if __name__ == "__main__":
    sys.exit(main(__doc__.split("\n")[0]))
