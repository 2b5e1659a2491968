"""Unit tests of scripts/results/results-provenance.py (its modules under scripts/results/provenance/): what it
counts as a measured figure in README, how it finds one in a section of RESULTS.md or of a
write-up, how it parses and compares a Figure line, and how it reads the index and the
write-ups under results/ (their sections, Source and Figure lines, and links).

Run: python3 -B -m unittest discover -s scripts -p 'test_results_provenance.py' (and by
`scripts/results/results-provenance.py --check`, which CI runs); -B, since discover imports
scripts/results/provenance/ and this file before either can turn bytecode off.
"""

from __future__ import annotations

import contextlib
import io
import sys
import tempfile
import unittest
from pathlib import Path

sys.dont_write_bytecode = True  # importing scripts/results/provenance/ leaves no __pycache__ behind
HERE = str(Path(__file__).resolve().parent)
if HERE not in sys.path:
    sys.path.insert(0, HERE)

# after the lines above, which they need
from provenance import reports  # noqa: E402
from provenance.figures import aggregate, agrees, check_figure, parse_figure  # noqa: E402
from provenance.links import slug  # noqa: E402
from provenance.measured import Figure, block_figures, canon, figure_found, prose  # noqa: E402
from provenance.readme import Block, check_block, readme_blocks, resolve  # noqa: E402
from provenance.report_values import number_in, table_value  # noqa: E402
from provenance.sections import Section, check, write_ups  # noqa: E402


def tokens(text: str) -> list[str]:
    return [f.token for f in block_figures(text)]


class Canon(unittest.TestCase):
    def test_separators_dashes_and_times_sign(self):
        self.assertEqual(canon("12,000 rec/s, 8.5–9.0 s, 15.6×, −0.31 %"),
                         "12000 rec/s, 8.5-9.0 s, 15.6x, -0.31 %")

    def test_a_list_keeps_its_commas(self):
        self.assertEqual(canon("14.3, 12.6, 12.7 µs"), "14.3, 12.6, 12.7 µs")

    def test_prose_drops_code_comments_and_cited_titles(self):
        text = 'at `--scale 0.1` <!-- 0.5 --> (RESULTS.md "Drain at 500 rec/s")'
        self.assertNotIn("0.1", prose(text))
        self.assertNotIn("0.5", prose(text))
        self.assertNotIn("500", prose(text))


class MeasuredFigures(unittest.TestCase):
    def test_units_only_measurements_carry(self):
        self.assertEqual(tokens("the drain reached 34,934 rec/s"), ["34934"])
        self.assertEqual(tokens("it cost 16-24 µs per record"), ["16-24"])
        self.assertEqual(tokens("ours drained 15.6x faster"), ["15.6"])
        self.assertEqual(tokens("0 rewinds in 20 of 20 runs"), ["20 of 20"])
        self.assertEqual(tokens("0.52 and 0.30 of the ceiling"), ["0.52", "0.30"])
        self.assertEqual(tokens("costs fell by 8-18 %"), ["8-18"])
        self.assertEqual(tokens("341 B of WAL per row"), ["341"])
        self.assertEqual(tokens("27.9k against 57-66k rec/s"), ["27.9k", "57-66k"])

    def test_percentile_values(self):
        self.assertEqual(tokens("latency-500 p50 6.2 ms, p99 33.5 ms"), ["6.2", "33.5"])

    def test_durations_only_where_measured(self):
        self.assertEqual(tokens("a heartbeat of 5 s gives a 15 s session"), [])
        self.assertEqual(tokens("a new leader 8.5-9.0 s after the kill"), ["8.5-9.0"])
        self.assertEqual(tokens("it registers in ~10 ms"), ["10"])
        self.assertEqual(tokens("about 2 minutes after the warm-up"), ["2"])
        self.assertEqual(tokens("the suite took 26 s"), ["26"])
        self.assertEqual(tokens("recorded alone: 138 s at 0cff770"), ["138"])
        self.assertEqual(tokens("bench.sh: 10 min 23 s in all"), ["10 min 23 s"])

    def test_limits_and_defaults_are_not_measurements(self):
        self.assertEqual(tokens("at least 0.95 of their target rate"), [])
        self.assertEqual(tokens("warns at most every 10 s, within 10 % of the last"), [])
        self.assertEqual(tokens("at `min_drain_rate` (default 1000 records/s)"), [])
        self.assertEqual(tokens("a thread at least 90 % busy"), [])
        self.assertEqual(tokens("p99 ≤500 ms"), [])

    def test_plain_configuration_numbers(self):
        self.assertEqual(tokens("bounds 100 – 1,000, buckets (16-64), 3 × the timeout"), [])

    def test_a_ratio_is_not_split_from_its_range(self):
        self.assertEqual(tokens("each refusal ended it 0.2-2.4 s after the start"), ["0.2-2.4"])


class Blocks(unittest.TestCase):
    TEXT = "\n".join([
        "# Title", "",
        "A paragraph", "on two lines.", "",
        "- an item", "  continued", "  - a nested item", "",
        "| a | b |", "|---|---|", "| 1 | 2 |", "",
        "```sh", "bench run  # 50,000 rec/s", "```",
    ])

    def test_paragraphs_items_rows_and_no_fenced_code(self):
        blocks = readme_blocks(self.TEXT)
        self.assertEqual([b.line for b in blocks], [1, 3, 6, 8, 10, 11, 12])
        self.assertEqual(blocks[1].text, "A paragraph\non two lines.")
        self.assertEqual(blocks[2].text, "- an item\n  continued")
        self.assertFalse(any("50,000" in b.text for b in blocks))


class Found(unittest.TestCase):
    SECTION = canon("drain 34,934 rec/s; p99 262-279 ms; at 70, 46 % HOT; 3 cores; "
                    "the ceiling fell from 90.0k; 27,927 rec/s; 0 rewinds in 20 of 20 runs")

    def found(self, token: str, unit: str = "") -> bool:
        return figure_found(Figure(token, unit), self.SECTION)

    def test_numbers_as_written(self):
        self.assertTrue(self.found("34934", "rec/s"))
        self.assertFalse(self.found("34.9", "rec/s"))
        self.assertFalse(self.found("4934", "rec/s"))

    def test_ranges_whole_or_by_their_ends(self):
        self.assertTrue(self.found("262-279", "s"))
        self.assertFalse(self.found("46-70", "%"))
        self.assertTrue(figure_found(Figure("8.5-9.0", "s"), "8.5 and 9.0 s"))
        self.assertTrue(figure_found(Figure("8.5-9.0", "s"), "8.5 - 9.0"))

    def test_a_small_integer_only_beside_its_unit(self):
        self.assertTrue(self.found("46", "%"))
        self.assertFalse(self.found("3", "%"))

    def test_thousands_abbreviated(self):
        self.assertTrue(self.found("27.9k", "rec/s"))
        self.assertTrue(self.found("90.0k", "rec/s"))
        self.assertFalse(self.found("28.0k", "rec/s"))

    def test_phrases(self):
        self.assertTrue(self.found("20 of 20", "of"))
        self.assertFalse(self.found("19 of 20", "of"))


class Citations(unittest.TestCase):
    SECTIONS = [Section(1, "Zombie fencing on Kafka, fixed (issue 34): 0 rewinds"),
                Section(2, "Zombie fencing on Kafka (issue 34, first measurement)"),
                Section(3, "Fillfactor 50 (issue 52): HOT")]

    def test_a_title_or_its_unique_start(self):
        self.assertEqual(resolve("Fillfactor 50", self.SECTIONS).line, 3)
        self.assertEqual(resolve("Zombie fencing on Kafka, fixed", self.SECTIONS).line, 1)

    def test_a_citation_in_inline_code_is_an_example(self):
        block = Block(3, 'cite it as `RESULTS.md "Title"`')
        self.assertEqual(check_block(block, self.SECTIONS, []), ([], 0, 0))

    def test_an_ambiguous_or_unknown_title(self):
        self.assertIn("cite more", resolve("Zombie fencing on Kafka", self.SECTIONS))
        self.assertIn("no section", resolve("Fillfactor 5", self.SECTIONS))
        self.assertIn("no section", resolve("Nothing", self.SECTIONS))

    def test_a_block_without_citation_fails_and_a_marked_one_passes(self):
        block = Block(7, "drained 40,000 rec/s here")
        problems, figures, _ = check_block(block, self.SECTIONS, [])
        self.assertEqual(figures, 1)
        self.assertIn("cite no RESULTS.md section", problems[0])
        marked = Block(7, "offered 40,000 rec/s <!-- not measured: an input -->")
        self.assertEqual(check_block(marked, self.SECTIONS, []), ([], 0, 0))

    def test_a_figure_only_in_unbacked_lines_fails(self):
        section = Section(4, "Backed in part", clean_sources=1,
                          backed=["drain 41,000 rec/s", "p99 2.2 s"],
                          unbacked_text=["> Unbacked: the p99 2.2 s"])
        ok = Block(9, 'drained 41,000 rec/s (RESULTS.md "Backed in part")')
        self.assertEqual(check_block(ok, [section], [])[0], [])
        doubted = Block(9, 'p99 2.2 s (RESULTS.md "Backed in part")')
        self.assertIn("Unbacked", check_block(doubted, [section], [])[0][0])

    def test_a_write_up_keeps_its_titles_and_can_be_named(self):
        sections = [Section(1, "Current claims"),
                    Section(9, "Fillfactor 50 (issue 52): HOT", file="results/ff/README.md"),
                    Section(4, "Fillfactor 70", file="results/old/README.md")]
        self.assertEqual(resolve("Fillfactor 50", sections).file, "results/ff/README.md")
        self.assertEqual(resolve("Fillfactor", sections, "results/old/README.md").line, 4)
        self.assertIn("no section of results/old/README.md",
                      resolve("Fillfactor 50", sections, "results/old/README.md"))
        block = Block(2, 'as results/ff/README.md "Fillfactor 50" says')
        self.assertEqual(check_block(block, sections, []), ([], 0, 0))

    def test_a_section_without_clean_source_cannot_back(self):
        section = Section(5, "History", backed=["drain 41,000 rec/s"])
        block = Block(9, 'drained 41,000 rec/s (RESULTS.md "History")')
        self.assertIn("no clean Source line", check_block(block, [section], [])[0][0])


class FigureLines(unittest.TestCase):
    def test_a_table_cell(self):
        fig = parse_figure('Figure: 34,934 rec/s = "drain rec/s" of drain in '
                           '`results/q/r.md`')
        self.assertEqual((fig.value, fig.unit, fig.column, fig.row, fig.path, fig.agg),
                         ("34,934", "rec/s", "drain rec/s", ["drain"], "results/q/r.md", None))

    def test_an_aggregate_with_its_count_and_a_note(self):
        fig = parse_figure('Figure: 6.2 ms = median of "p50 ms" of latency-500 in '
                           '`results/l/` (3 reports); the newest')
        self.assertEqual((fig.agg, fig.count, fig.row), ("median", 3, ["latency-500"]))

    def test_rows_of_several_cells_a_json_field_and_a_regex(self):
        fig = parse_figure('Figure: 15.6x = "ours/goharvest" of drain, ours in `results/v.md`')
        self.assertEqual(fig.row, ["drain", "ours"])
        fig = parse_figure('Figure: 8.231 = .latency_ms.p50 of latency-500 in `results/l.md`')
        self.assertEqual((fig.field_path, fig.row), ("latency_ms.p50", ["latency-500"]))
        fig = parse_figure("Figure: 138 s = /after (\\d+) s/ in `results/f/fencing.md`")
        self.assertEqual(fig.regex, "after (\\d+) s")
        fig = parse_figure('Figure: 52,351 = "records/s" of "DB-only mark+purge, x" in '
                           '`results/q.md`')
        self.assertEqual(fig.row, ["DB-only mark+purge, x"])

    def test_what_does_not_parse(self):
        self.assertIsInstance(parse_figure("Figure: about 6 ms"), str)
        self.assertIsInstance(parse_figure('Figure: 6 = "p50" of x'), str)
        self.assertIsInstance(parse_figure("Figure: 6 = p50 in `results/x.md`"), str)

    def test_rounding_follows_the_printed_decimals(self):
        self.assertTrue(agrees("34,934", 34934.4))
        self.assertFalse(agrees("34,934", 34935))
        self.assertTrue(agrees("0.67", 0.674))
        self.assertFalse(agrees("0.67", 0.676))
        self.assertTrue(agrees("6.2", 6.2))

    def test_aggregates(self):
        self.assertEqual(aggregate("median", [8.2, 5.3, 6.2]), [6.2])
        self.assertEqual(aggregate("median", [1, 2]), [1.5])
        self.assertEqual(aggregate("range", [8.2, 5.3, 6.2]), [5.3, 8.2])
        self.assertEqual(aggregate(None, [7.0]), [7.0])


REPORT = """# Benchmark run 20260101-000000

- commit: abc1234
- machine: 2 cores (AMD EPYC), 24 GiB

| ceiling | records | records/s |
|---|---:|---:|
| DB-only mark+purge, concurrently (best of 1000) | 100000 | 52351 |

| scenario | drain rec/s | x lower ceiling | p50 ms |
|---|---:|---:|---:|
| drain | 34934 | 0.67 | - |
| drain-transactional | 20000 | 0.38 | - |
| latency-500 | - | - | ≤13.5 |

- exit status: 0, after 138 s
"""


class Cells(unittest.TestCase):
    def test_cells_by_column_and_row(self):
        self.assertEqual(table_value(REPORT, "drain rec/s", ["drain"]), ["34934"])
        self.assertEqual(table_value(REPORT, "records/s", ["DB-only mark+purge"]), ["52351"])
        self.assertEqual(table_value(REPORT, "p50 ms", ["latency-500"]), ["≤13.5"])
        self.assertEqual(table_value(REPORT, "p99", ["drain"]), [])

    def test_numbers_in_cells(self):
        self.assertEqual(number_in("≤13.5"), 13.5)
        self.assertEqual(number_in("499 (500 / 500)"), 499)
        self.assertEqual(number_in("15.6x"), 15.6)
        self.assertIsNone(number_in("-"))

    def test_a_figure_line_against_a_report(self):
        root = reports.ROOT
        with tempfile.TemporaryDirectory() as tmp:
            reports.ROOT = Path(tmp)  # a tree of its own: nothing is written under results/
            try:
                (reports.ROOT / "results" / "q").mkdir(parents=True)
                path = reports.ROOT / "results" / "q" / "r.md"
                path.write_text(REPORT)
                (path.parent / "r2.md").write_text(REPORT)
                rel = str(path.relative_to(reports.ROOT))
                self.figure_checks(rel, reports.markdown_report(path))
            finally:
                reports.ROOT = root

    def figure_checks(self, rel: str, report) -> None:
        other = rel.replace("r.md", "r2.md")
        section = Section(1, "s", sourced={rel, other})
        by_path = {rel: report, other: reports.markdown_report(reports.ROOT / other)}
        check = lambda line: check_figure(line, "here", section, by_path)
        self.assertEqual(check(f'Figure: 0.67 = "x lower ceiling" of drain in `{rel}`'), [])
        self.assertEqual(check(f"Figure: 138 s = /after (\\d+) s/ in `{rel}`"), [])
        wrong = check(f'Figure: 0.68 = "x lower ceiling" of drain in `{rel}`')
        self.assertIn("reads 0.67", wrong[0])
        json_wrong = check(f"Figure: 7 = .drain_records_per_s of drain in `{rel}`")
        self.assertIn("no report under it has .drain_records_per_s of drain", json_wrong[0])
        self.assertIn("2 reports have it", check(f'Figure: 5 = "x lower ceiling" of drain in '
                                                 f'`{rel.rsplit("/", 1)[0]}/`')[0])
        self.assertIn("no report under it has",
                      check(f'Figure: 1 = "x lower ceiling" of steady in `{rel}`')[0])
        unsourced = check_figure(f'Figure: 0.67 = "x lower ceiling" of drain in `{rel}`',
                                 "here", Section(1, "s"), by_path)
        self.assertIn("no clean Source line", unsourced[0])


WRITE_UP = """# A study

Moved from [the index](../../RESULTS.md).

## Drain at 34,934 rec/s (issue 1)

Source: `results/q/r.md` (commit abc1234; 2 cores, AMD EPYC; broker unrecorded)

Figure: 34,934 rec/s = "drain rec/s" of drain in `results/q/r.md`

## No report here

Superseded by [the first](#drain-at-34934-recs-issue-1) and [nothing](../gone/README.md).
"""

INDEX = """# Results

| study | status |
|---|---|
| [Drain](results/q/README.md#drain-at-34934-recs-issue-1) | current |
| [Missing](results/q/README.md#no-such-heading) | superseded |

## Studies

> No figures.
"""


class WriteUps(unittest.TestCase):
    def test_slugs_as_github_makes_them(self):
        self.assertEqual(slug("`bench tune` against an interleaved control (issue 52)"),
                         "bench-tune-against-an-interleaved-control-issue-52")
        self.assertEqual(slug("Capacity: 10M rows at 34,718 rec/s, verified"),
                         "capacity-10m-rows-at-34718-recs-verified")
        self.assertEqual(slug("Snapshot mode (issue 18): drain 1.80× MP/R"),
                         "snapshot-mode-issue-18-drain-180-mpr")

    def test_the_index_and_the_write_ups_are_checked_alike(self):
        root = reports.ROOT
        with tempfile.TemporaryDirectory() as tmp:
            reports.ROOT = Path(tmp)  # a tree of its own: nothing is written under results/
            try:
                (reports.ROOT / "results" / "q").mkdir(parents=True)
                (reports.ROOT / "results" / "q" / "r.md").write_text(REPORT)
                (reports.ROOT / "results" / "q" / "README.md").write_text(WRITE_UP)
                (reports.ROOT / "RESULTS.md").write_text(INDEX)
                files = write_ups()
                self.assertEqual([str(f.relative_to(reports.ROOT)) for f in files],
                                 ["RESULTS.md", "results/q/README.md"])
                found, others, _ = reports.inventory()
                self.assertEqual([r.path for r in found], ["results/q/r.md"])
                self.assertIn("results/q/README.md", others)
                with contextlib.redirect_stdout(io.StringIO()):  # its counts: not this test's
                    problems, sections = check(files, found)
            finally:
                reports.ROOT = root
        self.assertEqual([(s.file, s.line) for s in sections],
                         [("RESULTS.md", 8), ("results/q/README.md", 5),
                          ("results/q/README.md", 11)])
        self.assertEqual(sorted(problems), [
            "RESULTS.md:6: link to results/q/README.md#no-such-heading: no heading "
            "#no-such-heading in results/q/README.md",
            "results/q/README.md:11: section 'No report here' has no Source, Unbacked or "
            "'No figures.' line",
            "results/q/README.md:13: link to ../gone/README.md: ../gone/README.md is missing"])


if __name__ == "__main__":
    unittest.main()
