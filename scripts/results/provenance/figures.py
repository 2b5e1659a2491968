"""RESULTS.md's Figure lines: a Source line only says which reports a section read, so a figure
is checked against its report only when a Figure line names where in the report it comes
from. The grammar is stated in the docstring of scripts/results/results-provenance.py; this module
parses it and compares the stated value with the report's, within the rounding of its printed
decimals.
"""

from __future__ import annotations

import csv
import re
import statistics
from dataclasses import dataclass

from .report_values import report_value
from .reports import Report, reports_at

FIGURE_HEAD = re.compile(r"^Figure:\s*(?P<value>~?\d[\d,]*(?:\.\d+)?(?:\s*[-–]\s*\d[\d,]*"
                         r"(?:\.\d+)?)?)\s*(?P<unit>[^=]*?)\s*=\s*(?P<rhs>.*)$")
FIGURE_TAIL = re.compile(r"\s+in\s+`(?P<path>results/[^`]+)`\s*(?:\((?P<count>\d+) "
                         r"reports?\))?(?P<rest>.*)$")


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
    """A Figure line's parts, or why it does not follow the grammar in the doc of
    scripts/results/results-provenance.py."""
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
