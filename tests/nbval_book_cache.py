"""A pytest plugin: the chapters nbval executed become the book build's execution cache.

nbval runs every chapter (converted to ``_build/nbval/NAME.ipynb``) cell by cell. With
``--book-cache DIR``, each chapter whose cells all passed is stored, with the outputs
that nbval collected, in the jupyter-cache at DIR that the book build reads
(``execute_notebooks: cache`` in _config.yml). It is keyed as myst-nb keys it: on the
chapter's source (``--book-chapters``, default book/NAME.md), read the way myst-nb reads
it. The strict build that follows then renders what nbval ran instead of running every
chapter a second time. A chapter that is not in the cache, or whose cells changed
since, is executed by the build as usual.

    pytest --nbval-lax -p tests.nbval_book_cache --book-cache CACHE NOTEBOOKS

With pytest-xdist (``-n 2 --dist loadscope``: each notebook whole on one worker),
every worker stores the chapters it ran, one worker at a time.
"""

from collections import defaultdict
from pathlib import Path

from filelock import FileLock
from jupyter_cache import get_cache
from jupyter_cache.base import CacheBundleIn
from myst_nb.core.read import read_myst_markdown_notebook

_outputs: dict[str, dict[int, list]] = defaultdict(dict)  # notebook -> cell -> outputs
_failed: set[str] = set()  # notebooks with a cell that did not pass
_seconds: dict[str, float] = defaultdict(float)


def pytest_addoption(parser):
    group = parser.getgroup("nbval book cache")
    group.addoption("--book-cache", help="jupyter-cache folder of the book build")
    group.addoption(
        "--book-chapters", default="book", help="folder of the NAME.md sources"
    )


def pytest_collection_modifyitems(session, config, items):
    """Leave out the chapters that the cache holds with their cells as they are now:
    they ran, and passed, against the same library (the Makefile empties the cache
    when a file under src/ changes). Nothing is executed twice: `make book` and
    `make test` fill the same cache."""
    cache_dir = config.getoption("book_cache")
    if not cache_dir or not Path(cache_dir).is_dir():
        return
    cache = get_cache(cache_dir)
    chapters = Path(config.getoption("book_chapters"))
    notebooks = {Path(str(item.path)) for item in items}
    stored = {
        notebook
        for notebook in notebooks
        if notebook.suffix == ".ipynb"
        and is_stored(cache, chapters / f"{notebook.stem}.md")
    }
    kept = [item for item in items if Path(str(item.path)) not in stored]
    if len(kept) < len(items):
        config.hook.pytest_deselected(
            items=[item for item in items if Path(str(item.path)) in stored]
        )
        items[:] = kept


def is_stored(cache, source: Path) -> bool:
    """Whether the cache holds the chapter at ``source`` with its current cells."""
    if not source.is_file():
        return False
    text = source.read_text(encoding="utf-8")
    notebook = read_myst_markdown_notebook(text, path=source)
    try:
        cache.match_cache_notebook(notebook)
    except KeyError:
        return False
    return True


def pytest_runtest_teardown(item):
    outputs = getattr(item, "test_outputs", None)  # set by nbval once a cell has run
    if outputs is not None:
        _outputs[item.nodeid.split("::")[0]][item.cell_num] = outputs


def pytest_runtest_logreport(report):
    notebook = report.nodeid.split("::")[0]
    _seconds[notebook] += report.duration
    if report.failed:
        _failed.add(notebook)


def pytest_sessionfinish(session):
    cache_dir = session.config.getoption("book_cache")
    if not cache_dir:
        return
    if _outputs:  # this process ran cells: the only one, or one of pytest-xdist's
        # the workers of pytest -n write one cache, one at a time
        with FileLock(Path(cache_dir).with_suffix(".lock")):
            store(get_cache(cache_dir), Path(session.config.getoption("book_chapters")))
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None and not hasattr(session.config, "workerinput"):
        stored = len(get_cache(cache_dir).list_cache_records())
        reporter.write_line(f"book cache {cache_dir}: {stored} chapters stored")


def store(cache, chapters: Path) -> None:
    """Put every chapter whose cells all passed, with its outputs, into ``cache``."""
    for notebook, outputs in sorted(_outputs.items()):
        source = chapters / f"{Path(notebook).stem}.md"
        if notebook in _failed or not source.is_file():
            continue
        executed = chapter_with_outputs(source, outputs)
        if executed is None:
            continue
        seconds = {"execution_seconds": _seconds[notebook]}
        bundle = CacheBundleIn(executed, str(source.resolve()), data=seconds)
        cache.cache_notebook_bundle(bundle, check_validity=False, overwrite=True)


def chapter_with_outputs(source: Path, outputs: dict[int, list]):
    """The chapter as myst-nb reads it, each code cell with the outputs nbval collected;
    None unless every code cell ran."""
    text = source.read_text(encoding="utf-8")
    notebook = read_myst_markdown_notebook(text, path=source)
    code_cells = [cell for cell in notebook.cells if cell.cell_type == "code"]
    if sorted(outputs) != list(range(len(code_cells))):
        return None
    for number, cell in enumerate(code_cells):
        cell.outputs = outputs[number]
        cell.execution_count = number + 1
    return notebook
