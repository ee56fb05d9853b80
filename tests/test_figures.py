"""Figures a reader can read, checked in the chapters' sources, without a build.

The book's text column is about 672 CSS pixels wide at a 1280-pixel window, and
matplotlib draws at 100 dpi: a figure wider than 6.7 inches is shrunk to fit, and its
text with it. Text drawn at 8 pt is about 11 pixels; below that, or shrunk, it drops
under the 9 CSS pixels a reader can read comfortably. So in every code cell of
book/*.md this flags, with chapter:line,

- ``figsize=(w, h)`` with a literal width ``w`` over 6.7 (inches);
- a literal font size under 8 pt: ``fontsize=7``, ``labelsize=7`` (``tick_params``),
  ``title_fontsize=7``, the named sizes ``"x-small"`` and ``"xx-small"`` (6.9 and
  5.8 pt at matplotlib's default 10 pt), and ``"font.size": 7`` in rcParams.

Widths and sizes computed at run time (``figsize=(3.1 * n + 1.4, 3.5)``) and the
library's own plots (aiayn.book.plots) are not seen here; the browser check
(tests/browser/test_figure_legibility.py) measures every figure as it is displayed.

Run it on its own, as a chapter's author, to list what to fix:

    .venv/bin/python tests/test_figures.py [book/attention.md ...]

As a test, it checks the scanner on a seeded chapter, then every chapter of the book.
"""

import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
BOOK = ROOT / "book"
MAX_WIDTH = 6.7  # inches: the text column at 100 dpi
MIN_FONT = 8.0  # points
SMALL_NAMED = {"xx-small": 5.79, "x-small": 6.94}  # matplotlib's scale at 10 pt

NUMBER = r"(\d+(?:\.\d*)?|\.\d+)"
# the width is a literal when a comma follows it: `figsize=(4.2 * n, 3)` is skipped
FIGSIZE = re.compile(r"\bfigsize\s*=\s*[(\[]\s*" + NUMBER + r"\s*,")
# a literal size is followed by the end of the argument, not by more arithmetic
END = r"(?=\s*[,)\]}\n#]|\s*$)"
FONT_KEYWORD = re.compile(
    r"\b(\w*fontsize|labelsize|titlesize)\s*=\s*(?:" + NUMBER + END + r"|"
    r"""["'](x-small|xx-small)["'])"""
)
FONT_RC = re.compile(
    r"""["'](?:[\w.]*\.)?(?:size|fontsize|labelsize|titlesize)["']\s*\]?\s*[:=]\s*"""
    + NUMBER
    + END
)
FENCE = re.compile(r"^(`{3,}|~{3,})\s*\{code-cell\}")


def code_lines(text: str):
    """(line number, line) for every line inside a {code-cell} of a MyST notebook,
    its YAML header (between `---` lines, or `:key:` options) left out."""
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        i += 1
        if not opening:
            continue
        fence = opening.group(1)
        if i < len(lines) and lines[i].strip() == "---":  # YAML header
            i += 1
            while i < len(lines) and lines[i].strip() != "---":
                i += 1
            i += 1
        while i < len(lines) and lines[i].startswith(":"):  # short options
            i += 1
        while i < len(lines) and lines[i].rstrip() != fence:
            yield i + 1, lines[i]
            i += 1
        i += 1


def without_comment(line: str) -> str:
    """The line up to a `#` that starts a comment (not one inside a string)."""
    quote = None
    for at, char in enumerate(line):
        if quote:
            if char == quote and line[at - 1] != "\\":
                quote = None
        elif char in "'\"":
            quote = char
        elif char == "#":
            return line[:at]
    return line


def figure_offenders(text: str, name: str) -> list[str]:
    """Each too-wide figure and too-small font in the code cells of one chapter,
    as "name:line: what"."""
    found = []
    at, wide, small = f"{name}:", f" > {MAX_WIDTH} in", f" < {MIN_FONT:g} pt"
    for number, line in code_lines(text):
        code = without_comment(line)
        for match in FIGSIZE.finditer(code):
            width = float(match.group(1))
            if width > MAX_WIDTH:
                found.append(f"{at}{number}: figsize width {width:g} in{wide}")
        for match in FONT_KEYWORD.finditer(code):
            keyword, size, named = match.groups()
            points = SMALL_NAMED[named] if named else float(size)
            if points < MIN_FONT:
                shown = f'"{named}"' if named else size
                found.append(f"{at}{number}: {keyword}={shown} ({points:g} pt){small}")
        for match in FONT_RC.finditer(code):
            points = float(match.group(1))
            if points < MIN_FONT:
                found.append(f"{at}{number}: rcParams font size {points:g} pt{small}")
    return found


def chapters() -> list[pathlib.Path]:
    return sorted(BOOK.glob("*.md"))


def book_offenders(paths=None) -> list[str]:
    found = []
    for path in paths or chapters():
        found += figure_offenders(path.read_text(encoding="utf-8"), path.stem)
    return found


# --- the check of the check ----------------------------------------------------------
SEEDED = """\
# A chapter

Prose mentions figsize=(12, 4) and fontsize=6: not code, not flagged.

```{code-cell} ipython3
---
tags: [hide-input]
mystnb:
  figure:
    caption: 'A caption that says figsize=(9, 3), fontsize=5'
---
fig, ax = plt.subplots(figsize=(6.7, 4))
fig, axes = plt.subplots(1, 3, figsize=(11, 2.6), layout="constrained")
fig, axes = plt.subplots(1, 3, figsize=(4.2 * n, 3.4))
ax.text(0, 0, "a", fontsize=8)  # fontsize=6 in a comment is not flagged
draw_box(ax, 0, 0, "#", "#d8d3ee", fontsize=7)
ax.text(0, 0, "b", fontsize=7.5, color="grey")
ax.tick_params(labelsize=7)
ax.legend(fontsize="x-small")
ax.legend(fontsize="small", title_fontsize=6)
ax.text(0, 0, "c", fontsize=7 * scale)
plt.rcParams["font.size"] = 7
plt.rcParams.update({"axes.labelsize": 9, "xtick.labelsize": 6})
```

```{code-cell} ipython3
:tags: [remove-cell]
plt.figure(figsize=[7.5, 3])
```
"""
SEEDED_EXPECTED = [
    "seeded:13: figsize width 11 in > 6.7 in",
    "seeded:16: fontsize=7 (7 pt) < 8 pt",
    "seeded:17: fontsize=7.5 (7.5 pt) < 8 pt",
    "seeded:18: labelsize=7 (7 pt) < 8 pt",
    'seeded:19: fontsize="x-small" (6.94 pt) < 8 pt',
    "seeded:20: title_fontsize=6 (6 pt) < 8 pt",
    "seeded:22: rcParams font size 7 pt < 8 pt",
    "seeded:23: rcParams font size 6 pt < 8 pt",
    "seeded:28: figsize width 7.5 in > 6.7 in",
]


def test_scanner_catches_each_seeded_offender_and_nothing_else():
    assert figure_offenders(SEEDED, "seeded") == SEEDED_EXPECTED


def test_scanner_reads_every_chapter():
    """The chapters' code cells are found: the check cannot pass by reading nothing."""
    cells = {
        path.stem: sum(1 for _ in code_lines(path.read_text(encoding="utf-8")))
        for path in chapters()
    }
    assert sum(cells.values()) > 1000, cells
    assert any(
        FIGSIZE.search(line)
        for path in chapters()
        for _, line in code_lines(path.read_text(encoding="utf-8"))
    )


def test_chapter_figures_are_legible():
    found = book_offenders()
    listed = "\n".join(found)
    assert found == [], f"{len(found)} figures too wide or fonts too small:\n{listed}"


if __name__ == "__main__":
    paths = [pathlib.Path(arg) for arg in sys.argv[1:]] or None
    offenders = book_offenders(paths)
    print("\n".join(offenders) or "no figure too wide, no font too small")
    sys.exit(1 if offenders else 0)
