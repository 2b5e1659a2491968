"""README.md's rule: a block that states a measured figure cites the sections that back it
(sections of RESULTS.md, the index, or of the write-ups under results/ it leads to), and each
figure is in one of them. README is what most readers see, so every number it presents as
measured must lead back to a clean report through RESULTS.md.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from .figures import parse_figure
from .measured import CITATION, Figure, block_figures, canon, figure_found

OPT_OUT = re.compile(r"<!--\s*not measured:\s*\S.*?-->", re.S)


@dataclass
class Block:
    """A README block (paragraph, list item, table row, heading) and its first line."""

    line: int
    text: str


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


def resolve(cited: str, sections: list[Section], file: str = "RESULTS.md") -> Section | str:
    """The section a README citation names: its whole title, or the one title it starts.
    `RESULTS.md "Title"` looks in RESULTS.md and every write-up (a section keeps its title
    when it moves out of the index); `results/DIR/README.md "Title"` in that write-up only."""
    cited = canon(cited).strip()
    if file != "RESULTS.md":
        sections = [s for s in sections if s.file == file]
    exact = [s for s in sections if canon(s.title) == cited]
    starts = [s for s in sections if canon(s.title).startswith(cited)
              and not canon(s.title)[len(cited):][:1].isalnum()]
    if exact or len(starts) == 1:
        return (exact or starts)[0]
    if not starts:
        where = "RESULTS.md or its write-ups" if file == "RESULTS.md" else file
        return f"names no section of {where}"
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


def citations(block: Block, sections: list[Section],
              page: str = "README.md") -> tuple[list[Section], list[str]]:
    """The sections a block of `page` cites, and the citations that name none."""
    cited, problems = [], []
    for file, title in CITATION.findall(canon(block.text)):
        section = resolve(title, sections, file)
        if isinstance(section, str):
            problems.append(f'{page}:{block.line}: {file} "{title}" {section}')
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


def check_block(block: Block, sections: list[Section], listing: list[str],
                page: str = "README.md") -> tuple[list[str], int, int]:
    """A page's block's citations and figures: (problems, figures, figures a Figure line of a
    cited section states)."""
    where = f"{page}:{block.line}"
    cited, problems = citations(block, sections, page)
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


def check_readme(readme: Path, sections: list[Section], show: bool,
                 page: str = "README.md") -> list[str]:
    """Every block of a page (README.md, a page of docs/) with a measured figure cites a backed
    RESULTS.md section that holds the figure; prints how many figures, opt-outs and Figure-line
    coverage."""
    problems, listing, total, covered, blocks = [], [], 0, 0, 0
    marked = 0
    for block in readme_blocks(readme.read_text()):
        marked += opted_out(block.text)
        found, count, by_lines = check_block(block, sections, listing, page)
        problems += found
        total, covered, blocks = total + count, covered + by_lines, blocks + (count > 0)
    if show:
        print("\n".join(listing))
    print(f"{page}: {total} measured figures in {blocks} blocks, {covered} of them stated "
          f"by a Figure line of the cited section; {marked} blocks marked 'not measured'")
    return problems
