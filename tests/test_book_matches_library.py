"""The book and the library show the same code.

A chapter teaches a component by defining it in a code cell; ``src/aiayn`` holds the
definition that the final chapters and the command line import. Every top-level function
or class that a chapter defines under the name of something in ``aiayn`` must be,
character for character, the library's source. Editing one without the other fails this
test.
"""

import ast
import importlib
import inspect
import pathlib
import pkgutil
import re

import pytest

import aiayn

BOOK = pathlib.Path(__file__).resolve().parents[1] / "book"
CODE_CELL = re.compile(r"^```\{code-cell\}[^\n]*\n(.*?)^```", re.S | re.M)
CELL_OPTION = re.compile(r"^:[\w-]+:.*$", re.M)


def library_definitions() -> dict[str, object]:
    """Every function and class defined in any aiayn module, by name."""
    definitions = {}
    for module_info in pkgutil.iter_modules(aiayn.__path__, prefix="aiayn."):
        if module_info.name == "aiayn.__main__":
            continue
        module = importlib.import_module(module_info.name)
        for name, member in vars(module).items():
            if (inspect.isfunction(member) or inspect.isclass(member)) and (
                member.__module__ == module.__name__
            ):
                assert name not in definitions, (
                    f"{name} is defined in two aiayn modules"
                )
                definitions[name] = member
    return definitions


def chapter_definitions():
    """(chapter, name, source) for each top-level def/class in a chapter's cells."""
    for chapter in sorted(BOOK.glob("*.md")):
        for cell in CODE_CELL.findall(chapter.read_text(encoding="utf-8")):
            code = CELL_OPTION.sub("", cell)
            try:
                tree = ast.parse(code)
            except SyntaxError:
                # IPython syntax (magics); such a cell defines nothing of the library
                continue
            lines = code.splitlines()
            for node in tree.body:
                if isinstance(node, ast.FunctionDef | ast.ClassDef):
                    first = min([node.lineno] + [d.lineno for d in node.decorator_list])
                    yield (
                        chapter.name,
                        node.name,
                        "\n".join(lines[first - 1 : node.end_lineno]),
                    )


LIBRARY = library_definitions()
TAUGHT = [(ch, name, src) for ch, name, src in chapter_definitions() if name in LIBRARY]


def test_library_definitions_are_found():
    assert {"MultiHeadAttention", "Transformer", "make_batch", "greedy_decode"} <= set(
        LIBRARY
    )


@pytest.mark.parametrize(
    ("chapter", "name", "source"), TAUGHT, ids=[f"{c}:{n}" for c, n, _ in TAUGHT]
)
def test_chapter_code_is_library_code(chapter, name, source):
    library_source = inspect.getsource(LIBRARY[name])
    assert source.strip() == library_source.strip(), (
        f"{chapter} defines {name} differently from src/aiayn: copy one into the other"
    )
