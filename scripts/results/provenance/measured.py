"""What counts as a measured figure in README prose, and whether such a figure is in a
section's text. README may quote only what RESULTS.md and its write-ups back, so the check
must tell a measurement from a setting or a bound without anyone marking it; the rules (units
only measurements carry, limits, durations) are stated in the docstring of
scripts/results/results-provenance.py and implemented here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# `RESULTS.md "Title"` (a section of the index or of any write-up it leads to) or
# `results/DIR/README.md "Title"` (a section of that write-up); in backticks: an example
CITATION = re.compile(r'(?<![`/\w])(RESULTS\.md|results/[\w./-]+/README\.md),?\s+"([^"]+)"')
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


@dataclass
class Figure:
    """A measured figure found in README prose: its canonical token ("8.5-9.0", "0.72",
    "20 of 20") and the unit that made it one."""

    token: str
    unit: str


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
    """The measured figures of a README block (see the doc of scripts/results/results-provenance.py for what
    counts)."""
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
