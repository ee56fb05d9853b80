"""A pytest plugin: the book's two workers never idle while models train.

    pytest --nbval-lax -n 2 -p tests.book_schedule tests/train_book_models.py NOTEBOOKS

With pytest-xdist, this plugin hands the work out as ``--dist loadscope`` does (each
notebook's cells, in order, on one worker; the notebooks in the order of the
collection), whatever ``--dist`` says, and further

- makes each book model of ``tests/train_book_models.py`` a unit of its own (loadscope
  would keep the module's items together, on one worker);
- orders the units: the models first, the longest first; then the chapters that load
  no book model; then those that do, which by then find their models trained or being
  trained (they wait for a model still training, see ``aiayn.book.models``). Among the
  chapters, the longest first (their seconds in the last run, which it keeps in the
  file ``--chapter-seconds`` names; else their number of cells), so that no long
  chapter starts last while the other worker has nothing left to do.

Without ``-n`` it only orders the items.
"""

import json
from collections import defaultdict
from functools import cache
from pathlib import Path

from xdist.scheduler import LoadScopeScheduling

TRAINING = "train_book_models.py"
MODEL_NAMES = ("book_model", "BOOK_MODELS", "table3_cpu")  # as the Makefile's grep


def pytest_addoption(parser):
    parser.getgroup("book schedule").addoption(
        "--chapter-seconds",
        help="JSON file of each notebook's seconds: read to order the chapters, "
        "rewritten with this run's",
    )


_seconds: dict[str, float] = defaultdict(float)  # notebook file name -> seconds


def pytest_runtest_logreport(report):
    _seconds[Path(notebook_of(report.nodeid)).name] += report.duration


def pytest_sessionfinish(session):
    seconds_file = session.config.getoption("chapter_seconds")
    if seconds_file and _seconds and not hasattr(session.config, "workerinput"):
        seconds = read_seconds(seconds_file) | _seconds
        Path(seconds_file).write_text(json.dumps(seconds, indent=1, sort_keys=True))


def read_seconds(seconds_file: str | None) -> dict[str, float]:
    if seconds_file and Path(seconds_file).is_file():
        return json.loads(Path(seconds_file).read_text())
    return {}


def notebook_of(nodeid: str) -> str:
    return nodeid.split("::")[0]


def is_training(nodeid: str) -> bool:
    return notebook_of(nodeid).endswith(TRAINING)


@cache
def loads_a_model(notebook: Path) -> bool:
    text = notebook.read_text(encoding="utf-8")
    return any(name in text for name in MODEL_NAMES)


def pytest_collection_modifyitems(session, config, items):
    cells: dict[str, int] = defaultdict(int)  # notebook -> its items
    first_index: dict[str, int] = {}  # notebook -> the index of its first item
    for index, item in enumerate(items):
        cells[notebook_of(item.nodeid)] += 1
        first_index.setdefault(notebook_of(item.nodeid), index)
    seconds = read_seconds(config.getoption("chapter_seconds"))

    def order(indexed):
        index, item = indexed
        notebook = notebook_of(item.nodeid)
        if is_training(item.nodeid):
            return (0, 0, index)  # the models in their own order, the longest first
        path = Path(str(item.path))
        rank = 2 if loads_a_model(path) else 1
        # (seconds if known, else cells) descending; a notebook's cells stay in order
        length = seconds.get(path.name, cells[notebook])
        return (rank, -length, first_index[notebook], index)

    items[:] = [item for _, item in sorted(enumerate(items), key=order)]


class ModelsFirstScheduling(LoadScopeScheduling):
    """loadscope, in the collection's order, with each book model a unit of its own."""

    def __init__(self, config, log=None):
        super().__init__(config, log)
        self.config.option.loadscopereorder = False  # keep the order made above

    def _split_scope(self, nodeid: str) -> str:
        if is_training(nodeid):
            return nodeid
        return super()._split_scope(nodeid)


def pytest_xdist_make_scheduler(config, log):
    return ModelsFirstScheduling(config, log)
