"""A value read out of one report, as a Figure line's selector names it: a Markdown table's
cell, a field of the JSON-lines companion, or a regex's match. Kept apart from the Figure-line
grammar because it is about the reports' formats, which change with the bench, not with the
rule.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from . import reports


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
    text = (reports.ROOT / path).read_text(errors="replace")
    if fig.regex is not None:
        match = re.search(fig.regex, text, re.M)
        cells = [match.group(1) if match and match.groups() else match.group(0)] if match else []
    elif fig.column is not None:
        cells = table_value(text, fig.column, fig.row)
    else:
        cells = json_value(reports.ROOT / path, fig.field_path, fig.row)
    values = {v for v in (number_in(c) for c in cells) if v is not None}
    if len(values) > 1:
        return f"reads {sorted(values)} in {path}: name its row more fully"
    return values.pop() if values else None
