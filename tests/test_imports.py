"""The library's layers: each imports only from itself and the layers below it.

The reference model needs nothing else of aiayn, the fast paths need only the model,
and so on up to the command line. A reader can then study a layer without the ones
above it, and a change high up (a tool, the CLI) cannot break the model. Every module
of src/aiayn is read with ``ast``, nothing is imported: an import at a module's top
level runs when the module is imported, one inside a function only when it is called,
so the two are reported separately. A failure names the import: file, line, module.
"""

import ast
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"

# Lowest first; a module may import from its own layer and from the layers before it.
# A module's layer is its package: aiayn.model.masks is in aiayn.model.
LAYERS = (
    ("aiayn.model",),  # the reference model: nothing of aiayn outside it
    ("aiayn.fast",),  # the fast paths, checked equal to the reference
    ("aiayn.decoding",),
    ("aiayn.tasks",),
    ("aiayn.evaluation",),
    ("aiayn.train",),
    ("aiayn.tools", "aiayn.book"),
    # the package's front door (aiayn/__init__.py re-exports the model) and the
    # command line; a module of the library imports a name from where it is defined
    ("aiayn", "aiayn.cli", "aiayn.cli_runs", "aiayn.__main__"),
)


@dataclass(frozen=True)
class Import:
    """One import of an aiayn module by another, and where it is written."""

    importer: str  # the module that imports, e.g. "aiayn.tasks.digits"
    imported: str  # the module imported, e.g. "aiayn.tasks.base"
    path: Path  # the module's file, from the project's root: src/aiayn/...
    line: int
    function: str | None  # the function it is written in; None: the module's top level
    type_checking: bool = False  # under `if TYPE_CHECKING:`: never runs

    def __str__(self) -> str:
        where = f" (inside {self.function})" if self.function else ""
        return (
            f"{self.path.as_posix()}:{self.line}: "
            f"{self.importer} imports {self.imported}{where}"
        )


def module_name(path: Path, src: Path) -> str:
    """``src/aiayn/tasks/base.py`` -> ``aiayn.tasks.base``; a package's __init__ is the
    package."""
    parts = path.relative_to(src).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def is_type_checking(test: ast.expr) -> bool:
    """``TYPE_CHECKING`` or ``typing.TYPE_CHECKING``."""
    name = test.attr if isinstance(test, ast.Attribute) else getattr(test, "id", None)
    return name == "TYPE_CHECKING"


class ImportReader(ast.NodeVisitor):
    """Collects the imports of one module, with the function each sits in."""

    def __init__(self, importer: str, is_package: bool, modules: set[str], path: Path):
        self.importer, self.modules, self.path = importer, modules, path
        # the package that a relative import (`from . import x`) starts from
        self.package = importer if is_package else importer.rpartition(".")[0]
        self.functions: list[str] = []
        self.type_checking = False
        self.imports: list[Import] = []

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self.functions.append(node.name)
        self.generic_visit(node)
        self.functions.pop()

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_If(self, node: ast.If) -> None:
        if not is_type_checking(node.test):
            self.generic_visit(node)
            return
        self.type_checking = True
        for statement in node.body:
            self.visit(statement)
        self.type_checking = False
        for statement in node.orelse:
            self.visit(statement)

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self.add(alias.name, node.lineno)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        base = node.module or ""
        if node.level:  # relative: from the package, one level up per extra dot
            package = self.package.split(".")
            package = package[: len(package) - (node.level - 1)]
            base = ".".join([*package, *([base] if base else [])])
        for alias in node.names:
            submodule = f"{base}.{alias.name}"  # `from aiayn.model import masks`
            self.add(submodule if submodule in self.modules else base, node.lineno)

    def add(self, imported: str, line: int) -> None:
        if imported == "aiayn" or imported.startswith("aiayn."):
            function = ".".join(self.functions) or None
            where = (self.path, line, function, self.type_checking)
            self.imports.append(Import(self.importer, imported, *where))


def read_imports(src: Path) -> list[Import]:
    """Every import of an aiayn module written in a module of ``src``/aiayn."""
    paths = sorted((src / "aiayn").rglob("*.py"))
    modules = {module_name(path, src) for path in paths}
    imports = []
    for path in paths:
        name, is_package = module_name(path, src), path.name == "__init__.py"
        reader = ImportReader(name, is_package, modules, path.relative_to(src.parent))
        reader.visit(ast.parse(path.read_text(encoding="utf-8"), filename=str(path)))
        imports += reader.imports
    return list(dict.fromkeys(imports))  # `from m import a, b`: one import of m


def layer(module: str) -> int:
    """The index in LAYERS of the module's package (its first two names)."""
    package = ".".join(module.split(".")[:2])
    for index, packages in enumerate(LAYERS):
        if package in packages:
            return index
    raise KeyError(f"{module}: its package {package} is in none of LAYERS")


def upward(imports: list[Import]) -> list[str]:
    """The imports of a higher layer than the importer's."""
    return [str(i) for i in imports if layer(i.imported) > layer(i.importer)]


def cycle(imports: list[Import]) -> list[Import]:
    """One cycle of imports (each importing the next one's importer), or []."""
    edges: dict[str, list[Import]] = {}
    for each in imports:
        edges.setdefault(each.importer, []).append(each)
    finished: set[str] = set()
    path: list[Import] = []  # the imports followed from the start of the search
    on_path: set[str] = set()

    def search(module: str) -> list[Import]:
        on_path.add(module)
        for each in edges.get(module, []):
            if each.imported in on_path:  # back where this path passed: a cycle
                start = next(
                    (n for n, i in enumerate(path) if i.importer == each.imported),
                    len(path),
                )
                return [*path[start:], each]
            if each.imported not in finished:
                path.append(each)
                if found := search(each.imported):
                    return found
                path.pop()
        on_path.discard(module)
        finished.add(module)
        return []

    for module in sorted(edges):
        if module not in finished and (found := search(module)):
            return found
    return []


IMPORTS = read_imports(SRC)
AT_IMPORT = [i for i in IMPORTS if i.function is None and not i.type_checking]
DEFERRED = [i for i in IMPORTS if i.function is not None]


def test_every_module_is_in_a_layer():
    modules = {module_name(p, SRC) for p in (SRC / "aiayn").rglob("*.py")}
    unplaced = []
    for module in sorted(modules | {i.imported for i in IMPORTS}):
        try:
            layer(module)
        except KeyError as error:
            unplaced.append(str(error))
    assert unplaced == [], "add to LAYERS in tests/test_imports.py:\n" + "\n".join(
        unplaced
    )


def test_the_reference_model_imports_nothing_else_of_aiayn():
    """Not the fast paths, not the tasks: the model a chapter teaches stands alone."""
    outside = [
        str(i) for i in IMPORTS if layer(i.importer) == 0 and layer(i.imported) != 0
    ]
    assert outside == [], "aiayn.model imports outside itself:\n" + "\n".join(outside)


def test_top_level_imports_go_down_the_layers():
    found = upward([i for i in IMPORTS if i.function is None])
    assert found == [], "imports of a higher layer:\n" + "\n".join(found)


def test_imports_inside_functions_go_down_the_layers():
    """An import moved into a function hides a dependency; it does not remove it."""
    found = upward(DEFERRED)
    assert found == [], "imports of a higher layer:\n" + "\n".join(found)


def test_no_cycle_among_top_level_imports():
    """A cycle works or fails by the order in which modules happen to be imported."""
    found = cycle(AT_IMPORT)
    assert found == [], "a cycle of imports:\n" + "\n".join(map(str, found))


def write_package(src: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = src / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_the_reader_resolves_relative_deferred_and_type_only_imports(tmp_path):
    write_package(
        tmp_path / "src",
        {
            "aiayn/__init__.py": "from .model import Transformer\n",
            "aiayn/model/__init__.py": "from . import masks\nfrom .masks import pad\n",
            "aiayn/model/masks.py": "import torch\n",
            "aiayn/tasks/base.py": (
                "from typing import TYPE_CHECKING\n"
                "from aiayn.model import masks, Transformer\n"
                "if TYPE_CHECKING:\n"
                "    from aiayn.train import loop\n"
                "def run():\n"
                "    from ..cli import main\n"
            ),
        },
    )
    found = {
        (i.importer, i.imported, i.line, i.function, i.type_checking)
        for i in read_imports(tmp_path / "src")
    }
    assert found == {
        ("aiayn", "aiayn.model", 1, None, False),
        ("aiayn.model", "aiayn.model.masks", 1, None, False),
        ("aiayn.model", "aiayn.model.masks", 2, None, False),
        ("aiayn.tasks.base", "aiayn.model.masks", 2, None, False),
        ("aiayn.tasks.base", "aiayn.model", 2, None, False),
        ("aiayn.tasks.base", "aiayn.train", 4, None, True),
        ("aiayn.tasks.base", "aiayn.cli", 6, "run", False),
    }


def test_the_checks_find_an_upward_import_and_a_cycle(tmp_path):
    write_package(
        tmp_path / "src",
        {
            "aiayn/model/masks.py": "from aiayn.fast.cache import DecoderCache\n",
            "aiayn/fast/cache.py": "\n\nimport aiayn.model.masks\n",
        },
    )
    imports = read_imports(tmp_path / "src")
    assert upward(imports) == [
        "src/aiayn/model/masks.py:1: aiayn.model.masks imports aiayn.fast.cache"
    ]
    assert [(i.importer, i.line) for i in cycle(imports)] == [
        ("aiayn.fast.cache", 3),
        ("aiayn.model.masks", 1),
    ]


def test_a_digit_task_loads_no_translation_library():
    """The translation task's libraries load only when a translation task is asked
    for: the toy tasks of Part II run without them."""
    program = (
        "import sys, aiayn.tasks\n"
        "for name in ('copy', 'reverse', 'reverse-repeats'):\n"
        "    aiayn.tasks.get_task(name)\n"
        "print(*sorted({'num2words', 'tokenizers', 'sacrebleu'} & set(sys.modules)))\n"
    )
    command = [sys.executable, "-c", program]
    done = subprocess.run(command, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [], "loaded by a digit task"
