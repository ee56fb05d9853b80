"""The definitions a chapter teaches, and the library's; ``make sync`` makes them equal.

A chapter teaches a component by defining it in a code cell; ``src/aiayn`` holds the
definition that the final chapters and the command line import. The library is the
source: every top-level function or class that a chapter defines under the name of
something in ``aiayn`` must be, character for character, the library's source.

    python tests/book_code.py           # copy each library definition into the chapters
    python tests/book_code.py --check   # only list the chapters that differ (exit 1)

tests/test_book_matches_library.py runs the check in ``make test``.
"""

import argparse
import ast
import importlib
import inspect
import pathlib
import pkgutil
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass

import aiayn

BOOK = pathlib.Path(__file__).resolve().parents[1] / "book"
CODE_CELL = re.compile(r"^```\{code-cell\}[^\n]*\n(.*?)^```", re.S | re.M)
CELL_OPTION = re.compile(r"^:[\w-]+:.*$", re.M)


def library_definitions() -> dict[str, object]:
    """Every function and class defined in any aiayn module, by name."""
    definitions = {}
    for module_info in pkgutil.walk_packages(aiayn.__path__, prefix="aiayn."):
        command_line = ("aiayn.__main__", "aiayn.cli", "aiayn.cli_runs")
        if module_info.name in command_line:
            continue
        module = importlib.import_module(module_info.name)
        for name, member in vars(module).items():
            if (inspect.isfunction(member) or inspect.isclass(member)) and (
                member.__module__ == module.__name__
            ):
                if name in definitions:
                    raise ValueError(f"{name} is defined in two aiayn modules")
                definitions[name] = member
    return definitions


@dataclass(frozen=True)
class Taught:
    """One top-level definition in a chapter's code cell, and where its text lies."""

    chapter: pathlib.Path
    name: str
    source: str
    start: int  # character offsets of ``source`` in the chapter's text
    end: int


def chapter_definitions(chapter: pathlib.Path) -> Iterator[Taught]:
    """Each top-level def/class in the chapter's code cells, in order."""
    text = chapter.read_text(encoding="utf-8")
    for cell in CODE_CELL.finditer(text):
        code = cell.group(1)
        # cell options (":tags: [...]") become blank lines: line numbers stay right
        try:
            tree = ast.parse(CELL_OPTION.sub("", code))
        except SyntaxError:
            continue  # IPython syntax (magics): such a cell defines nothing of aiayn
        line_starts = [0, *(m.end() for m in re.finditer("\n", code))]
        for node in tree.body:
            if isinstance(node, ast.FunctionDef | ast.ClassDef):
                first = min([node.lineno] + [d.lineno for d in node.decorator_list])
                start = line_starts[first - 1]
                end = line_starts[node.end_lineno] - 1  # the definition's last newline
                yield Taught(
                    chapter,
                    node.name,
                    code[start:end],
                    cell.start(1) + start,
                    cell.start(1) + end,
                )


def taught_definitions(library: dict[str, object]) -> list[Taught]:
    """Every chapter definition named like a library definition."""
    return [
        taught
        for chapter in sorted(BOOK.glob("*.md"))
        for taught in chapter_definitions(chapter)
        if taught.name in library
    ]


def library_source(definition: object) -> str:
    return inspect.getsource(definition).rstrip("\n")


def sync(chapter: pathlib.Path, library: dict[str, object]) -> bool:
    """Replace the chapter's taught definitions by the library's; True if it changed."""
    text = chapter.read_text(encoding="utf-8")
    taught = [t for t in chapter_definitions(chapter) if t.name in library]
    for t in reversed(taught):  # from the end, so earlier offsets stay valid
        text = text[: t.start] + library_source(library[t.name]) + text[t.end :]
    changed = text != chapter.read_text(encoding="utf-8")
    if changed:
        chapter.write_text(text, encoding="utf-8")
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="change nothing")
    args = parser.parse_args(argv)
    library = library_definitions()
    differing = sorted(
        {
            f"{t.chapter.name}: {t.name}"
            for t in taught_definitions(library)
            if t.source != library_source(library[t.name])
        }
    )
    if args.check:
        print("\n".join(differing) or "every taught definition is the library's")
        return 1 if differing else 0
    for chapter in sorted(BOOK.glob("*.md")):
        if sync(chapter, library):
            print(f"updated {chapter.relative_to(BOOK.parent)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
